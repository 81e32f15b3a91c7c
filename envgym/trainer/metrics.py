"""Training metrics: what each update logs, and where (``metrics.jsonl``, the experiment trackers).

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
written and flushed to disk as the update ends, then handed to the experiment trackers (TensorBoard,
MLflow: :mod:`envgym.trainer.tracking`). Under ``torchrun`` rank 0 writes it, with the
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
from envgym.rollout.records import Trajectory
from envgym.trainer.tracking import Tracker, check_trackers, open_tracker, plan

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
    """Appends one line per update to ``metrics.jsonl`` and hands it to the experiment trackers
    (:mod:`envgym.trainer.tracking`).

    Args:
        folder: the run folder.
        tensorboard: with ``trackers=None``: ``None`` writes TensorBoard event files when
            ``tensorboard`` is installed (one log line otherwise); ``True`` requires it; ``False``
            writes none.
        trackers: the trackers to write to (``tensorboard``, ``mlflow``), each required; ``None``:
            TensorBoard as ``tensorboard`` says.
        config: the run's settings (JSON data), recorded by the trackers that keep them.

    An unknown or missing tracker fails here. The trackers open at :meth:`truncate_after` or the
    first :meth:`write`, whichever comes first, with the lines already in ``metrics.jsonl``.
    """

    def __init__(
        self,
        folder: str | os.PathLike[str],
        *,
        tensorboard: bool | None = None,
        trackers: Sequence[str] | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.folder = Path(folder)
        self.path = self.folder / METRICS_FILE
        self._file: Any = None
        self._plan = plan(trackers, tensorboard)
        check_trackers([name for name, _ in self._plan], required=[name for name, req in self._plan if req])
        self._config = dict(config) if config is not None else None
        self.trackers: list[Tracker] | None = None

    def _open_trackers(self) -> list[Tracker]:
        if self.trackers is None:
            history = read_metrics(self.path) if self.path.exists() else []
            opened = (
                open_tracker(name, self.folder, required=required, history=history, config=self._config)
                for name, required in self._plan
            )
            self.trackers = [tracker for tracker in opened if tracker is not None]
        return self.trackers

    def truncate_after(self, update: int) -> None:
        """Drop the lines of updates after ``update`` (a resumed run writes them again), then open
        the trackers."""
        if self.path.exists():
            kept = [row for row in read_metrics(self.path) if row["update"] <= update]
            write_atomic(
                self.path, "".join(json.dumps(row, sort_keys=True) + "\n" for row in kept), skip_unchanged=True
            )
        self._open_trackers()

    def write(self, update: int, metrics: Mapping[str, Any]) -> dict[str, Any]:
        """Append the line of ``update``, flush it to disk and hand it to the trackers; return it."""
        trackers = self._open_trackers()
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
        for tracker in trackers:
            tracker.log(update, row)
        return row

    def close(self, status: str = "finished") -> None:
        """Close the file and the trackers; ``status`` (``finished``, ``failed``, ``killed``): how the
        session ended, for the trackers that record it."""
        if self._file is not None:
            self._file.close()
            self._file = None
        for tracker in self.trackers or ():
            tracker.close(status)
        self.trackers = []


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
