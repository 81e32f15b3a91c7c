"""The per-agent text pieces of every multi-agent text environment.

What :class:`~envgym.multiagent.aec.TextAECEnv` and hand-written PettingZoo environments share:
turning any value an agent sent into action text (:func:`action_text`, :func:`shown_action`), one
agent's ``info`` with every standard key (:func:`agent_info`), a ``str`` observation PettingZoo's
API test accepts (:class:`TextObservation`) and cached per-agent text spaces (:class:`TextSpaces`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from envgym.core import InvalidAction, TerminationReason, extract_action
from envgym.errors import UnknownAgentError, suggest
from envgym.spaces import MAX_TEXT_LENGTH, Text

__all__ = ["TextObservation", "TextSpaces", "action_text", "agent_info", "shown_action", "unknown_agent"]


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def action_text(action: Any, tags: tuple[str, ...] = ("action",)) -> str:
    """The cleaned action text of any value an agent sent (see :func:`envgym.core.extract_action`).

    Bytes are decoded as UTF-8 (bad bytes replaced). Raises :class:`InvalidAction` for anything
    that is not text, so callers turn it into an invalid move.
    """
    if isinstance(action, str):
        text = action
    elif isinstance(action, (bytes, bytearray)):
        text = bytes(action).decode("utf-8", errors="replace")
    else:
        raise InvalidAction(f"expected the action as a string, got {type(action).__name__}.")
    return extract_action(text, tags)


def shown_action(action: Any) -> str:
    """A short printable form of an action for feedback messages."""
    if isinstance(action, str):
        return _clip(action)
    if isinstance(action, (bytes, bytearray)):
        return _clip(bytes(action).decode("utf-8", errors="replace"))
    return _clip(repr(action))


def agent_info(
    task: Mapping[str, Any],
    *,
    admissible_actions: list[str] | None,
    action_valid: bool,
    reward_components: Mapping[str, float],
    success: bool,
    termination_reason: TerminationReason | str | None,
    turn: int,
    invalid_actions: int,
    **extra: Any,
) -> dict[str, Any]:
    """Build one agent's ``info`` dict with every standard key (fresh objects, safe to mutate)."""
    reason = termination_reason.value if isinstance(termination_reason, TerminationReason) else termination_reason
    return {
        "task": dict(task),
        "admissible_actions": list(admissible_actions) if admissible_actions is not None else None,
        "action_valid": bool(action_valid),
        "reward_components": {k: float(v) for k, v in reward_components.items()},
        "success": bool(success),
        "termination_reason": reason,
        "turn": int(turn),
        "invalid_actions": int(invalid_actions),
        **extra,
    }


class TextObservation(str):
    """A ``str`` that also carries the ``dtype`` of :class:`envgym.spaces.Text`.

    PettingZoo's ``api_test`` asserts ``observation_space(agent).dtype == observation.dtype``,
    which no plain ``str`` can pass (it has no ``dtype``). This subclass is a real string in
    every other respect (equality, hashing, JSON, pickling), so agents never notice it.
    """

    __slots__ = ()
    dtype: ClassVar[Any] = Text().dtype


class TextSpaces:
    """Mixin giving every agent a text observation space and a text action space.

    Call :meth:`_init_text_spaces` in ``__init__`` with ``possible_agents``. The spaces are built
    once, so ``observation_space(agent) is observation_space(agent)`` as PettingZoo requires.
    """

    observation_spaces: dict[str, Text]
    action_spaces: dict[str, Text]

    def _init_text_spaces(self, agents: Iterable[str], max_length: int = MAX_TEXT_LENGTH) -> None:
        self.observation_spaces = {agent: Text(max_length) for agent in agents}
        self.action_spaces = {agent: Text(max_length) for agent in agents}

    def observation_space(self, agent: str) -> Text:
        """The (cached) observation space of ``agent``."""
        try:
            return self.observation_spaces[agent]
        except KeyError:
            raise unknown_agent(agent, self.observation_spaces) from None

    def action_space(self, agent: str) -> Text:
        """The (cached) action space of ``agent``."""
        try:
            return self.action_spaces[agent]
        except KeyError:
            raise unknown_agent(agent, self.action_spaces) from None


def unknown_agent(agent: Any, known: Iterable[str]) -> UnknownAgentError:
    """The error for an agent name that is not one of ``known`` (with a did-you-mean)."""
    names = list(known)
    return UnknownAgentError(f"unknown agent {agent!r}.{suggest(str(agent), names)} Agents: {', '.join(names)}.")
