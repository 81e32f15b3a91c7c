"""Training metrics: what each update logs, and where (``metrics.jsonl``, TensorBoard).

Every key is a lowercase slash path, defined once here:

=============================  ===================================================================
``rewards/<name>/mean``        per reward component (``success_reward`` -> ``success``), its
                               per-episode sum, averaged over the update's scored episodes
``episode/return``             mean episode return (sum of the turns' rewards)
``episode/success_rate``       fraction of scored episodes that ended in success
``episode/turns``              mean turns per episode
``episode/format_ok``          fraction of replies with a complete action block (chat prompts)
``episode/count``              scored episodes played in the update (every rollout round)
``episode/unscored``           episodes ended by an infrastructure failure (never scored as 0)
``batch/episodes``             episodes trained on (after dynamic sampling)
``batch/turns``                turns (sequences) trained on
``batch/excluded_episodes``    episodes left out of the batch (unscored, no token ids)
``batch/excluded_turns``       turns left out (no token ids / log-probs, empty completion)
``dynamic/rounds``             rollout rounds of the update (1 + refills)
``dynamic/zero_variance_groups``  groups dropped because all their returns were equal
``dynamic/kept_groups``        groups trained on
``loss/policy``                clipped policy-gradient loss (mean over optimizer steps)
``loss/value``                 PPO value loss
``loss/kl``                    KL to the reference policy (before ``kl_coef``)
``loss/total``                 what was minimised
``policy/entropy``             mean next-token entropy over completion tokens
``policy/clip_fraction``       fraction of completion tokens whose ratio was clipped
``policy/approx_kl``           approximate KL(old || new) over completion tokens
``policy/ratio_mean``          mean importance ratio; ``policy/ratio_max`` the largest
``policy/advantage_std``       standard deviation of the per-turn advantages
``grad_norm``                  gradient norm before clipping (mean over optimizer steps)
``lr``                         learning rate
``tokens``                     completion tokens trained on
``perf/rollout_s``             seconds spent in rollouts (generation + environments)
``perf/update_s``              seconds spent in the optimisation
``perf/generated_tokens_per_s``  completion tokens generated per rollout second
``perf/tokens_per_s``          tokens (prompt + completion) processed per optimisation second,
                               summed over the passes (``ppo_epochs``)
``curriculum/max_turns``       the turn limit of the update's episodes (when set)
``curriculum/level``           index of the difficulty level (difficulty ladder)
``tasks/active``               task-pool seeds not dropped (``task_pool``)
``tasks/passes``               complete passes over the task pool
``tasks/dropped``              pool tasks dropped so far (``task_filter``)
``tasks/dropped_seeds``        the seeds dropped after this update's rollouts (a list, may be empty)
``tasks/dropped_solved``       of those, tasks whose last groups were all solved;
                               ``tasks/dropped_failed`` all failed
``tasks/spared``               tasks that qualified for dropping but stay in, so that the pool
                               keeps ``groups_per_update`` tasks
``eval/return``, ``eval/success_rate``, ``eval/format_ok``, ``eval/turns``: greedy evaluation
                               on the held-out split
=============================  ===================================================================

``metrics.jsonl`` holds one JSON object per update (``{"update": n, "time": ..., key: value}``),
written and flushed to disk as the update ends. Under ``torchrun`` rank 0 writes it, with the
episode, batch, loss and policy values taken over every rank's episodes and tokens; ``perf/*_s``
are the slowest rank's seconds.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from envgym._runfiles import MalformedRecordError, read_jsonl, write_atomic
from envgym.errors import MissingDependencyError
from envgym.rollout.records import Trajectory

__all__ = ["METRICS_FILE", "MetricsLog", "episode_metrics", "read_metrics"]

log = logging.getLogger(__name__)

METRICS_FILE = "metrics.jsonl"
#: Keys that measure time or speed: they differ between two runs of the same config.
TIMING_PREFIXES = ("perf/", "time")


def _component_name(key: str) -> str:
    return key[: -len("_reward")] if key.endswith("_reward") and len(key) > len("_reward") else key


def _mean(values: Sequence[float]) -> float | None:
    return float(sum(values) / len(values)) if values else None


def episode_metrics(trajectories: Iterable[Trajectory], prefix: str = "episode") -> dict[str, float]:
    """Return, success, turns, format, valid-action and reward-component means of the scored ``trajectories``.

    ``prefix="episode"`` gives the training keys (with ``rewards/<name>/mean``); ``prefix="eval"``
    the evaluation keys.
    """
    trajs = list(trajectories)
    scored = [t for t in trajs if t.scored]
    out: dict[str, float] = {}
    if prefix == "episode":
        out["episode/count"] = float(len(scored))
        out["episode/unscored"] = float(len(trajs) - len(scored))
    if not scored:
        return out
    out[f"{prefix}/return"] = _mean([t.total_reward for t in scored]) or 0.0
    out[f"{prefix}/success_rate"] = _mean([1.0 if t.success else 0.0 for t in scored]) or 0.0
    out[f"{prefix}/turns"] = _mean([float(t.num_turns) for t in scored]) or 0.0
    formats = [1.0 if turn.format_ok else 0.0 for t in scored for turn in t.turns if turn.format_ok is not None]
    if formats:
        out[f"{prefix}/format_ok"] = _mean(formats) or 0.0
    valid = [1.0 if turn.action_valid else 0.0 for t in scored for turn in t.turns]
    if valid:
        out[f"{prefix}/valid_action_rate"] = _mean(valid) or 0.0
    if prefix == "episode":
        names = sorted({k for t in scored for k in t.reward_components})
        for name in names:
            values = [float(t.reward_components.get(name, 0.0)) for t in scored]
            out[f"rewards/{_component_name(name)}/mean"] = _mean(values) or 0.0
    return out


class MetricsLog:
    """Appends one line per update to ``metrics.jsonl`` and mirrors it to TensorBoard.

    Args:
        folder: the run folder.
        tensorboard: ``None`` writes event files when ``tensorboard`` is installed (one log line
            otherwise); ``True`` requires it; ``False`` writes none.
    """

    def __init__(self, folder: str | os.PathLike[str], *, tensorboard: bool | None = None) -> None:
        self.folder = Path(folder)
        self.path = self.folder / METRICS_FILE
        self._file: Any = None
        self._writer: Any = None
        if tensorboard is not False:
            self._writer = _tensorboard_writer(self.folder / "tensorboard", required=bool(tensorboard))

    def truncate_after(self, update: int) -> None:
        """Drop the lines of updates after ``update`` (a resumed run writes them again)."""
        if not self.path.exists():
            return
        kept = [row for row in read_metrics(self.path) if row["update"] <= update]
        write_atomic(self.path, "".join(json.dumps(row, sort_keys=True) + "\n" for row in kept), skip_unchanged=True)

    def write(self, update: int, metrics: Mapping[str, Any]) -> dict[str, Any]:
        """Append the line of ``update`` and flush it to disk; return it."""
        row: dict[str, Any] = {"update": int(update), "time": round(time.time(), 3)}
        for key, value in metrics.items():
            if isinstance(value, bool):
                value = float(value)
            if isinstance(value, (int, float)):
                row[key] = float(value) if math.isfinite(value) else str(value)
            elif value is not None:
                row[key] = value
        if self._file is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8")
        self._file.write(json.dumps(row, sort_keys=True) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())
        if self._writer is not None:
            for key, value in row.items():
                if key not in ("update", "time") and isinstance(value, float):
                    self._writer.add_scalar(key, value, global_step=update)
            self._writer.flush()
        return row

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def _tensorboard_writer(folder: Path, *, required: bool) -> Any:
    try:
        import tensorboard  # noqa: F401  (torch's SummaryWriter needs the package)
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as err:
        if required:
            raise MissingDependencyError("tensorboard", "train", "TensorBoard logging (tensorboard=true)") from err
        log.info("tensorboard is not installed: no event files (metrics.jsonl has every value)")
        return None
    return SummaryWriter(log_dir=str(folder))


def _metrics_row(data: Any) -> dict[str, Any]:
    """One ``metrics.jsonl`` line as :meth:`MetricsLog.write` wrote it: an object with an integer
    ``update`` (anything else is a damaged line)."""
    if not isinstance(data, dict):
        raise MalformedRecordError(f"expected a metrics row (a JSON object), got {type(data).__name__} {data!r:.60}")
    update = data.get("update")
    if not isinstance(update, int) or isinstance(update, bool) or update < 0:
        raise MalformedRecordError(f"a metrics row needs an integer 'update' >= 0, got {update!r:.60}")
    return data


def read_metrics(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows of a ``metrics.jsonl`` file (or of a run folder's). A damaged last line (the row a
    crash cut short) is ignored; a damaged line elsewhere raises :class:`ConfigError`
    (:func:`envgym._runfiles.read_jsonl`)."""
    file = Path(path)
    if file.is_dir():
        file = file / METRICS_FILE
    return read_jsonl(file, _metrics_row)


def comparable(row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` without timings (``time`` and ``perf/*``): equal for two runs of the same config."""
    return {k: v for k, v in row.items() if not k.startswith(TIMING_PREFIXES)}
