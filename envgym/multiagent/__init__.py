"""Multi-agent text environments: the per-agent text contract and a base for turn-based games.

PettingZoo gives two multi-agent APIs: :class:`pettingzoo.AECEnv` (agents act one at a time) and
:class:`pettingzoo.ParallelEnv` (every live agent acts at once). envgym's multi-agent text
environments are real instances of those classes whose observations and actions are strings, and
they keep the single-agent contract of :class:`envgym.core.TextEnv` *per agent*:

* ``infos[agent]`` carries every key of :data:`envgym.core.INFO_KEYS` after ``reset`` and every
  ``step``; ``turn`` and ``invalid_actions`` count that agent's own actions;
* ``observation_space(agent)`` and ``action_space(agent)`` are :class:`envgym.spaces.Text` and the
  same object on every call (so seeding a space sticks), see :class:`TextSpaces`;
* any value is accepted as an action: a malformed or illegal one is an *invalid move*: the state
  is unchanged, the player is told why in its next observation and plays again;
* ``reset(seed=...)`` is deterministic.

:class:`TextAECEnv` implements all of that for turn-based win/lose/draw games (tic-tac-toe,
connect four): a game writes only its rules. :func:`envgym.testing.check_aec_env` and
:func:`envgym.testing.check_parallel_env` run PettingZoo's own API and seed tests plus the envgym
contract.

Conventions of :class:`TextAECEnv` (documented once here, referenced by the env cards):

* **Invalid moves.** The player keeps the turn and sees ``Invalid action ...: <why>``. After
  ``invalid_limit`` invalid moves *in a row* (default 3) the player **forfeits**: the game ends,
  the offender gets the loss (``loss_reward``, termination reason ``invalid_limit``) and every
  other player wins (``success_reward``, reason ``success``). Each invalid move also costs
  ``invalid_penalty`` in the ``invalid_action_reward`` component. Since every valid move fills
  the board and invalid runs are bounded, every game ends.
* **Rewards.** ``rewards[agent]`` is that agent's reward for the last step; ``last()`` returns the
  sum since the agent last acted (PettingZoo's cumulative reward), and
  ``infos[agent]["reward_components"]`` breaks down that same sum by component.
* **Dead agents.** After the game ends every agent is terminated; as PettingZoo requires, each one
  must then be stepped with ``None`` once, which removes it from ``agents``.

Modules: :mod:`~envgym.multiagent.text` (action text, agent infos, observations and spaces) and
:mod:`~envgym.multiagent.aec` (:class:`TextAECEnv`, :class:`Played`).
"""

from __future__ import annotations

from envgym.errors import UnknownAgentError
from envgym.multiagent.aec import DEFAULT_INVALID_LIMIT, Played, TextAECEnv
from envgym.multiagent.text import TextObservation, TextSpaces, action_text, agent_info, shown_action

__all__ = [
    "DEFAULT_INVALID_LIMIT",
    "Played",
    "TextAECEnv",
    "TextObservation",
    "TextSpaces",
    "UnknownAgentError",
    "action_text",
    "agent_info",
    "shown_action",
]
