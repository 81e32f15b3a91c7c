"""Trajectory and Turn records: what a run keeps of every episode.

A :class:`Trajectory` is one episode; its :class:`Turn` list holds, for every action, the
observation the agent saw, the chat messages it was sent (chat agents), its completion with the
exact token ids and log-probs when the agent reports them, the parsed action, the reward and its
named components, timings and token counts. Records are plain dataclasses that round-trip through
JSON (:meth:`Trajectory.to_dict` / :meth:`Trajectory.from_dict`), one line per episode in a run
folder's ``episodes.jsonl``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, TypedDict

from envgym._runfiles import MalformedRecordError
from envgym.core import TerminationReason
from envgym.errors import ConfigError

__all__ = [
    "FINAL_INFO_KEYS",
    "EpisodeRecord",
    "MalformedRecordError",
    "Trajectory",
    "Turn",
    "cut_text",
    "episode_record",
    "json_safe",
    "keep_final_info",
    "recordable_observation",
]

#: Record format version, written into every line; readers refuse newer formats.
RECORD_VERSION = 1
#: Keys of an episode's last ``info`` that its record keeps, in ``Trajectory.extra`` under the same
#: name (:func:`keep_final_info`), and that :func:`episode_record` shows: ``model_patch``, the SWE
#: envs' final diff (SWE-bench's name), for SFT data and analysis.
FINAL_INFO_KEYS: tuple[str, ...] = ("model_patch",)


def json_safe(value: Any) -> Any:
    """``value`` with everything JSON cannot hold turned into something it can.

    Tuples and sets become lists, numpy scalars and arrays become Python numbers and lists,
    non-finite floats become strings (``"nan"``, ``"inf"``), other objects their ``repr``.
    """
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(v) for v in value]
    tolist = getattr(value, "tolist", None)  # numpy arrays and scalars, torch tensors
    if callable(tolist):
        return json_safe(tolist())
    return repr(value)


def recordable_observation(observation: Any) -> Any:
    """``observation`` as a record keeps it: an image in it (an ``H x W x 3`` or ``H x W x 4``
    uint8 array, alone or as a value of a dict observation) becomes a short description such as
    ``"<image 360x480x3 uint8>"`` (run folders keep images as PNG files, never inline)."""
    if isinstance(observation, dict):
        return {key: recordable_observation(value) for key, value in observation.items()}
    shape = getattr(observation, "shape", None)
    if (
        shape is not None
        and len(shape) == 3
        and shape[2] in (3, 4)
        and str(getattr(observation, "dtype", "")) == "uint8"
    ):
        return f"<image {'x'.join(map(str, shape))} uint8>"
    return observation


# -- the shape a record read back must have ----------------------------------------------------------
_NUMBER = (int, float, str)  # json_safe writes a non-finite float as its text ("nan", "inf")
_NONE = type(None)
#: Field -> accepted JSON types, for the fields code reads back (a resume, a summary, a report);
#: free-form fields (observations, actions, messages) are not checked.
_TURN_TYPES: dict[str, tuple[type, ...]] = {
    "index": (int,),
    "reward": _NUMBER,
    "reward_components": (dict,),
    "action_valid": (bool,),
    "terminated": (bool,),
    "truncated": (bool,),
    "format_ok": (bool, _NONE),
    "prompt_tokens": (int, float, _NONE),  # a server's usage counts, as it sent them
    "completion_tokens": (int, float, _NONE),
    "agent_s": _NUMBER,
    "env_s": _NUMBER,
    "extra": (dict,),
    "tool_calls": (list, _NONE),
    "tool_results": (list, _NONE),
}
_TURN_REQUIRED = ("index", "observation", "action", "reward", "reward_components", "action_valid")
_TRAJECTORY_TYPES: dict[str, tuple[type, ...]] = {
    "episode_id": (str,),
    "index": (int,),
    "env_id": (str,),
    "seed": (int, _NONE),
    "agent": (str,),
    "env_kwargs": (dict,),
    "group": (int,),
    "member": (int,),
    "task": (dict,),
    "turns": (list,),
    "success": (bool,),
    "termination_reason": (str,),
    "total_reward": _NUMBER,
    "reward_components": (dict,),
    "invalid_actions": (int,),
    "attempts": (int,),
    "errors": (list,),
    "prompt_tokens": (int, float),
    "completion_tokens": (int, float),
    "wall_time_s": _NUMBER,
    "started_at": (str,),
    "finished_at": (str,),
    "extra": (dict,),
}
_TRAJECTORY_REQUIRED = ("episode_id", "index", "env_id", "seed", "agent")
_REASONS = frozenset(reason.value for reason in TerminationReason)


def _check_shape(
    data: Any, what: str, required: tuple[str, ...], types: dict[str, tuple[type, ...]]
) -> dict[str, Any]:
    """``data`` if it is a JSON object with the ``required`` keys and ``types``; else
    :class:`MalformedRecordError` naming the first thing wrong."""
    if not isinstance(data, dict):
        raise MalformedRecordError(f"expected a {what} (a JSON object), got {type(data).__name__} {data!r:.60}")
    missing = [key for key in required if key not in data]
    if missing:
        got = f"{sorted(data)!r:.120}"
        raise MalformedRecordError(f"{what} record lacks the fields {', '.join(missing)}; got keys {got}")
    for key, kinds in types.items():
        if key not in data:
            continue
        value = data[key]
        # bool is an int in Python, not in a record: an index of true is damage
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            names = " or ".join("null" if k is _NONE else k.__name__ for k in kinds)
            raise MalformedRecordError(f"{what} field {key!r} must be {names}, got {value!r:.60}")
    return data


@dataclass(slots=True)
class Turn:
    """One action of one episode.

    Attributes:
        index: 0-based turn number.
        observation: the observation the agent acted on.
        action: the action sent to ``env.step`` (for chat agents, extracted from ``completion``).
        reward: the scalar reward of the step.
        reward_components: the step's named reward components.
        action_valid: whether the environment accepted the action.
        terminated: ``terminated`` returned by the step.
        truncated: ``truncated`` returned by the step (or set by the harness's turn/token limits).
        completion: the agent's raw reply (chat agents; ``None`` when the reply is the action).
        format_ok: whether the reply had the action tags (chat agents; ``None`` otherwise).
        messages: the chat messages sent for this turn (chat agents).
        prompt_token_ids: the prompt's token ids as fed to the model, when the agent reports them.
        token_ids: the completion's token ids exactly as sampled, when the agent reports them.
        logprobs: one log-probability per ``token_ids`` entry.
        finish_reason: ``"stop"``, ``"length"`` or ``None``.
        prompt_tokens: prompt length in tokens, when known.
        completion_tokens: completion length in tokens, when known.
        agent_s: wall time of the agent call that produced this turn (shared by its batch).
        env_s: time spent inside ``env.step``.
        extra: the agent's extra fields (JSON-safe).
        screenshot: the path, relative to the run folder, of the PNG of the screen the agent saw
            before this action (``screenshots/<episode>/<turn>.png``), when the run recorded
            frames (a run folder and an env made with ``render_mode="rgb_array"``); left out of
            :meth:`to_dict` when ``None``.
        tool_calls: the tool calls this turn's action ran, ``{"id", "name", "arguments"}`` each, when
            the env has tools and the agent called them natively (``<tool_call>`` blocks or an API's
            ``tool_calls``: :mod:`envgym.rollout.toolcalls`); left out of :meth:`to_dict` when ``None``.
        tool_results: what the env answered to them, ``{"tool_call_id", "name", "content",
            "is_error"}`` each (one observation answers the turn: it is the first call's content);
            left out of :meth:`to_dict` when ``None``.
    """

    index: int
    observation: str
    action: str
    reward: float
    reward_components: dict[str, float]
    action_valid: bool
    terminated: bool = False
    truncated: bool = False
    completion: str | None = None
    format_ok: bool | None = None
    messages: list[dict[str, str]] | None = None
    prompt_token_ids: list[int] | None = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    agent_s: float = 0.0
    env_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    screenshot: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_results: list[dict[str, Any]] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: json_safe(getattr(self, f.name)) for f in fields(self)}
        # Records of runs without frames or tool calls stay as they were.
        for name in ("screenshot", "tool_calls", "tool_results"):
            if data[name] is None:
                del data[name]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Turn:
        """The turn ``to_dict`` wrote; :class:`MalformedRecordError` for anything of another shape."""
        _check_shape(data, "turn", _TURN_REQUIRED, _TURN_TYPES)
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


#: Fields of a Trajectory that are timings or dates: they differ between two runs of the same seeds.
TIMING_FIELDS = frozenset({"wall_time_s", "started_at", "finished_at"})
TURN_TIMING_FIELDS = frozenset({"agent_s", "env_s"})


@dataclass(slots=True)
class Trajectory:
    """One episode of a run.

    Attributes:
        episode_id: unique within the run (``"000042"``: the episode's index, zero-padded).
        index: position in the run, ``0 .. episodes-1``; ``index = group * group_size + member``.
        env_id: the registered environment id (its version is part of the id).
        env_kwargs: keyword arguments the environment was made with.
        seed: the environment seed of the episode (``run seed + group``).
        group: the group number; the episodes of a group share a seed (group rollouts, GRPO).
        member: position within the group.
        agent: the agent spec or name.
        task: ``info["task"]`` at reset (id, goal, split, ...).
        turns: every turn, in order.
        final_observation: the observation after the last step.
        success: ``info["success"]`` at the end.
        termination_reason: a :class:`~envgym.core.TerminationReason` value.
        total_reward: sum of the turns' rewards.
        reward_components: per component, the sum over the turns.
        invalid_actions: how many actions the environment rejected.
        attempts: how many times the episode was started (retries after infrastructure errors).
        errors: the infrastructure errors of every failed attempt, oldest first.
        prompt_tokens: sum over turns, when the agent reports token counts.
        completion_tokens: sum over turns, when the agent reports token counts.
        wall_time_s: wall time of the final attempt.
        started_at: UTC ISO time the final attempt started.
        finished_at: UTC ISO time the episode ended.
        extra: anything else (``truncated_by``: ``"harness_max_turns"`` / ``"token_budget"``;
            ``final_screenshot``: the PNG of the screen after the last step, when frames were recorded;
            the keys of :data:`FINAL_INFO_KEYS` the last step's ``info`` had, e.g. ``model_patch``).
    """

    episode_id: str
    index: int
    env_id: str
    seed: int | None
    agent: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    group: int = 0
    member: int = 0
    task: dict[str, Any] = field(default_factory=dict)
    turns: list[Turn] = field(default_factory=list)
    final_observation: str = ""
    success: bool = False
    termination_reason: str = TerminationReason.MAX_TURNS.value
    total_reward: float = 0.0
    reward_components: dict[str, float] = field(default_factory=dict)
    invalid_actions: int = 0
    attempts: int = 1
    errors: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_time_s: float = 0.0
    started_at: str = ""
    finished_at: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    # -- derived views ------------------------------------------------------------------------
    @property
    def num_turns(self) -> int:
        return len(self.turns)

    @property
    def actions(self) -> list[str]:
        return [t.action for t in self.turns]

    @property
    def rewards(self) -> list[float]:
        return [t.reward for t in self.turns]

    @property
    def task_id(self) -> str:
        return str(self.task.get("id", ""))

    @property
    def scored(self) -> bool:
        """False for episodes ended by an infrastructure failure (reported apart, never a zero)."""
        return not TerminationReason(self.termination_reason).is_infrastructure

    @property
    def error(self) -> str | None:
        """The last infrastructure error of an unscored episode, else ``None``."""
        return self.errors[-1] if (self.errors and not self.scored) else None

    # -- serialisation ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"record_version": RECORD_VERSION}
        for f in fields(self):
            value = getattr(self, f.name)
            data[f.name] = [t.to_dict() for t in value] if f.name == "turns" else json_safe(value)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trajectory:
        """The episode ``to_dict`` wrote.

        Raises:
            ConfigError: a record of a newer format (upgrade envgym to read it).
            MalformedRecordError: anything that is not a record (``{}``, ``[1, 2]``, a field of the
                wrong type): what a damaged line of ``episodes.jsonl`` holds.
        """
        if not isinstance(data, dict):
            raise MalformedRecordError(f"expected an episode (a JSON object), got {type(data).__name__} {data!r:.60}")
        version = data.get("record_version", RECORD_VERSION)
        if isinstance(version, int) and not isinstance(version, bool) and version > RECORD_VERSION:
            raise ConfigError(
                f"trajectory record_version {version!r} is newer than this envgym reads ({RECORD_VERSION}); "
                "upgrade envgym to read this run."
            )
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise MalformedRecordError(f"episode field 'record_version' must be an integer >= 1, got {version!r:.60}")
        _check_shape(data, "episode", _TRAJECTORY_REQUIRED, _TRAJECTORY_TYPES)
        if data["index"] < 0:
            raise MalformedRecordError(f"episode field 'index' must be >= 0, got {data['index']!r}")
        reason = data.get("termination_reason", TerminationReason.MAX_TURNS.value)
        if reason not in _REASONS:
            raise MalformedRecordError(
                f"episode field 'termination_reason' must be one of {sorted(_REASONS)}, got {reason!r:.60}"
            )
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["turns"] = [Turn.from_dict(t) for t in data.get("turns", [])]
        return cls(**values)

    def comparable(self) -> dict[str, Any]:
        """``to_dict()`` without timings and dates: equal for two runs of the same seeds."""
        data = self.to_dict()
        for key in TIMING_FIELDS:
            data.pop(key, None)
        for turn in data["turns"]:
            for key in TURN_TIMING_FIELDS:
                turn.pop(key, None)
        return data


def keep_final_info(trajectory: Trajectory, info: Any) -> None:
    """Keep the :data:`FINAL_INFO_KEYS` of an episode's last ``info`` in ``trajectory.extra`` (JSON-safe)."""
    if isinstance(info, dict):
        for key in FINAL_INFO_KEYS:
            if key in info:
                trajectory.extra[key] = json_safe(info[key])


# -- the one flat projection of an episode -----------------------------------------------------------
def cut_text(text: Any, cap: int | None) -> Any:
    """``text`` cut to ``cap`` characters with a marker saying how many were cut (non-strings and
    ``cap=None`` pass through)."""
    if cap is None or not isinstance(text, str) or len(text) <= cap:
        return text
    return text[:cap] + f"\u2026 [{len(text) - cap} more characters cut]"


class EpisodeRecord(TypedDict, total=False):
    """An episode as a flat JSON document: what ``envgym run --per-episode`` prints and what a
    leaderboard bundle stores per episode (which adds its entry name and keeps ``trial`` for
    ``member``). Built by :func:`episode_record`, the only projection of a :class:`Trajectory`."""

    episode_id: str
    index: int
    env_id: str
    seed: int | None
    group: int
    member: int
    task_id: str
    scored: bool
    termination_reason: str
    success: bool
    total_reward: float | str
    reward_components: dict[str, float | str]
    num_turns: int
    invalid_actions: int
    truncated_by: str | None
    attempts: int
    errors: list[str]
    wall_time_s: float
    final_observation: str
    final_screenshot: str
    model_patch: str
    turns: list[dict[str, Any]]


def episode_record(trajectory: Trajectory, *, text_cap: int | None = None, turns: bool = True) -> EpisodeRecord:
    """``trajectory`` as an :class:`EpisodeRecord`: numbers JSON-safe (a non-finite float becomes
    its text), texts cut to ``text_cap`` characters, and with ``turns`` each turn's action,
    reward, components, flags, observation, completion and format verdict (and ``screenshot``, the
    PNG's path relative to the run folder, for turns that have one; ``final_screenshot`` likewise;
    ``model_patch`` when the episode kept one, cut to ``text_cap`` as the other texts)."""
    record = EpisodeRecord(
        episode_id=trajectory.episode_id,
        index=trajectory.index,
        env_id=trajectory.env_id,
        seed=trajectory.seed,
        group=trajectory.group,
        member=trajectory.member,
        task_id=trajectory.task_id,
        scored=trajectory.scored,
        termination_reason=trajectory.termination_reason,
        success=bool(trajectory.success),
        total_reward=json_safe(float(trajectory.total_reward)),
        reward_components={k: json_safe(float(v)) for k, v in trajectory.reward_components.items()},
        num_turns=len(trajectory.turns),
        invalid_actions=trajectory.invalid_actions,
        truncated_by=trajectory.extra.get("truncated_by"),
        attempts=trajectory.attempts,
        errors=list(trajectory.errors),
        wall_time_s=round(trajectory.wall_time_s, 6),
        final_observation=cut_text(trajectory.final_observation, text_cap),
    )
    final_shot = trajectory.extra.get("final_screenshot")
    if isinstance(final_shot, str):
        record["final_screenshot"] = final_shot
    patch = trajectory.extra.get("model_patch")
    if isinstance(patch, str):
        record["model_patch"] = cut_text(patch, text_cap)
    if turns:
        record["turns"] = [
            {
                "action": turn.action,
                "reward": json_safe(float(turn.reward)),
                "reward_components": {k: json_safe(float(v)) for k, v in turn.reward_components.items()},
                "action_valid": bool(turn.action_valid),
                "terminated": bool(turn.terminated),
                "truncated": bool(turn.truncated),
                "observation": cut_text(turn.observation, text_cap),
                "completion": cut_text(turn.completion, text_cap),
                "format_ok": turn.format_ok,
                **({"screenshot": turn.screenshot} if turn.screenshot is not None else {}),
            }
            for turn in trajectory.turns
        ]
    return record
