"""The task builder: bug injection into real libraries, kept only where the library's tests notice.

In the style of SWE-smith's procedural modifications: for each library of :mod:`.libraries`

1. run its test suite once on the pristine tree (the *baseline*: which tests pass), and once
   more with a line tracer that records which library lines each test executes (the *coverage
   map*), both with the sandboxes' interpreter, ``/usr/bin/python3 -m pytest``;
2. enumerate the AST mutations of every source file (:mod:`.mutations`) and keep the candidates
   whose lines some passing test executes (a mutation nobody runs cannot fail a test);
3. for a deterministic sample of candidates, write the mutant and run, by test id, the tests
   that execute its lines plus a sample of the other tests of the same files (a test that never
   executes the mutated lines behaves exactly as before), with a per-test timeout (a mutant whose
   test hangs is dropped). A mutant is kept when some of those tests fail (``FAIL_TO_PASS``, at
   most :data:`MAX_FAIL_TO_PASS`) while the others pass (``PASS_TO_PASS``, sampled down to
   :data:`MAX_PASS_TO_PASS`);
4. confirm once more that every chosen test passes on the pristine tree and keep only test ids
   that pytest collects under any hash seed (:func:`stable_ids`), write the problem
   statement from the failing tests' names and assertion messages, and assign train/test by
   library file (whole files go to one split, about :data:`TEST_FRACTION` of the tasks to test).

Run: ``nice python -m envgym.environments.swe.builder --out environments/swe/data/tasks.json.gz``
(a few minutes on two cores). The manifest records the builder's time and its per-library counts.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import gzip
import hashlib
import json
import logging
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envgym.environments.swe.libraries import LIBRARIES, Library, by_name, source_files, source_tree
from envgym.environments.swe.mutations import Mutation, apply_edit, enumerate_mutations

__all__ = ["BuildStats", "build", "build_library", "problem_statement", "run_tests"]

logger = logging.getLogger(__name__)

#: The interpreter inside both sandboxes (Debian bookworm's python3 with python3-pytest).
PYTHON = "/usr/bin/python3"
#: Most PASS_TO_PASS tests kept per task (a deterministic sample of the passing tests around the bug).
MAX_PASS_TO_PASS = 30
#: Most FAIL_TO_PASS tests per task: a mutant that breaks more is a broken import, not a bug.
MAX_FAIL_TO_PASS = 60
#: Seconds one test may run before the mutant counts as hanging.
PER_TEST_TIMEOUT = 5.0
#: Share of the tasks that go to the test split (whole files at a time).
TEST_FRACTION = 0.35
#: Test ids the sandboxes' JUnit mapping handles unambiguously.
SAFE_ID = re.compile(r"^[A-Za-z0-9_./-]+\.py(::[A-Za-z_][A-Za-z0-9_]*)+(\[[ -~]*\])?$")

# A pytest plugin loaded into every run (by -p): records each test's outcome and failure message
# to $ENVGYM_PROBE_OUT, stops a test after $ENVGYM_PROBE_TIMEOUT seconds (SIGALRM), and with
# $ENVGYM_PROBE_TRACE set records the library lines each test executes.
_PROBE = r"""
import json, os, signal, sys, threading
_OUT = os.environ["ENVGYM_PROBE_OUT"]
_TIMEOUT = float(os.environ.get("ENVGYM_PROBE_TIMEOUT", "0") or 0)
_TRACE = os.environ.get("ENVGYM_PROBE_TRACE", "")
_results = {}
_cover = {}
_current = set()
_headers = {}

class _Hang(BaseException):
    pass

def _alarm(signum, frame):
    raise _Hang("test exceeded the per-test timeout")

def _local(frame, event, arg):
    if event == "line":
        _current.add((frame.f_code.co_filename, frame.f_lineno))
    return _local

def _global(frame, event, arg):
    code = frame.f_code
    if not code.co_filename.startswith(_TRACE):
        return None
    head = _headers.get(code)
    if head is None:
        first = code.co_firstlineno
        body = [l for _, _, l in code.co_lines() if l is not None and l > first]
        head = _headers[code] = range(first, min(body) if body else first + 1)
    for l in head:
        _current.add((code.co_filename, l))
    return _local

