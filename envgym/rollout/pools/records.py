"""What a pool is asked and what it answers: reset and step requests, results and failures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["EnvFailure", "ResetRequest", "StepRequest", "StepResult", "describe"]


@dataclass(frozen=True, slots=True)
class ResetRequest:
    """Reset one slot.

    Attributes:
        slot: the slot index, ``0 <= slot < num_slots``.
        seed: the episode seed passed to ``env.reset`` (``None``: unseeded).
        options: ``env.reset`` options (must be picklable for remote pools).
        want_sample: also return one action drawn by ``env.unwrapped.sample_action(rng)`` when
            the env has it (``rng`` is the slot's own, seeded from the reset seed).
        env: which of the pool's envs (:attr:`EnvPool.envs`, ``(env_id, env_kwargs)`` pairs) the
            slot plays from this reset on; a slot holding another kind closes it and makes this one.
        want_frame: also return ``env.render()`` as :attr:`StepResult.frame` when the env was made
            with ``render_mode="rgb_array"`` (the screenshot a run folder records).
    """

    slot: int
    seed: int | None
    options: dict[str, Any] | None = None
    want_sample: bool = False
    env: int = 0
    want_frame: bool = False


@dataclass(frozen=True, slots=True)
class StepRequest:
    """Step one slot with ``action``; ``want_sample`` and ``want_frame`` as in :class:`ResetRequest`."""

    slot: int
    action: str
    want_sample: bool = False
    want_frame: bool = False


@dataclass(slots=True)
class StepResult:
    """What one reset or step gave.

    Attributes:
        observation: the observation text.
        reward: the step's reward (``0.0`` for a reset).
        terminated: the episode ended by the env's rules (``False`` for a reset).
        truncated: the episode was cut short, e.g. by a turn limit (``False`` for a reset).
        info: the env's ``info`` (picklable: remote pools send it between processes).
        env_s: seconds spent inside ``env.reset`` / ``env.step``, measured where the env lives.
        sampled_action: the action asked for by ``want_sample`` (``None`` when not asked, when
            the env has no ``sample_action``, or when the episode just ended).
        frame: the env's ``rgb_array`` render after this reset or step (an ``H x W x 3`` uint8
            array) when asked by ``want_frame`` and the env renders ``rgb_array`` frames, else ``None``.
    """

    observation: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]
    env_s: float
    sampled_action: str | None = None
    frame: Any = None


@dataclass(slots=True)
class EnvFailure:
    """A reset or step that produced no result.

    Attributes:
        kind: ``"env_error"`` (the env raised, or its worker died) or ``"timeout"`` (the worker
            did not answer in time and was killed).
        message: what happened, e.g. ``"ValueError: bad board"`` or
            ``"worker 1 (pid 1234) died: exit code -9 (SIGKILL)"``.
        worker_lost: ``True`` when the slot's worker process or actor died or was killed: every
            slot of that worker lost its env state, and the runner restarts those episodes.
        traceback: the env's formatted traceback for ``env_error`` raised by the env, else ``None``.
    """

    kind: str
    message: str
    worker_lost: bool = False
    traceback: str | None = None


def describe(err: BaseException) -> str:
    """``"TypeName: message"`` of an exception, as failures report it."""
    return f"{type(err).__name__}: {err}"
