"""Run a suite with one agent: one harness run folder per entry, plus the bench files.

A bench run folder::

    DIR/
      bench.json     # format, suite {name, version, id, sha256}, agent, agent_options, trials,
                     # created, envgym_version, packages, git_commit, entries (names, in order),
                     # wall_time_s (elapsed play time, summed over the sessions that finished)
      suite.yaml     # the resolved suite (defaults applied), as run
      entries/<entry-name>/   # an ordinary envgym.rollout run folder (config.json, meta.json,
                              # episodes.jsonl, summary.json); trials K are group_size=K
      results.json   # metrics per entry and overall (envgym.bench.metrics)

Every entry goes through :class:`envgym.rollout.Runner`, so running the same suite with the same
agent into the same folder resumes each entry where it stopped; a different suite (by content
hash), agent, agent options or trial count is refused before anything runs.

Entry ``e`` with seeds ``s_0 .. s_{n-1}`` and ``K`` trials plays ``n * K`` episodes; episode
``i`` plays seed ``s_{i // K}`` as trial ``i % K`` (``Trajectory.member``). Every entry runs with
the suite's prompt block (:attr:`Suite.prompt_config`: history, per-reply token cap, stop at the
closing action tag), so every chat agent is held to the same reply limits. An entry's reward
wrappers are in its ``env_kwargs`` (:attr:`SuiteEntry.env_kwargs`), so every episode's
environment, in any worker, is made with them. The agent is built once (seed 0; ``random:SEED``
sets another) and serves every entry; sampling agents seed each episode from (agent seed, env
seed, trial), so a resumed run replays the same episodes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from envgym import __version__
from envgym._clock import utc_now
from envgym._folderlock import LOCK_FILE, FolderLock
from envgym._runfiles import write_atomic
from envgym.bench.metrics import compute_results
from envgym.bench.suite import Suite, load_suite, parse_suite
from envgym.errors import ConfigError
from envgym.rollout.multiagent import records_per_episode
from envgym.rollout.records import Trajectory, json_safe
from envgym.rollout.rundir import EPISODES_FILE, RunFolder, git_commit, load_trajectories, package_versions
from envgym.rollout.runner import IDENTITY_KEYS, RunConfig, Runner
from envgym.rollout.specs import make_agent, split_agent_spec
from envgym.rollout.summary import summarize, summarize_multiagent
from envgym.rollout.tasks import EpisodeTask, tasks_for

__all__ = [
    "BENCH_FILE",
    "BENCH_FORMAT",
    "RESULTS_FILE",
    "RESULTS_FORMAT",
    "SUITE_FILE",
    "BenchRun",
    "agent_slug",
    "default_out",
    "load_bench_run",
    "run_suite",
    "write_results",
]

BENCH_FORMAT = "envgym-bench-run/1"
RESULTS_FORMAT = "envgym-bench-results/1"
BENCH_FILE = "bench.json"
SUITE_FILE = "suite.yaml"
RESULTS_FILE = "results.json"
ENTRIES_DIR = "entries"
#: bench.json keys that decide what the episodes contain; resuming with one changed is refused.
IDENTITY = ("suite", "agent", "agent_options", "trials", "system_prompt")


def agent_slug(spec: str) -> str:
    """A folder-safe name for an agent spec: ``hf:smollm2`` -> ``hf-smollm2``; the server URL of
    ``openai:MODEL@URL`` is left out."""
    text = spec.split("@", 1)[0].lower()
    slug = re.sub(r"[^a-z0-9]+", "-", text).strip("-")
    return slug[:60] or "agent"


def default_out(suite: Suite, agent: str, *, root: str | os.PathLike[str] = "runs/bench") -> Path:
    """``runs/bench/<suite-id>/<agent-slug>-<UTC timestamp>`` (relative to the working folder)."""
    stamp = utc_now().strftime("%Y%m%dT%H%M%SZ")
    return Path(root) / suite.id / f"{agent_slug(agent)}-{stamp}"


def _write_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(json_safe(data), indent=2, ensure_ascii=False) + "\n")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ConfigError(f"{path} cannot be read as JSON ({err}); the bench run folder is damaged.") from err


@dataclass
class BenchRun:
    """A bench run folder, read back.

    Attributes:
        path: the folder.
        meta: ``bench.json``.
        suite: the resolved suite from ``suite.yaml`` (its hash checked against ``bench.json``).
    """

    path: Path
    meta: dict[str, Any]
    suite: Suite
    _cache: dict[str, list[Trajectory]] = field(default_factory=dict, repr=False)

    @property
    def agent(self) -> str:
        return str(self.meta["agent"])

    @property
    def trials(self) -> int:
        return int(self.meta["trials"])

    @property
    def entry_names(self) -> list[str]:
        """The entries, in the suite's order, as ``bench.json`` lists them."""
        return list(self.meta["entries"])

    def entry_dir(self, name: str) -> Path:
        return self.path / ENTRIES_DIR / name

    def entry_config(self, name: str) -> dict[str, Any]:
        """The entry's run configuration (its run folder's ``config.json``)."""
        config = _read_json(self.entry_dir(name) / "config.json")
        if not isinstance(config, dict):
            raise ConfigError(
                f"{self.entry_dir(name) / 'config.json'} is not a JSON object; the run folder is damaged."
            )
        return config

    def suite_document(self) -> Any:
        """``suite.yaml`` as the plain data it holds (the resolved suite, as run)."""
        return yaml.safe_load((self.path / SUITE_FILE).read_text(encoding="utf-8"))

    def trajectories(self, name: str) -> list[Trajectory]:
        """The recorded episodes of entry ``name`` (empty when it has not run yet)."""
        if name not in self._cache:
            folder = self.entry_dir(name)
            expected = self.expected_records(name)
            found = load_trajectories(folder) if folder.is_dir() else []
            self._cache[name] = [t for t in found if t.index < expected]
        return self._cache[name]

    def per_entry(self) -> dict[str, list[Trajectory]]:
        return {e.name: self.trajectories(e.name) for e in self.suite.entries}

    def expected_records(self, name: str) -> int:
        """Records entry ``name`` holds when complete: ``episodes * trials``, times the agents of a
        PettingZoo Parallel entry (one record per agent)."""
        entry = self.suite.entry(name)
        return entry.episodes * self.trials * _records_per_episode(entry)

    def missing(self) -> dict[str, int]:
        """Records not yet written, by entry (an interrupted run)."""
        out = {}
        for e in self.suite.entries:
            gap = self.expected_records(e.name) - len(self.trajectories(e.name))
            if gap:
                out[e.name] = gap
        return out

    def results(self, *, recompute: bool = False) -> dict[str, Any]:
        """``results.json`` (computed from the episodes when missing or ``recompute``)."""
        file = self.path / RESULTS_FILE
        if file.exists() and not recompute:
            data = _read_json(file)
            if isinstance(data, dict) and data.get("format") == RESULTS_FORMAT:
                return data
        return build_results(self)