import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _current.clear()
    if _TRACE:
        sys.settrace(_global); threading.settrace(_global)
    if _TIMEOUT:
        signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, _TIMEOUT)
    try:
        yield
    finally:
        if _TIMEOUT:
            signal.setitimer(signal.ITIMER_REAL, 0)
        if _TRACE:
            sys.settrace(None); threading.settrace(None)
            _cover[item.nodeid] = sorted(f"{f}:{l}" for f, l in _current)

def pytest_runtest_logreport(report):
    entry = _results.setdefault(report.nodeid, {"outcome": "passed", "message": ""})
    if report.skipped and report.when in ("setup", "call") and entry["outcome"] == "passed":
        entry["outcome"] = "skipped"
    elif report.failed:
        entry["outcome"] = "failed" if report.when == "call" else "error"
        crash = getattr(report.longrepr, "reprcrash", None)
        msg = getattr(crash, "message", None) or str(report.longrepr).strip().splitlines()[-1:] or [""]
        entry["message"] = msg if isinstance(msg, str) else msg[0]
        if "per-test timeout" in str(report.longrepr):
            entry["outcome"] = "hang"

def pytest_sessionfinish(session, exitstatus):
    with open(_OUT, "w") as fh:
        json.dump({"results": _results, "cover": _cover, "exit": int(exitstatus)}, fh)
