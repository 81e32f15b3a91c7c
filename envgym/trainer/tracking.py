"""Experiment trackers: where each update's metrics go besides ``metrics.jsonl``.

``metrics.jsonl`` (:mod:`envgym.trainer.metrics`) is the record of a run; a tracker is a view of it
in a tool people browse runs with. Every tracker has the one interface :class:`Tracker`
(``log(update, row)`` with the ``metrics.jsonl`` line of an update, then ``close()``), and the
``trackers`` setting names those a run writes to (:data:`TRACKERS`):

``tensorboard``
    event files in ``<run>/tensorboard`` (``tensorboard --logdir runs/``); the default.
``mlflow``
    an MLflow run in a local file store, ``<run>/mlruns`` (``pip install 'envgym[tracking]'``,
    the ``mlflow-skinny`` client). Offline by construction: the store's URI is the folder (the
    ``MLFLOW_TRACKING_URI`` of the environment is not read), MLflow's usage telemetry is turned
    off before MLflow is imported, and nothing else MLflow can send is used. The run is named
    after the run folder, tagged with the environment, algorithm and folder, and carries the
    config's plain settings as parameters and the whole config as the artifact ``config.json``.
    It always holds the rows of ``metrics.jsonl``: when a run resumes (or gains the tracker
    later), a new MLflow run is filled from ``metrics.jsonl`` and the previous one is moved to the
    store's deleted runs (``mlflow gc`` removes them; nothing else does). Browse it with the full
    ``mlflow`` package: ``MLFLOW_ALLOW_FILE_STORE=true mlflow ui --backend-store-uri runs/<run>/mlruns``.

Only float values are tracked (the lists of ``tasks/dropped_seeds`` and the non-finite values
``metrics.jsonl`` writes as text stay there alone).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import os
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from envgym._imports import optional
from envgym.errors import ConfigError, MissingDependencyError, suggest

__all__ = ["TRACKERS", "Tracker", "check_trackers", "mlflow_rows", "open_tracker", "plan", "tracked_values"]

log = logging.getLogger(__name__)

#: The trackers a run can write to, and the module each one needs.
TRACKERS: Mapping[str, str] = {"tensorboard": "tensorboard", "mlflow": "mlflow"}
#: The extra that installs each tracker.
EXTRAS: Mapping[str, str] = {"tensorboard": "train", "mlflow": "tracking"}
#: The experiment of the MLflow store in every run folder.
MLFLOW_EXPERIMENT = "envgym"
MLFLOW_DIR = "mlruns"
TENSORBOARD_DIR = "tensorboard"
#: Names MLflow accepts for metrics and parameters (on Linux and macOS).
_MLFLOW_NAME = re.compile(r"^[/\w.\- :]*$")
#: MLflow's limits: characters of a parameter value, entries of one ``log_batch`` call.
_MLFLOW_PARAM_CHARS = 6000
_MLFLOW_BATCH = 1000


class Tracker(Protocol):
    """Where the metrics of each update go, besides ``metrics.jsonl``."""

    name: str

    def log(self, update: int, row: Mapping[str, Any]) -> None:
        """Record the ``metrics.jsonl`` line of ``update`` (its float values; ``time`` in seconds)."""

    def close(self, status: str = "finished") -> None:
        """Flush and release; ``status``: ``finished``, ``failed`` or ``killed`` (how the session ended)."""


def tracked_values(row: Mapping[str, Any]) -> dict[str, float]:
    """The values of a ``metrics.jsonl`` line a tracker records: the floats, without ``update`` and ``time``."""
    return {
        k: float(v) for k, v in row.items() if k not in ("update", "time") and isinstance(v, float) and math.isfinite(v)
    }


def plan(trackers: Sequence[str] | None, tensorboard: bool | None = None) -> list[tuple[str, bool]]:
    """``(name, required)`` of each tracker a run writes to, from the ``trackers`` and
    ``tensorboard`` settings: ``trackers`` ``None`` is TensorBoard when it is installed
    (``tensorboard=True``: required; ``False``: none); a list is those trackers, each required."""
    if trackers is None:
        return [] if tensorboard is False else [("tensorboard", bool(tensorboard))]
    return [(name, True) for name in trackers]


def check_trackers(names: Iterable[str], *, required: Iterable[str] | None = None) -> None:
    """Fail before any work when a tracker is unknown or a ``required`` one (default: all of
    ``names``) is not installed (:class:`MissingDependencyError` with its ``pip install`` line)."""
    names = list(names)
    needed = set(names if required is None else required)
    for name in names:
        if name not in TRACKERS:
            raise ConfigError(
                f"unknown tracker {name!r}; trackers are {', '.join(map(repr, TRACKERS))}.{suggest(name, TRACKERS)}"
            )
        if name in needed and importlib.util.find_spec(TRACKERS[name]) is None:
            raise MissingDependencyError(TRACKERS[name], EXTRAS[name], f"the {name} tracker (trackers: [{name}])")


def open_tracker(
    name: str,
    folder: str | os.PathLike[str],
    *,
    required: bool = True,
    history: Sequence[Mapping[str, Any]] = (),
    config: Mapping[str, Any] | None = None,
) -> Tracker | None:
    """Open tracker ``name`` for the run folder ``folder``; ``None`` when it is not installed and not
    ``required`` (one log line says so). ``history``: the ``metrics.jsonl`` lines already written
    (a tracker that keeps its own copy of the run fills it from them); ``config``: the run's
    settings (JSON data), for trackers that record them."""
    check_trackers([name], required=[])
    if name == "tensorboard":
        return _TensorBoard.open(Path(folder) / TENSORBOARD_DIR, required=required)
    try:
        return _MLflow(Path(folder), history=history, config=config or {})
    except MissingDependencyError:
        if required:
            raise
        log.info("mlflow is not installed: no MLflow run (metrics.jsonl has every value)")
        return None


# ------------------------------------------------------------------------------------ TensorBoard
class _TensorBoard:
    name = "tensorboard"

    def __init__(self, writer: Any) -> None:
        self._writer = writer

    @classmethod
    def open(cls, folder: Path, *, required: bool) -> _TensorBoard | None:
        try:
            import tensorboard  # noqa: F401  (torch's SummaryWriter needs the package)
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as err:
            if required:
                raise MissingDependencyError("tensorboard", "train", "TensorBoard logging (tensorboard=true)") from err
            log.info("tensorboard is not installed: no event files (metrics.jsonl has every value)")
            return None
        return cls(SummaryWriter(log_dir=str(folder)))

    def log(self, update: int, row: Mapping[str, Any]) -> None:
        for key, value in tracked_values(row).items():
            self._writer.add_scalar(key, value, global_step=update)
        self._writer.flush()

    def close(self, status: str = "finished") -> None:
        self._writer.close()


# ------------------------------------------------------------------------------------ MLflow
def _mlflow_client(folder: Path) -> tuple[Any, Any]:
    """``(MlflowClient, Metric)`` for the local store ``folder/mlruns``, offline."""
    # Set before MLflow is imported (it reads them then and on use): no usage telemetry, and the
    # file store, which MLflow 3 keeps in maintenance mode behind this opt-in (its database store
    # needs alembic and a schema migration on every new run folder).
    os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    optional("mlflow", purpose="the mlflow tracker (trackers: [mlflow])", extra="tracking")
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    uri = (folder / MLFLOW_DIR).resolve().as_uri()
    return MlflowClient(tracking_uri=uri, registry_uri=uri), Metric


def _mlflow_name_ok(key: str) -> bool:
    norm = posixpath.normpath(key)
    return bool(_MLFLOW_NAME.match(key)) and norm == key and not norm.startswith(("/", "..")) and norm != "."


class _MLflow:
    name = "mlflow"

    def __init__(self, folder: Path, *, history: Sequence[Mapping[str, Any]], config: Mapping[str, Any]) -> None:
        self._client, self._metric = _mlflow_client(folder)
        client = self._client
        experiment = client.get_experiment_by_name(MLFLOW_EXPERIMENT)
        experiment_id = experiment.experiment_id if experiment else client.create_experiment(MLFLOW_EXPERIMENT)
        # One live run per run folder, holding every row of metrics.jsonl: the previous session's
        # run (rows past its checkpoint are played again) goes to the deleted runs.
        for old in client.search_runs([experiment_id]):
            if old.info.status == "RUNNING":
                client.set_terminated(old.info.run_id, "KILLED")
            client.delete_run(old.info.run_id)
        tags = {"envgym.run_folder": str(folder.resolve())}
        for key in ("env_id", "algo", "model"):
            if isinstance(config.get(key), str):
                tags[f"envgym.{key}"] = config[key]
        run = client.create_run(experiment_id, run_name=folder.resolve().name, tags=tags)
        self.run_id: str = run.info.run_id
        self._skipped: set[str] = set()
        if config:
            self._log_config(config)
        entries = [m for row in history for m in self._metrics(int(row["update"]), row)]
        for start in range(0, len(entries), _MLFLOW_BATCH):
            client.log_batch(self.run_id, metrics=entries[start : start + _MLFLOW_BATCH])

    def _log_config(self, config: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        params = []
        for key, value in config.items():
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            if len(text) <= _MLFLOW_PARAM_CHARS and _mlflow_name_ok(key):
                params.append(Param(key, text))
        for start in range(0, len(params), 100):  # MLflow's most parameters per call
            self._client.log_batch(self.run_id, params=params[start : start + 100])
        self._client.log_dict(self.run_id, dict(config), "config.json")

    def _metrics(self, update: int, row: Mapping[str, Any]) -> list[Any]:
        stamp = round(float(row.get("time", 0.0)) * 1000)
        out = []
        for key, value in tracked_values(row).items():
            if not _mlflow_name_ok(key):
                if key not in self._skipped:
                    self._skipped.add(key)
                    log.warning("metric %r is not a name MLflow accepts: kept in metrics.jsonl only", key)
                continue
            out.append(self._metric(key, value, stamp, update))
        return out

    def log(self, update: int, row: Mapping[str, Any]) -> None:
        metrics = self._metrics(update, row)
        for start in range(0, len(metrics), _MLFLOW_BATCH):
            self._client.log_batch(self.run_id, metrics=metrics[start : start + _MLFLOW_BATCH])

    def close(self, status: str = "finished") -> None:
        self._client.set_terminated(self.run_id, status.upper())


def mlflow_rows(folder: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The live MLflow run of run folder ``folder`` read back from its store, as ``metrics.jsonl``
    rows (``{"update": n, key: value, ...}``, by update; ``time`` left out).

    Raises:
        ConfigError: the folder has no MLflow run.
    """
    client, _ = _mlflow_client(Path(folder))
    experiment = client.get_experiment_by_name(MLFLOW_EXPERIMENT)
    runs = client.search_runs([experiment.experiment_id]) if experiment else []
    if not runs:
        raise ConfigError(f"{folder} holds no MLflow run; train with trackers: [mlflow] first.")
    run = runs[0]
    rows: dict[int, dict[str, Any]] = {}
    for key in run.data.metrics:
        for point in client.get_metric_history(run.info.run_id, key):
            rows.setdefault(int(point.step), {"update": int(point.step)})[key] = float(point.value)
    return [rows[update] for update in sorted(rows)]