def load_bench_run(path: str | os.PathLike[str]) -> BenchRun:
    """Open a bench run folder; check its ``bench.json`` and that ``suite.yaml`` still hashes to
    the recorded sha256 (an edited ``suite.yaml`` is refused)."""
    folder = Path(path)
    bench_file = folder / BENCH_FILE
    if not bench_file.is_file():
        raise ConfigError(f"{folder} is not a bench run folder (no {BENCH_FILE}); make one with `envgym bench run`.")
    meta = _read_json(bench_file)
    if not isinstance(meta, dict) or meta.get("format") != BENCH_FORMAT:
        got = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise ConfigError(f"{bench_file}: expected format {BENCH_FORMAT!r}, got {got!r}.")
    for key in ("suite", "agent", "trials", "entries"):
        if key not in meta:
            raise ConfigError(f"{bench_file}: missing field {key!r}; the bench run folder is damaged.")
    suite_meta = meta["suite"]
    if not isinstance(suite_meta, Mapping) or not all(
        isinstance(suite_meta.get(k), (str, int)) for k in ("id", "name", "sha256")
    ):
        raise ConfigError(f"{bench_file}: 'suite' must hold id, name, version and sha256, got {suite_meta!r:.120}.")
    names = meta["entries"]
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"{bench_file}: 'entries' must be the list of entry names, got {names!r:.120}.")
    trials = meta["trials"]
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ConfigError(f"{bench_file}: 'trials' must be an integer >= 1, got {trials!r}.")
    suite_file = folder / SUITE_FILE
    try:
        data = yaml.safe_load(suite_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise ConfigError(f"{suite_file} cannot be read ({err}); the bench run folder is damaged.") from err
    suite = parse_suite(data, source=str(suite_file), check_envs=False, check_ids=False)
    recorded = meta["suite"].get("sha256") if isinstance(meta["suite"], dict) else None
    if suite.sha256 != recorded:
        raise ConfigError(
            f"{suite_file} hashes to {suite.sha256[:12]}... but {BENCH_FILE} records {str(recorded)[:12]}...: "
            "the resolved suite was edited after the run. Restore it; results are only valid for the suite as run."
        )
    return BenchRun(path=folder, meta=meta, suite=suite)


def build_results(run: BenchRun, **bootstrap: Any) -> dict[str, Any]:
    """The ``results.json`` document of a bench run (not written)."""
    spent = run.meta.get("wall_time_s")  # None for runs from before it was recorded
    elapsed = float(spent) if isinstance(spent, (int, float)) and not isinstance(spent, bool) else None
    computed = compute_results(run.per_entry(), elapsed_s=elapsed, **bootstrap)
    for item in computed["entries"]:
        entry = run.suite.entry(item["name"])
        item["env"] = entry.env
        item["split"] = entry.split
        item["expected_episodes"] = run.expected_records(entry.name)
    return {
        "format": RESULTS_FORMAT,
        "suite": dict(run.meta["suite"]),
        "agent": run.agent,
        "agent_options": run.meta.get("agent_options", {}),
        "trials": run.trials,
        "metrics": list(run.suite.metrics),
        "complete": not run.missing(),
        "missing": run.missing(),
        **computed,
    }


def write_results(run: BenchRun, **bootstrap: Any) -> dict[str, Any]:
    """Compute and write ``results.json``; return it."""
    results = build_results(run, **bootstrap)
    _write_json(run.path / RESULTS_FILE, results)
    return results


def _records_per_episode(entry: Any) -> int:
    """1 for a single-agent entry; the number of agents for a PettingZoo Parallel one."""
    kwargs = {k: v for k, v in entry.env_kwargs.items() if k != "reward_wrappers"}
    return records_per_episode(entry.env, kwargs)


def _identity_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    lines = []
    for key in IDENTITY:
        a, b = old.get(key), new.get(key)
        if key == "suite" and isinstance(a, Mapping) and isinstance(b, Mapping):
            a = {k: a.get(k) for k in ("id", "sha256")}
            b = {k: b.get(k) for k in ("id", "sha256")}
        if json.dumps(json_safe(a), sort_keys=True) != json.dumps(json_safe(b), sort_keys=True):
            lines.append(f"{key}: {a!r} -> {b!r}")
    return lines


def _started_here(path: Path) -> bool:
    """Whether ``path`` is a file a bench run writes before its ``bench.json``."""
    name = path.name
    if name in (LOCK_FILE, SUITE_FILE):
        return path.is_file()
    return name.startswith((f".{SUITE_FILE}.", f".{BENCH_FILE}.")) and name.endswith(".tmp") and path.is_file()


def run_suite(
    suite: Suite | str | os.PathLike[str],
    agent: str,
    *,
    agent_options: Mapping[str, Any] | None = None,
    trials: int | None = None,
    out: str | os.PathLike[str] | None = None,
    num_envs: int | None = None,
    backend: str = "inproc",
    url: str | None = None,
    workers: int = 1,
    mode: str = "lockstep",
    max_retries: int = 2,
    episode_timeout_s: float | None = None,
    step_timeout_s: float | None = None,
    agent_timeout_s: float | None = None,
    agent_object: Any = None,
    limit: int | None = None,
    system_prompt: str | None = None,
    on_entry: Callable[[str, int, int], None] | None = None,
    on_episode_end: Callable[[str, Trajectory], None] | None = None,
    on_progress: Callable[..., None] | None = None,
) -> BenchRun:
    """Run every entry of ``suite`` with ``agent`` and write the bench run folder.

    Args:
        suite: a :class:`Suite`, a suite id (``core-v1``) or a path to a suite file.
        agent: agent spec (``random``, ``oracle``, ``hf:smollm2``, ``openai:MODEL@URL``).
        agent_options: keyword arguments for the agent (``temperature``, ``max_new_tokens``...).
        trials: episodes per seed (K); default the suite's ``defaults.trials``.
        out: the run folder; default :func:`default_out`. An existing bench run folder resumes.
        num_envs, backend, url, workers, mode, max_retries, *_timeout_s: harness settings
            (:class:`envgym.rollout.RunConfig`); they may change between sessions of a run.
        agent_object: an agent object to use instead of building one from ``agent`` (``agent``
            is still what the run records).
        limit: play only the first ``limit`` entries (suite order); the others stay missing and a
            later call without it plays them into the same folder.
        system_prompt: the system-prompt template of every entry, instead of the suite's (part of
            the run's identity: recorded in ``bench.json``; a resume with another is refused).
        on_entry: called as ``on_entry(entry name, episodes to play now, episodes in the entry)``.
        on_episode_end: called with the entry name and every episode recorded.
        on_progress: the runner's progress hook (:class:`envgym.rollout.Runner`), over the
            episodes still to play (those already recorded are not in its ``total``).

    Returns the :class:`BenchRun` (``results.json`` written).

    Raises:
        ConfigError: a bad suite, agent spec or setting, or a folder holding a different run.
    """

    if not isinstance(suite, Suite):
        suite = load_suite(suite)
    split_agent_spec(agent)  # a bad spec fails before anything is written or loaded
    options = dict(agent_options or {})
    k = suite.trials if trials is None else trials
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ConfigError(f"trials must be an integer >= 1, got {k!r}.")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise ConfigError(f"limit must be an integer >= 1 (entries to play), got {limit!r}.")
    prompt = suite.prompt_config  # the suite's prompt block: every entry, every agent
    if system_prompt is not None:
        prompt = dataclasses.replace(prompt, system_prompt=system_prompt)  # a bad template fails here
    harness: dict[str, Any] = {
        "num_envs": num_envs,
        "backend": backend,
        "url": url,
        "workers": workers,
        "mode": mode,
        "max_retries": max_retries,
        "episode_timeout_s": episode_timeout_s,
        "step_timeout_s": step_timeout_s,
        "agent_timeout_s": agent_timeout_s,
    }
    # Validate the harness settings once, before any folder is touched.
    RunConfig(env_id=suite.entries[0].env, agent=agent, agent_options=options, **harness)
    folder = Path(out) if out is not None else default_out(suite, agent)
    # Checked before the lock file goes in, so a folder that is not ours is left untouched. What a
    # run killed before its bench.json leaves is ours: the lock file, suite.yaml (written first)
    # and the temporary files of atomic writes.
    if folder.is_dir() and not (folder / BENCH_FILE).exists() and not all(_started_here(p) for p in folder.iterdir()):
        raise ConfigError(f"{folder} exists and is not a bench run folder (no {BENCH_FILE}); pick another --out.")
    created = not folder.exists()
    fresh = not (folder / BENCH_FILE).exists()
    # One process at a time writes a bench run folder (a second one stops here, naming the first);
    # the lock goes when this returns or the process dies, so a killed run resumes.
    with FolderLock(folder, "bench run folder"):
        try:
            return _play_suite(
                suite,
                agent,
                options,
                k,
                harness,
                folder,
                prompt=prompt,
                system_prompt=system_prompt,
                limit=limit,
                agent_object=agent_object,
                on_entry=on_entry,
                on_episode_end=on_episode_end,
                on_progress=on_progress,
            )
        except BaseException:
            if fresh:
                _undo_new_folder(folder, created=created)
            raise


def _undo_new_folder(folder: Path, *, created: bool) -> None:
    """Take back what a new bench run wrote when it fails before any episode is recorded (a bad
    agent option, a model that does not load), so the corrected command starts afresh. Called
    holding the folder's lock; a folder with a recorded episode is left as it is, to resume."""
    entries = folder / ENTRIES_DIR
    if entries.is_dir() and any(entries.glob(f"*/{EPISODES_FILE}")):
        return
    if entries.is_dir():
        for entry in entries.iterdir():
            try:
                entry.rmdir()  # empty: each entry's run folder already took its own files back
            except OSError:
                return  # something else is in it: leave the folder alone
        entries.rmdir()
    for name in (BENCH_FILE, SUITE_FILE, LOCK_FILE):
        (folder / name).unlink(missing_ok=True)
    if created:
        try:
            folder.rmdir()
        except OSError:
            pass


def _play_suite(
    suite: Suite,
    agent: str,
    options: dict[str, Any],
    k: int,
    harness: dict[str, Any],
    folder: Path,
    *,
    prompt: Any,
    system_prompt: str | None,
    limit: int | None,
    agent_object: Any,
    on_entry: Callable[[str, int, int], None] | None,
    on_episode_end: Callable[[str, Trajectory], None] | None,
    on_progress: Callable[..., None] | None = None,
) -> BenchRun:
    """The body of :func:`run_suite` once ``folder`` is locked."""
    commit = git_commit()
    meta: dict[str, Any] = {
        "format": BENCH_FORMAT,
        "suite": {"name": suite.name, "version": suite.version, "id": suite.id, "sha256": suite.sha256},
        "agent": agent,
        "agent_options": json_safe(options),
        "trials": k,
        "created": utc_now().isoformat(timespec="seconds"),
        "envgym_version": __version__,
        "packages": package_versions(),
        "git_commit": commit["commit"] if commit else None,
        "git_dirty": commit["dirty"] if commit else None,
        "entries": [e.name for e in suite.entries],
        "wall_time_s": 0.0,
    }
    if system_prompt is not None:  # only when given: bench.json of a run with the suite's prompt is as before
        meta["system_prompt"] = system_prompt
    bench_file = folder / BENCH_FILE
    if bench_file.exists():
        old = _read_json(bench_file)
        if not isinstance(old, dict) or old.get("format") != BENCH_FORMAT:
            raise ConfigError(f"{bench_file} is not an {BENCH_FORMAT} file; pick another --out.")
        changes = _identity_diff(old, meta)
        if changes:
            raise ConfigError(
                f"{folder} holds a bench run with a different setup ({'; '.join(changes)}). Resume it with the same "
                "suite, agent, agent options and trials, or write this run into another folder (--out)."
            )
        meta["created"] = old.get("created", meta["created"])
        spent = old.get("wall_time_s")
        meta["wall_time_s"] = float(spent) if isinstance(spent, (int, float)) and not isinstance(spent, bool) else None
        meta["resumed"] = utc_now().isoformat(timespec="seconds")

    def recorded(entry_dir: Path, total: int) -> int:
        if not (entry_dir / "episodes.jsonl").exists():
            return 0
        return sum(1 for t in load_trajectories(entry_dir) if t.scored and t.index < total)

    per = {e.name: _records_per_episode(e) for e in suite.entries}
    done_by_entry = {
        e.name: recorded(folder / ENTRIES_DIR / e.name, e.episodes * k * per[e.name]) for e in suite.entries
    }
    complete = bench_file.exists() and all(
        done_by_entry[e.name] >= e.episodes * k * per[e.name]
        and (folder / ENTRIES_DIR / e.name / "summary.json").exists()
        for e in suite.entries
    )
    if not complete:
        # A finished run is left as it is (its bench.json keeps the commit and packages that
        # produced it), so running it again changes nothing and bundles to the same file.
        # suite.yaml goes first and bench.json, the mark of a bench run folder, last: a kill between
        # them leaves a folder this same command resumes (see _started_here). Both are replaced
        # whole, and suite.yaml only when its text differs, so a kill leaves the report and submit
        # commands a readable folder.
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(folder / SUITE_FILE, suite.to_yaml(), skip_unchanged=True)
        _write_json(bench_file, meta)

    # Every missing episode of every entry goes into one task list and one Runner call: episodes of
    # different entries share the agent's batches. Each entry keeps its own run folder (config.json,
    # episodes.jsonl, summary.json), which files the episodes the runner hands back by entry.
    folders: dict[str, RunFolder] = {}
    recorded_by_entry: dict[str, dict[int, Trajectory]] = {}
    played_by_entry: dict[str, list[Trajectory]] = {e.name: [] for e in suite.entries}  # this session's
    tasks: list[EpisodeTask] = []
    playing = suite.entries if limit is None else suite.entries[:limit]
    try:
        for entry in playing:
            entry_dir = folder / ENTRIES_DIR / entry.name
            total = entry.episodes * k
            n = per[entry.name]  # records per episode: the agents of a Parallel entry, else 1
            if on_entry is not None:
                on_entry(entry.name, total - done_by_entry[entry.name] // n, total)
            if done_by_entry[entry.name] >= total * n and (entry_dir / "summary.json").exists():
                continue
            config = RunConfig(
                env_id=entry.env,
                agent=agent,
                agent_options=options,
                episodes=total,
                seed=entry.seeds[0],
                group_size=k,
                env_kwargs=entry.env_kwargs,
                max_turns=entry.max_turns,
                prompt=prompt,
                **harness,
            )
            entry_folder = folders[entry.name] = RunFolder(entry_dir, config.to_dict(), IDENTITY_KEYS)
            finished = {i: t for i, t in entry_folder.finished.items() if i < total * n}
            recorded_by_entry[entry.name] = finished
            every = tasks_for(
                entry.env,
                entry.seeds,
                group_size=k,
                env_kwargs=entry.env_kwargs,
                max_turns=entry.max_turns,
                tag=entry.name,
                first_index=0,
            )
            tasks += [task for task in every if any(task.index * n + j not in finished for j in range(n))]
        started = time.perf_counter()
        if tasks:

            def file_episode(task: EpisodeTask, trajectory: Trajectory) -> None:
                played_by_entry[task.tag].append(trajectory)
                folders[task.tag].append(trajectory)
                recorded_by_entry[task.tag][trajectory.index] = trajectory
                if on_episode_end is not None:
                    on_episode_end(task.tag, trajectory)

            config = RunConfig(agent=agent, agent_options=options, tasks=tasks, prompt=prompt, **harness)
            agent_obj = agent_object if agent_object is not None else make_agent(agent, seed=0, **options)
            try:
                Runner(
                    config,
                    agent_obj,
                    on_task_end=file_episode,
                    on_progress=on_progress,
                    # each entry's screenshots beside its episodes.jsonl (envgym.rollout.screenshots)
                    screenshots=lambda task: folder / ENTRIES_DIR / task.tag,
                ).run()
            finally:
                if agent_object is None:
                    agent_obj.close()
        elapsed = time.perf_counter() - started
        if tasks and meta["wall_time_s"] is not None:
            # The run's real elapsed time: its entries play in one batch, so their times overlap.
            meta["wall_time_s"] = round(meta["wall_time_s"] + elapsed, 4)
            _write_json(bench_file, meta)
        for entry in suite.entries:
            if entry.name not in folders:
                continue
            trajectories = [t for _, t in sorted(recorded_by_entry[entry.name].items())]
            summary = summarize(trajectories, elapsed, played=played_by_entry[entry.name])
            multi = summarize_multiagent(trajectories)
            if multi is not None:
                summary["multiagent"] = multi
            folders[entry.name].write_summary({"env_id": entry.env, "agent": agent, "seed": entry.seeds[0], **summary})
    finally:
        for entry_folder in folders.values():
            entry_folder.close()
    run = load_bench_run(folder)
    if not complete or not (folder / RESULTS_FILE).exists():
        write_results(run)
    return run