"""


@dataclass
class RunResult:
    """What one pytest run reported: outcome and message per test id, plus the coverage map."""

    outcomes: dict[str, str]
    messages: dict[str, str]
    cover: dict[str, list[str]]
    exit_code: int | None
    seconds: float


def run_tests(
    tree: Path,
    lib: Library,
    targets: Sequence[str],
    probe_dir: Path,
    *,
    trace: bool = False,
    per_test_timeout: float = PER_TEST_TIMEOUT,
    timeout: float = 300.0,
) -> RunResult | None:
    """Run ``targets`` (files or test ids) with pytest in ``tree``; ``None`` when the run hangs."""
    out = probe_dir / f"result-{os.getpid()}-{time.monotonic_ns()}.json"
    pythonpath = [str(tree / p) if p else str(tree) for p in lib.pythonpath] + [str(probe_dir)]
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(probe_dir),
        "LANG": "C.UTF-8",
        "PYTHONPATH": os.pathsep.join(pythonpath),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "ENVGYM_PROBE_OUT": str(out),
        "ENVGYM_PROBE_TIMEOUT": "" if trace else str(per_test_timeout),
        "ENVGYM_PROBE_TRACE": str(tree) + "/" if trace else "",
    }
    command = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "_envgym_swe_probe", *targets]
    start = time.monotonic()
    try:
        proc = subprocess.run(
            command,
            cwd=tree,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        out.unlink(missing_ok=True)
        return None
    seconds = time.monotonic() - start
    try:
        data = json.loads(out.read_text())
    except (OSError, ValueError):
        return RunResult({}, {}, {}, proc.returncode, seconds)
    finally:
        out.unlink(missing_ok=True)
    results = data["results"]
    return RunResult(
        {k: v["outcome"] for k, v in results.items()},
        {k: v["message"] for k, v in results.items()},
        data.get("cover", {}),
        proc.returncode,
        seconds,
    )


def stable_ids(tree: Path, lib: Library, probe_dir: Path, seeds: Sequence[int] = (0, 1, 2, 3)) -> set[str]:
    """Test ids that pytest collects under every ``PYTHONHASHSEED`` of ``seeds``.

    Some parametrised ids depend on the order of a set or dict (``test_parse[4-1985-expected13-%Y]``
    numbers its parameters by position): the sandboxes run with a random hash seed, so such an id
    may not exist there. Only ids that every seed collects are kept in a task.
    """
    pythonpath = [str(tree / p) if p else str(tree) for p in lib.pythonpath]
    found: set[str] | None = None
    for seed in seeds:
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(probe_dir),
            "LANG": "C.UTF-8",
            "PYTHONPATH": os.pathsep.join(pythonpath),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": str(seed),
        }
        proc = subprocess.run(
            [PYTHON, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *lib.test_paths],
            cwd=tree, env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        ids = {line.strip() for line in proc.stdout.splitlines() if "::" in line}
        found = ids if found is None else found & ids
    return found or set()


def prune_unstable(tasks: list[dict[str, Any]], stable: set[str]) -> tuple[list[dict[str, Any]], int]:
    """Drop tasks with an unstable FAIL_TO_PASS id; drop unstable ids from PASS_TO_PASS.

    Returns the kept tasks and how many were dropped (a task left without PASS_TO_PASS is dropped).
    """
    kept = []
    for task in tasks:
        if not set(task["FAIL_TO_PASS"]) <= stable:
            continue
        task["PASS_TO_PASS"] = [t for t in task["PASS_TO_PASS"] if t in stable]
        if task["PASS_TO_PASS"]:
            kept.append(task)
    return kept, len(tasks) - len(kept)


def _clip(message: str, limit: int = 240) -> str:
    lines = [ln.rstrip() for ln in message.strip().splitlines() if ln.strip()]
    text = lines[0] if lines else ""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def problem_statement(lib: Library, fail_to_pass: Sequence[str], messages: dict[str, str]) -> str:
    """The issue text shown to the agent: which tests fail and how, never where or why.

    It names the library, the failing tests with their first assertion or error lines, and asks for
    a fix in the library's code. The mutated file, line and mutation are never mentioned.
    """
    shown = list(fail_to_pass)[:6]
    lines = [
        f"Bug report for {lib.name} {lib.version}",
        "",
        (
            f"{len(fail_to_pass)} test{'s' if len(fail_to_pass) != 1 else ''} of the library's own test suite "
            f"{'fail' if len(fail_to_pass) != 1 else 'fails'} on this checkout:"
        ),
        "",
    ]
    for test in shown:
        lines.append(f"  {test}")
        message = _clip(messages.get(test, ""))
        if message:
            lines.append(f"      {message}")
    if len(fail_to_pass) > len(shown):
        lines.append(f"  ... and {len(fail_to_pass) - len(shown)} more")
    lines += [
        "",
        (
            "The rest of the test suite passes. Find the cause in the library's source code and fix it so that "
            "these tests pass without breaking any other test. The test files are restored to their original "
            "content before grading, so changing them does not help."
        ),
    ]
    return "\n".join(lines)


@dataclass
class LibraryStats:
    """Counts of one library's build, for the manifest and the README's figures."""

    files: int = 0
    mutations: int = 0
    covered: int = 0
    tried: int = 0
    kept: int = 0
    hanging: int = 0
    no_failure: int = 0
    too_broad: int = 0
    unconfirmed: int = 0
    unstable: int = 0
    baseline_tests: int = 0
    seconds: float = 0.0


@dataclass
class BuildStats:
    """The whole build: wall time and per-library counts."""

    seconds: float = 0.0
    per_library: dict[str, LibraryStats] = field(default_factory=dict)


def _task_id(lib: Library, m: Mutation) -> str:
    """An opaque, stable id (``toolz-1a2b3c4d``): it names the library, never the file, line or kind."""
    digest = hashlib.sha256(f"{lib.key}:{m.file}:{m.line}:{m.mutated}".encode()).hexdigest()[:8]
    return f"{lib.name}-{digest}"


def build_library(
    lib: Library,
    *,
    target: int = 50,
    max_tries: int = 100,
    seed: int = 0,
    per_test_timeout: float = PER_TEST_TIMEOUT,
    workdir: Path | None = None,
) -> tuple[list[dict[str, Any]], LibraryStats]:
    """Tasks (manifest dicts, split not yet set) for one library, and the build's counts."""
    stats = LibraryStats()
    start = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix=f"envgym-swe-build-{lib.name}-", dir=workdir))
    try:
        tree = scratch / "tree"
        shutil.copytree(source_tree(lib), tree)
        probe = scratch / "probe"
        probe.mkdir()
        (probe / "_envgym_swe_probe.py").write_text(_PROBE)
        baseline = run_tests(tree, lib, lib.test_paths, probe)
        traced = run_tests(tree, lib, lib.test_paths, probe, trace=True)
        if baseline is None or traced is None:
            raise RuntimeError(f"{lib.key}: the pristine test suite hangs")
        passing = {t for t, o in baseline.outcomes.items() if o == "passed" and traced.outcomes.get(t) == "passed"}
        stats.baseline_tests = len(passing)
        # (file, line) -> tests that execute it
        prefix = str(tree) + "/"
        covers: dict[tuple[str, int], set[str]] = {}
        for test, entries in traced.cover.items():
            if test not in passing:
                continue
            for entry in entries:
                path, _, line = entry.rpartition(":")
                covers.setdefault((path.removeprefix(prefix), int(line)), set()).add(test)
        rng = random.Random(f"envgym-swe-builder:{lib.key}:{seed}")
        per_file: dict[str, list[tuple[Mutation, set[str]]]] = {}
        files = source_files(lib, tree)
        stats.files = len(files)
        for rel in files:
            source = (tree / rel).read_bytes().decode("utf-8")
            mutations = enumerate_mutations(rel, source)
            stats.mutations += len(mutations)
            candidates = []
            for m in mutations:
                span = range(m.line, m.line + m.original.count("\n"))
                tests = set().union(*(covers.get((rel, ln), set()) for ln in span))
                if tests:
                    candidates.append((m, tests))
            stats.covered += len(candidates)
            rng.shuffle(candidates)
            if candidates:
                per_file[rel] = candidates
        # round robin over files so every file contributes
        order: list[tuple[Mutation, set[str]]] = []
        while any(per_file.values()):
            for rel in sorted(per_file):
                if per_file[rel]:
                    order.append(per_file[rel].pop())
        tasks: list[dict[str, Any]] = []
        used_lines: set[tuple[str, int]] = set()
        for m, tests in order:
            if len(tasks) >= target or stats.tried >= max_tries:
                break
            if (m.file, m.line) in used_lines:  # one task per line keeps tasks distinct
                continue
            stats.tried += 1
            path = tree / m.file
            original_text = path.read_bytes().decode("utf-8")
            path.write_bytes(apply_edit(original_text, m.line, m.original, m.mutated).encode("utf-8"))
            try:
                # Tests that never execute the mutated lines behave exactly as before: run the ones
                # that do, plus a sample of the others in the same files as PASS_TO_PASS candidates.
                files_run = {t.split("::", 1)[0] for t in tests}
                others = sorted(t for t in passing - tests if t.split("::", 1)[0] in files_run and SAFE_ID.match(t))
                run_ids = sorted(tests) + rng.sample(others, min(MAX_PASS_TO_PASS, len(others)))
                result = run_tests(tree, lib, run_ids, probe, per_test_timeout=per_test_timeout, timeout=120.0)
                if result is None or "hang" in result.outcomes.values():
                    stats.hanging += 1
                    continue
                f2p = sorted(t for t in tests if result.outcomes.get(t) in ("failed", "error"))
                p2p_all = sorted(t for t in run_ids if result.outcomes.get(t) == "passed" and SAFE_ID.match(t))
                if not f2p:
                    stats.no_failure += 1
                    continue
                if len(f2p) > MAX_FAIL_TO_PASS or not all(SAFE_ID.match(t) for t in f2p) or not p2p_all:
                    stats.too_broad += 1
                    continue
                if any(result.outcomes.get(t) not in ("passed", "failed", "error") for t in run_ids):
                    stats.unconfirmed += 1  # a test that vanished or skipped: the run is not trustworthy
                    continue
                p2p = sorted(rng.sample(p2p_all, min(MAX_PASS_TO_PASS, len(p2p_all))))
            finally:
                path.write_bytes(original_text.encode("utf-8"))
            used_lines.add((m.file, m.line))
            tasks.append(
                {
                    "id": _task_id(lib, m),
                    "library": lib.name,
                    "version": lib.version,
                    "file": m.file,
                    "line": m.line,
                    "mutation": m.kind,
                    "original": m.original,
                    "mutated": m.mutated,
                    "function": m.function,
                    "FAIL_TO_PASS": f2p,
                    "PASS_TO_PASS": p2p,
                    "problem_statement": problem_statement(lib, f2p, result.messages),
                }
            )
        # every chosen test passes on the pristine tree when run by id (as grading runs them)
        if tasks:
            ids = sorted({t for task in tasks for t in (*task["FAIL_TO_PASS"], *task["PASS_TO_PASS"])})
            check = run_tests(tree, lib, ids, probe, timeout=600.0)
            bad = {t for t in ids if check is None or check.outcomes.get(t) != "passed"}
            if bad:
                before = len(tasks)
                tasks = [t for t in tasks if not bad & {*t["FAIL_TO_PASS"], *t["PASS_TO_PASS"]}]
                stats.unconfirmed += before - len(tasks)
            tasks, dropped = prune_unstable(tasks, stable_ids(tree, lib, probe))
            stats.unstable += dropped
        stats.kept = len(tasks)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    stats.seconds = round(time.monotonic() - start, 2)
    return tasks, stats


