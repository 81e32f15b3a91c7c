"""Tiny environments for the CLI and perf-script tests (registered only by those tests).

* :class:`LineEnv` walks a counter to a target: word actions (``left``/``right``), a finite
  admissible set, a solver (:class:`Solver`) for the oracle agent.
* :class:`SeedlessLineEnv` breaks the contract (ignores the seed), so ``envgym check`` fails.
* :class:`NimAEC` is a two-seat PettingZoo AEC game (take 1 or 2 stones; taking the last wins).

:func:`register_toys` adds them to envgym's registry under the ``clitoy/`` namespace and makes
``envgym.agents.solvers.clitoy_line`` resolve to this module; :func:`unregister_toys` undoes both.
"""

from __future__ import annotations

import random
import re
import sys
from typing import Any

from pettingzoo import AECEnv

from envgym import EnvSpec, InvalidAction, Task, TextEnv, Transition
from envgym.rollout import Policy
from envgym.spaces import Text

LINE_ID = "clitoy/Line-v0"
LINE_LONG_ID = "clitoy/Line-Long-v0"
SEEDLESS_ID = "clitoy/Seedless-v0"
NIM_ID = "clitoy/Nim-v0"
SOLVER_MODULE = "envgym.agents.solvers.clitoy_line"


class LineEnv(TextEnv):
    """Walk from 0 to the target on a number line.

    Observation: ``Position: p. Target: t.``
    Actions: ``left`` or ``right`` (``left`` is not admissible at 0).
    Reward components: success_reward (1 on reaching the target), invalid_action_reward, step_cost_reward.
    Episode end: reaching the target (success) or ``max_turns``.
    Arguments: length (largest target; the target is drawn from 2..length).
    """

    name = "clitoy_line"
    default_max_turns = 20

    def __init__(self, *, length: int = 5, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(length, int) or isinstance(length, bool) or length < 2:
            from envgym.errors import InvalidKwargsError

            raise InvalidKwargsError(f"length must be an integer >= 2, got {length!r}.")
        self.length = length
        self.position = 0
        self.target = 2

    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        self.position = 0
        self.target = rng.randint(2, self.length)
        return Task(id=f"line-{self.target}-{rng.randrange(10**6)}", goal=f"Walk right to {self.target}.")

    def _observe(self) -> str:
        return f"Position: {self.position}. Target: {self.target}."

    def _parse(self, text: str) -> int:
        word = text.lower()
        if word not in ("left", "right"):
            raise InvalidAction("expected 'left' or 'right'.")
        return -1 if word == "left" else 1

    def _apply(self, move: int) -> Transition:
        if self.position + move < 0:
            raise InvalidAction("you are at 0 and cannot go further left.")
        self.position += move
        if self.position == self.target:
            return Transition("You reached the target!", {"success_reward": 1.0}, terminated=True, success=True)
        return Transition(self._observe())

    def admissible_actions(self) -> list[str]:
        return ["left", "right"] if self.position > 0 else ["right"]

    def progress(self) -> float:
        return self.position / self.target


class SeedlessLineEnv(LineEnv):
    """Breaks the contract: the task ignores the seed."""

    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        return super()._generate(random.Random(), options)


class Solver(Policy):
    """Oracle for :class:`LineEnv`: reads the observation and always walks towards the target."""

    def __init__(self, env_id: str, seed: int | None) -> None:
        self.env_id = env_id

    def act(self, observation: str, info: dict[str, Any]) -> str:
        match = re.search(r"Position: (\d+)\. Target: (\d+)\.", observation)
        if match is None:
            return "right"
        return "right" if int(match[1]) < int(match[2]) else "left"


class NimAEC(AECEnv):
    """Two players take 1 or 2 stones in turn; whoever takes the last stone wins (+1, loser -1).

    Actions: ``take 1`` or ``take 2`` (``info["admissible_actions"]``); anything else is an
    invalid step (-0.1, same player again). Arguments: stones (None: drawn from 5..9 by the seed).
    """

    metadata = {"name": "clitoy_nim_v0", "render_modes": ["ansi"], "is_parallelizable": False}

    def __init__(self, *, stones: int | None = None, render_mode: str | None = None) -> None:
        super().__init__()
        self.stones_arg = stones
        self.render_mode = render_mode
        self.possible_agents = ["player_0", "player_1"]
        self._space = Text()
        self.pile = 0

    def observation_space(self, agent: str) -> Text:
        return self._space

    def action_space(self, agent: str) -> Text:
        return self._space

    def _admissible(self) -> list[str]:
        return [f"take {n}" for n in (1, 2) if n <= self.pile]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        rng = random.Random(seed)
        self.pile = self.stones_arg if self.stones_arg is not None else rng.randint(5, 9)
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {a: {"admissible_actions": self._admissible(), "action_valid": True} for a in self.agents}
        self.agent_selection = self.agents[0]

    def observe(self, agent: str) -> str:
        return f"Stones left: {self.pile}. You are {agent}. Take 1 or 2; taking the last stone wins."

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        self.rewards = dict.fromkeys(self.agents, 0.0)
        match = re.fullmatch(r"\s*(?:take\s+)?([12])\s*", action) if isinstance(action, str) else None
        other = self.agents[1 - self.agents.index(agent)]
        if match is None or int(match[1]) > self.pile:
            self.rewards[agent] = -0.1
            self.infos[agent] = {"admissible_actions": self._admissible(), "action_valid": False}
        else:
            self.pile -= int(match[1])
            if self.pile == 0:
                self.rewards[agent], self.rewards[other] = 1.0, -1.0
                self.terminations = dict.fromkeys(self.agents, True)
                self.infos = {a: {"admissible_actions": [], "action_valid": True} for a in self.agents}
            else:
                self.infos[other] = {"admissible_actions": self._admissible(), "action_valid": True}
                self.infos[agent] = {"admissible_actions": [], "action_valid": True}
                self.agent_selection = other
        self._accumulate_rewards()

    def render(self) -> str:
        return f"Stones left: {self.pile}"

    def close(self) -> None:
        pass


def _specs() -> list[EnvSpec]:
    module = __name__
    return [
        EnvSpec(id=LINE_ID, entry_point=f"{module}:LineEnv", family="clitoy", summary="Walk to the target"),
        EnvSpec(
            id=LINE_LONG_ID,
            entry_point=f"{module}:LineEnv",
            family="clitoy",
            summary="Walk to the target (long)",
            kwargs={"length": 9},
            variant_of=LINE_ID,
        ),
        EnvSpec(id=SEEDLESS_ID, entry_point=f"{module}:SeedlessLineEnv", family="clitoy", summary="Broken on purpose"),
        EnvSpec(id=NIM_ID, entry_point=f"{module}:NimAEC", family="clitoy", summary="Nim for two", kind="aec"),
    ]


def register_toys() -> None:
    """Register the toy ids and their oracle solver (idempotent)."""
    from envgym.registration import register

    for spec in _specs():
        register(spec)
    sys.modules[SOLVER_MODULE] = sys.modules[__name__]


def unregister_toys() -> None:
    """Remove the toy ids from envgym's and Gymnasium's registries, and the solver alias."""
    import gymnasium

    from envgym import registration

    for spec in _specs():
        # The registry has no public "unregister": tests clean up the private tables they filled.
        registration._single.pop(spec.id, None)
        registration._multi.pop(spec.id, None)
        gymnasium.registry.pop(spec.id, None)
    sys.modules.pop(SOLVER_MODULE, None)
