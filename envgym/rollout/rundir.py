"""Run folders: where a run's records live, how it resumes, and how it is read back.

A run folder holds

* ``config.json``: the resolved run configuration (what decides the episodes' content);
* ``meta.json``: envgym and package versions, Python, platform, the git commit of the envgym
  source tree (when it is a git checkout), the command line, and one entry per session that
  wrote into the folder;
* ``episodes.jsonl``: one :class:`~envgym.rollout.records.Trajectory` per line, appended and
  flushed to disk the moment each episode ends, so a crash loses only the live episodes;
* ``summary.json``: the summary of the last completed session;
* ``.lock``: the OS lock that makes one process at a time the folder's writer (a second one is
  refused at once, naming the owner's pid; the lock goes with the process, so a killed run
  resumes).

Every whole file is replaced atomically (:func:`envgym._runfiles.write_atomic`) and the records
are only appended, so a run killed at any instant (``kill -9`` included) leaves a folder that the
same command resumes: a damaged last record line is the episode the kill interrupted, cut away and
played again; a damaged line before it is refused (``line N of PATH is damaged``).

Re-running into the same folder resumes: finished episodes are skipped, episodes that ended by an
infrastructure failure are run again, and a changed configuration is refused (the message lists
what changed). :func:`load_run` returns a pandas DataFrame; :func:`export_parquet` writes Parquet.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Self

from envgym._clock import utc_timestamp
from envgym._folderlock import LOCK_FILE, FolderLock
from envgym._imports import optional
from envgym._runfiles import read_jsonl, write_atomic
from envgym.errors import ConfigError, MissingDependencyError
from envgym.rollout.records import Trajectory, json_safe

__all__ = [
    "RunFolder",
    "export_parquet",
    "git_commit",
    "load_run",
    "load_trajectories",
    "package_versions",
    "record_session",
]

CONFIG_FILE = "config.json"
META_FILE = "meta.json"
EPISODES_FILE = "episodes.jsonl"
SUMMARY_FILE = "summary.json"

#: Distributions whose versions a run records (looked up without importing them).
TRACKED_PACKAGES = (
    "envgym",
    "gymnasium",
    "pettingzoo",
    "numpy",
    "torch",
    "transformers",
    "accelerate",
    "peft",
    "vllm",
    "ray",
    "httpx",
    "pandas",
    "textworld",
)


def package_versions(names: Iterable[str] = TRACKED_PACKAGES) -> dict[str, str]:
    """Installed versions of ``names`` (missing ones left out), read from package metadata."""
    versions = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def git_commit(path: str | os.PathLike[str] | None = None) -> dict[str, Any] | None:
    """``{"commit": sha, "dirty": bool}`` of the git checkout holding ``path`` (default: envgym's
    source), or ``None`` when it is not a git checkout or git is missing."""
    where = Path(path) if path is not None else Path(__file__).resolve().parent
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": sha, "dirty": bool(status.strip())} if sha else None


def _config_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    lines = []
    for key in sorted(set(old) | set(new)):
        if old.get(key, "<absent>") != new.get(key, "<absent>"):
            lines.append(f"{key}: {old.get(key, '<absent>')!r} -> {new.get(key, '<absent>')!r}")
    return lines


def _read_records(path: Path, *, repair: bool = False) -> list[Trajectory]:
    """Read ``episodes.jsonl`` (:func:`envgym._runfiles.read_jsonl`). A damaged last line, the
    episode a crash interrupted, is dropped (and, with ``repair``, cut off the file so appends start
    on a clean line and the episode is played again); a damaged line elsewhere is refused."""
    return read_jsonl(path, Trajectory.from_dict, repair=repair)


def _latest_by_index(records: Iterable[Trajectory]) -> dict[int, Trajectory]:
    latest: dict[int, Trajectory] = {}
    for record in records:  # later lines supersede earlier ones (a re-run of a failed episode)
        latest[record.index] = record
    return latest


class RunFolder:
    """A run folder opened for writing.

    Args:
        path: the folder (created if missing).
        config: the resolved, JSON-serialisable run configuration.
        identity_keys: the keys of ``config`` that decide what the episodes contain; resuming
            with any of them changed is refused. Other keys (episodes, workers, backend...) may
            change between sessions.

    The folder is locked (:class:`envgym._folderlock.FolderLock`) from construction to
    :meth:`close`: a second writer, in this process or another, gets
    :class:`~envgym._folderlock.FolderInUseError`.
    """

    def __init__(self, path: str | os.PathLike[str], config: Mapping[str, Any], identity_keys: Iterable[str]) -> None:
        self.path = Path(path)
        self.config = json_safe(dict(config))
        self.identity_keys = tuple(identity_keys)
        self._lock = threading.Lock()
        self._file: Any = None
        existed = self.path.exists()
        self._owner = FolderLock(self.path, "run folder")
        # A new folder that ends up with no episode and no summary (the run failed before its first
        # episode: a bad agent option, a model that does not load) is taken away again on close,
        # so the corrected command starts afresh instead of being refused as a different run.
        self._fresh = not (self.path / CONFIG_FILE).exists() and not (self.path / EPISODES_FILE).exists()
        self._created = not existed
        self._kept = False
        #: The records this session appended, in order (summaries take this session's speed from them).
        self.appended: list[Trajectory] = []
        try:
            self._open()
        except BaseException:
            self._owner.release()
            raise

    def _open(self) -> None:
        config_path = self.path / CONFIG_FILE
        if config_path.exists():
            try:
                old = json.loads(config_path.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as err:
                raise ConfigError(
                    f"{config_path} is not valid JSON ({err}); remove the folder or pick another --out."
                ) from err
            if not isinstance(old, dict):
                raise ConfigError(
                    f"{config_path} holds {type(old).__name__}, not a run configuration; remove the folder or pick "
                    "another --out."
                )
            old_identity = {k: old.get(k) for k in self.identity_keys}
            new_identity = {k: self.config.get(k) for k in self.identity_keys}
            if old_identity != new_identity:
                changes = "; ".join(_config_diff(old_identity, new_identity))
                raise ConfigError(
                    f"{self.path} holds a run with a different configuration ({changes}). Resume it with the same "
                    "settings, or write this run into another folder (--out)."
                )
        self.previous = _latest_by_index(_read_records(self.path / EPISODES_FILE, repair=True))
        # The config goes in before any episode (a folder with records always has its config)
        # and whole, so a kill leaves the old one or the new one.
        write_atomic(config_path, json.dumps(self.config, indent=2, sort_keys=True) + "\n", skip_unchanged=True)
        self._write_meta()

    @property
    def finished(self) -> dict[int, Trajectory]:
        """Episodes already recorded with a scored ending, by index (these are skipped)."""
        return {i: t for i, t in self.previous.items() if t.scored}

    def _write_meta(self) -> None:
        record_session(
            self.path / META_FILE,
            {"started_at": utc_timestamp(), "argv": list(sys.argv), "resumed_from": len(self.previous)},
        )

    def append(self, trajectory: Trajectory) -> None:
        """Write one finished episode and push it to disk before returning (thread-safe)."""
        line = json.dumps(trajectory.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n"
        data = line.encode("utf-8")
        with self._lock:
            if not self._owner.held:
                raise RuntimeError(f"{self.path} was closed; open a new RunFolder to write into it.")
            self._kept = True
            if self._file is None:
                self._file = (self.path / EPISODES_FILE).open("ab")
            self._file.write(data)
            self._file.flush()
            os.fsync(self._file.fileno())
            self.appended.append(trajectory)

    def write_summary(self, summary: Mapping[str, Any]) -> None:
        if not self._owner.held:
            raise RuntimeError(f"{self.path} was closed; write the summary before closing the folder.")
        self._kept = True
        write_atomic(self.path / SUMMARY_FILE, json.dumps(json_safe(dict(summary)), indent=2, sort_keys=True) + "\n")

    def close(self) -> None:
        """Close the episodes file and give up the folder's lock (idempotent).

        A folder this run made new and left without an episode or a summary (it failed before its
        first episode ended) is removed again: what this run wrote goes, and the folder itself when
        this run created it and nothing else is in it.
        """
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
            if self._fresh and not self._kept and self._owner.held:
                self._undo()
            self._owner.release()

    def _undo(self) -> None:
        """Remove what :meth:`_open` wrote into a new folder (called holding the folder's lock)."""
        for name in (CONFIG_FILE, META_FILE, EPISODES_FILE, LOCK_FILE):
            (self.path / name).unlink(missing_ok=True)
        if self._created:
            try:
                self.path.rmdir()  # only when empty: nothing of anyone else's goes
            except OSError:
                pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def load_trajectories(path: str | os.PathLike[str]) -> list[Trajectory]:
    """Every episode of the run folder ``path`` (the latest record of each), in index order."""
    folder = Path(path)
    if not (folder / EPISODES_FILE).exists() and not (folder / CONFIG_FILE).exists():
        raise ConfigError(f"{folder} is not a run folder (no {EPISODES_FILE} or {CONFIG_FILE} in it).")
    latest = _latest_by_index(_read_records(folder / EPISODES_FILE))
    return [latest[i] for i in sorted(latest)]


def _pandas() -> Any:
    return optional("pandas", purpose="loading runs as tables")


def episode_rows(trajectories: Iterable[Trajectory]) -> list[dict[str, Any]]:
    """One flat dict per episode: the columns of :func:`load_run`."""
    rows = []
    for t in trajectories:
        row: dict[str, Any] = {
            "episode_id": t.episode_id,
            "index": t.index,
            "env_id": t.env_id,
            "seed": t.seed,
            "group": t.group,
            "member": t.member,
            "agent": t.agent,
            "task_id": t.task_id,
            "success": t.success,
            "total_reward": t.total_reward,
            "turns": t.num_turns,
            "invalid_actions": t.invalid_actions,
            "termination_reason": t.termination_reason,
            "scored": t.scored,
            "attempts": t.attempts,
            "error": t.error,
            "prompt_tokens": t.prompt_tokens,
            "completion_tokens": t.completion_tokens,
            "wall_time_s": t.wall_time_s,
        }
        for name, value in t.reward_components.items():
            row[f"reward/{name}"] = value
        rows.append(row)
    return rows


def turn_rows(trajectories: Iterable[Trajectory]) -> list[dict[str, Any]]:
    """One flat dict per turn. Token ids and log-probs stay lists; ``messages`` and ``extra``
    are JSON text (their shapes vary from turn to turn, which columnar formats cannot hold)."""
    rows = []
    for t in trajectories:
        for turn in t.turns:
            row = {"episode_id": t.episode_id, "index": t.index, "env_id": t.env_id, "seed": t.seed}
            row.update(turn.to_dict())
            components = row.pop("reward_components")
            for name, value in components.items():
                row[f"reward/{name}"] = value
            for key in ("messages", "extra"):
                row[key] = None if row[key] is None else json.dumps(row[key], ensure_ascii=False)
            rows.append(row)
    return rows


def load_run(path: str | os.PathLike[str], *, level: str = "episode") -> Any:
    """The run folder ``path`` as a pandas DataFrame.

    Args:
        path: a run folder.
        level: ``"episode"`` (one row per episode, reward components as ``reward/<name>``
            columns) or ``"turn"`` (one row per turn).
    """
    if level not in ("episode", "turn"):
        raise ConfigError(f"level must be 'episode' or 'turn', got {level!r}.")
    pandas = _pandas()
    trajectories = load_trajectories(path)
    rows = episode_rows(trajectories) if level == "episode" else turn_rows(trajectories)
    return pandas.DataFrame(rows)


def export_parquet(path: str | os.PathLike[str], out: str | os.PathLike[str] | None = None) -> list[Path]:
    """Write ``episodes.parquet`` and ``turns.parquet`` (into ``out``, default the run folder)."""
    target = Path(out) if out is not None else Path(path)
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for level in ("episode", "turn"):
        frame = load_run(path, level=level)
        file = target / f"{level}s.parquet"
        try:
            frame.to_parquet(file, index=False)
        except ImportError as err:
            raise MissingDependencyError("pyarrow", "data", "Parquet export") from err
        written.append(file)
    return written


def record_session(meta_path: Path, session: dict[str, Any]) -> dict[str, Any]:
    """Append ``session`` to the ``sessions`` of the ``meta.json`` at ``meta_path`` (created if
    missing or unreadable), refresh the machine facts (Python, platform, package versions, git
    commit), keep the first ``created_at``, write it atomically and return it."""
    meta: dict[str, Any] = {}
    if meta_path.exists():
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            meta = {}
        if not isinstance(meta, dict) or not isinstance(meta.get("sessions", []), list):
            meta = {}
    meta.setdefault("created_at", session.get("started_at"))
    meta.update(
        {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "packages": package_versions(),
            "git": git_commit(),
        }
    )
    meta.setdefault("sessions", []).append(session)
    write_atomic(meta_path, json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return meta