def assign_splits(tasks: list[dict[str, Any]], test_fraction: float = TEST_FRACTION) -> None:
    """Set ``split`` on every task: whole library files go to test until ``test_fraction`` of the tasks is reached.

    Files are visited in the order of a hash of ``library/file`` (deterministic, independent of
    the build order), so the split is disjoint by file by construction.
    """
    counts: dict[str, int] = {}
    for task in tasks:
        key = f"{task['library']}/{task['file']}"
        counts[key] = counts.get(key, 0) + 1
    order = sorted(counts, key=lambda k: hashlib.sha256(f"split:{k}".encode()).hexdigest())
    goal = test_fraction * len(tasks)
    test_files: set[str] = set()
    taken = 0
    for key in order:
        if taken >= goal:
            break
        if taken + counts[key] <= goal * 1.15 or not test_files:
            test_files.add(key)
            taken += counts[key]
    for task in tasks:
        task["split"] = "test" if f"{task['library']}/{task['file']}" in test_files else "train"


def build(
    libraries: Sequence[str] | None = None,
    *,
    target: int = 50,
    max_tries: int = 100,
    jobs: int = 1,
    seed: int = 0,
) -> tuple[list[dict[str, Any]], BuildStats]:
    """Build every library's tasks (``jobs`` libraries at a time) and assign the splits."""
    selected = LIBRARIES if libraries is None else tuple(by_name(n) for n in libraries)
    stats = BuildStats()
    start = time.monotonic()
    results: dict[str, list[dict[str, Any]]] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {
            pool.submit(build_library, lib, target=target, max_tries=max_tries, seed=seed): lib for lib in selected
        }
        for future in concurrent.futures.as_completed(futures):
            lib = futures[future]
            tasks, lib_stats = future.result()
            results[lib.name] = tasks
            stats.per_library[lib.name] = lib_stats
            logger.info(
                "%s: %d tasks from %d tries in %.1f s", lib.key, lib_stats.kept, lib_stats.tried, lib_stats.seconds
            )
    stats.seconds = round(time.monotonic() - start, 2)
    tasks = [t for lib in selected for t in results[lib.name]]
    assign_splits(tasks)
    return tasks, stats


def write_manifest(path: Path, tasks: list[dict[str, Any]], stats: BuildStats, *, seed: int = 0) -> None:
    """Write the gzipped JSON manifest (stable bytes: no timestamps in the gzip header)."""
    payload = {
        "format": 1,
        "libraries": {lib.name: {"version": lib.version, "sha256": lib.sha256} for lib in LIBRARIES},
        "builder": {
            "seed": seed,
            "python": PYTHON,
            "seconds": stats.seconds,
            "per_library": {name: vars(s) for name, s in sorted(stats.per_library.items())},
        },
        "tasks": tasks,
    }
    raw = json.dumps(payload, indent=1, sort_keys=True).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh, gzip.GzipFile(fileobj=fh, mode="wb", mtime=0, filename="") as gz:
        gz.write(raw)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m envgym.environments.swe.builder", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--out", type=Path, required=True, help="where to write the manifest (tasks.json.gz)")
    parser.add_argument("--library", action="append", help="only this library (repeatable)")
    parser.add_argument("--target", type=int, default=50, help="tasks wanted per library")
    parser.add_argument("--max-tries", type=int, default=100, help="mutants tried per library at most")
    parser.add_argument("--jobs", type=int, default=1, help="libraries built in parallel")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    tasks, stats = build(args.library, target=args.target, max_tries=args.max_tries, jobs=args.jobs, seed=args.seed)
    write_manifest(args.out, tasks, stats, seed=args.seed)
    splits = {s: sum(t["split"] == s for t in tasks) for s in ("train", "test")}
    print(json.dumps({"tasks": len(tasks), **splits, "seconds": stats.seconds}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
