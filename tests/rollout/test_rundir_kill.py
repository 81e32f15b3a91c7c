"""``kill -9`` at random instants of ``envgym run``, ``envgym bench run`` and ``envgym train``, then
the same command again until it finishes: nothing lost, nothing played twice, and the result
equals an uninterrupted run (each command's episodes and updates are seeded, so it must).

The instants are drawn from a seeded RNG and counted from the moment the process takes its
folder's lock (its startup, the same every time, is not worth killing); together they cover the
folder's first writes (config, meta, suite.yaml, bench.json), the record appends, checkpoints
and the last files. The uninterrupted run goes alongside the interrupted one to save time (``envgym
train``'s last run and uninterrupted one play in the test's process instead, where torch and
transformers are loaded already: importing them is most of what such a process costs).
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from envgym.bench.run import load_bench_run
from envgym.rollout import load_trajectories

ROOT = Path(__file__).resolve().parents[2]
TRAINER_TESTS = ROOT / "tests" / "trainer"

pytestmark = pytest.mark.slow


def _start(command: list[str], log: Path, **env: str) -> subprocess.Popen[bytes]:
    with log.open("ab") as err:
        return subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=err,
            cwd=ROOT,
            env={**os.environ, "OMP_NUM_THREADS": "1", **env},
            start_new_session=True,
        )


def _locked_by(proc: _Forked, folder: Path) -> Callable[[], bool]:
    """Whether ``proc`` holds ``folder``'s lock (its pid is in the lock file)."""
    mark = f'"pid": {proc.pid}'

    def ready() -> bool:
        try:
            return mark in (folder / ".lock").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False

    return ready


def _kill_after(proc: _Forked, ready: Callable[[], bool], delay: float, *, timeout: float = 180) -> str:
    """SIGKILL ``proc`` ``delay`` seconds after ``ready()`` first holds; returns what happened."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None and not ready():
        time.sleep(0.005)
    time.sleep(delay)
    if proc.poll() is not None:
        return f"ended by itself (exit {proc.returncode})"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    return f"killed {delay:.3f} s in"


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "envgym.cli", *args]


#: A Python process that imports envgym's CLI (and more modules) once, then forks one process per
#: command it reads (``[argv, log]``, a JSON line): the command's ``main()`` in a session of its own,
#: stdout to /dev/null and stderr to ``log``, as ``_start`` runs it, without paying the imports
#: again. It prints each child's pid, and its exit status when it ends (one child at a time).
ZYGOTE = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
for module in json.loads(sys.argv[2]):
    __import__(module)
from envgym.cli import main
print("ready", flush=True)
for line in sys.stdin:
    argv, log = json.loads(line)
    pid = os.fork()
    if pid == 0:
        os.setsid()
        null, err = os.open(os.devnull, os.O_RDWR), os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        os.dup2(null, 0), os.dup2(null, 1), os.dup2(err, 2)
        sys.argv = ["envgym", *argv]
        main()
        sys.exit(0)
    print(pid, flush=True)
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
"""


class _Forked:
    """A command forked by a :class:`_Zygote`, with the parts of ``Popen`` that ``_kill_after`` uses."""

    def __init__(self, pid: int, status: Any) -> None:
        self.pid, self.returncode, self._status = pid, None, status

    def poll(self) -> int | None:
        return self.wait(0) if select.select([self._status], [], [], 0)[0] else self.returncode

    def wait(self, timeout: float) -> int:
        if self.returncode is None:
            if not select.select([self._status], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(f"process {self.pid}", timeout)
            self.returncode = int(self._status.readline())
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)


class _Zygote:
    """Starts commands ``envgym *argv`` as :class:`_Forked` processes (see ``ZYGOTE``)."""

    def __init__(self, modules: list[str], **env: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE, str(TRAINER_TESTS), json.dumps(modules)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,  # unbuffered: select() sees every status line not yet read
            cwd=ROOT,
            env={**os.environ, "OMP_NUM_THREADS": "1", **env},
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline() == b"ready\n"

    def start(self, argv: list[str], log: Path) -> _Forked:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps([argv, str(log)]).encode() + b"\n")
        return _Forked(int(self.proc.stdout.readline()), self.proc.stdout)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        finally:
            self.proc.kill()


def _kill_and_resume(
    args: list[str],
    straight_command: list[str],
    log: Path,
    kills: list[tuple[Callable[[_Forked], Callable[[], bool]], float]],
    describe: Callable[[], str],
    **env: str,
) -> list[str]:
    """Run ``straight_command`` alongside ``envgym *args``, killed once per ``kills`` entry
    ``(ready, delay)`` (``delay`` seconds after ``ready(proc)()`` first holds), then finish
    ``envgym *args``; returns what each kill hit (``describe()`` of the folder it left)."""
    straight = _start(straight_command, log.with_name("straight.log"), **env)
    zygote = _Zygote([], **env)
    try:
        events = _kills(zygote, args, log, kills, describe)
        assert zygote.start(args, log).wait(timeout=300) == 0, log.read_text()[-3000:]
        assert straight.wait(timeout=300) == 0, log.with_name("straight.log").read_text()[-3000:]
    finally:
        zygote.close()
        if straight.poll() is None:
            straight.kill()
            straight.wait(timeout=30)
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]
    return events


def _kills(
    zygote: _Zygote,
    args: list[str],
    log: Path,
    kills: list[tuple[Callable[[_Forked], Callable[[], bool]], float]],
    describe: Callable[[], str],
) -> list[str]:
    """Start ``envgym *args`` once per ``kills`` entry ``(ready, delay)`` and SIGKILL it ``delay``
    seconds after ``ready(proc)()`` first holds; returns what each kill hit."""
    events = []
    for ready, delay in kills:
        proc = zygote.start(args, log)
        events.append(f"{_kill_after(proc, ready(proc), delay)}: {describe()}")
    print("\n".join(events))  # what each kill hit, shown with -s / -rP
    return events


def _lines(path: Path) -> int:
    return len(path.read_bytes().splitlines()) if path.exists() else 0


def _names(folder: Path) -> str:
    return " ".join(sorted(p.name for p in folder.iterdir())) if folder.is_dir() else "(no folder)"


def test_envgym_run_killed_at_random_instants_resumes_to_the_same_run(tmp_path: Path) -> None:
    rng = random.Random(6)
    args = ["run", "envgym/FrozenLake-v0", "--agent", "random:4", "-n", "200", "--seed", "11", "--max-turns", "12"]
    out, straight = tmp_path / "killed", tmp_path / "straight"
    locked = partial(_locked_by, folder=out)
    # among the first files (config, meta), then among the records
    kills = [(locked, rng.uniform(0.0, 0.05)), (locked, rng.uniform(0.0, 0.6)), (locked, rng.uniform(0.2, 1.2))]
    events = _kill_and_resume(
        [*args, "--out", str(out)],
        _cli(*args, "--out", str(straight)),
        tmp_path / "killed.log",
        kills,
        lambda: f"{_names(out)}; {_lines(out / 'episodes.jsonl')} records",
    )
    assert any(e.startswith("killed") for e in events), events
    a, b = load_trajectories(out), load_trajectories(straight)
    assert [t.index for t in a] == list(range(200))  # nothing lost
    rows = (out / "episodes.jsonl").read_text(encoding="utf-8").splitlines()
    assert sorted(json.loads(row)["index"] for row in rows) == list(range(200))  # nothing duplicated
    assert [t.comparable() for t in a] == [t.comparable() for t in b]
    assert json.loads((out / "summary.json").read_text())["episodes"] == 200
    sessions = json.loads((out / "meta.json").read_text())["sessions"]
    assert len(sessions) >= 2


SUITE = """\
name: crash
version: 1
defaults: {episodes: 60, seed: 3, max_turns: 12}
metrics: [success_rate, mean_reward, mean_turns]
entries:
  - {name: lake, env: envgym/FrozenLake-v0, kwargs: {difficulty: easy}}
  - {name: boxes, env: envgym/Sokoban-v0, kwargs: {difficulty: easy}, episodes: 40}
"""


def test_envgym_bench_run_killed_at_random_instants_resumes_to_the_same_run(tmp_path: Path) -> None:
    rng = random.Random(7)
    suite = tmp_path / "crash-v1.yaml"
    suite.write_text(SUITE, encoding="utf-8")
    args = ["bench", "run", str(suite), "--agent", "random:2", "--trials", "2", "--no-progress"]
    out, straight = tmp_path / "killed", tmp_path / "straight"
    locked = partial(_locked_by, folder=out)
    # the first kill lands among the folder's first files (suite.yaml, bench.json, the entries' config)
    kills = [(locked, rng.uniform(0.0, 0.03)), (locked, rng.uniform(0.0, 0.8)), (locked, rng.uniform(0.2, 1.5))]
    entries = out / "entries"
    events = _kill_and_resume(
        [*args, "--out", str(out)],
        _cli(*args, "--out", str(straight)),
        tmp_path / "killed.log",
        kills,
        lambda: f"{_names(out)}; records {[_lines(entries / e / 'episodes.jsonl') for e in ('lake', 'boxes')]}",
    )
    assert any(e.startswith("killed") for e in events), events
    a, b = load_bench_run(out), load_bench_run(straight)
    assert a.missing() == {} and a.suite.sha256 == b.suite.sha256
    for name, expected in (("lake", 120), ("boxes", 80)):
        rows = (a.entry_dir(name) / "episodes.jsonl").read_text(encoding="utf-8").splitlines()
        assert sorted(json.loads(row)["index"] for row in rows) == list(range(expected))
        assert [t.comparable() for t in a.trajectories(name)] == [t.comparable() for t in b.trajectories(name)]
    got, want = a.results(), b.results()
    assert got["complete"] and want["complete"]
    keys = ("name", "episodes", "success_rate", "mean_reward", "mean_turns")
    assert [{k: e.get(k) for k in keys} for e in got["entries"]] == [
        {k: e.get(k) for k in keys} for e in want["entries"]
    ]


def _train_args(out: Path) -> list[str]:
    return [
        "train", "--env", "envgymtest/Vowel-v0", "--model", "tiny", "--device", "cpu", "--group-size", "4",
        "--groups", "2", "--max-new-tokens", "1", "--max-turns", "2", "--updates", "4", "--out", str(out),
        "--no-progress", "--set", 'prompt={"system_prompt": "", "action_tags": []}', "--set", "tensorboard=false",
        "--set", "lr=0.01", "--set", "checkpoint_every=1", "--set", "keep_checkpoints=1", "--set", "eval_every=2",
        "--set", "eval_episodes=2",
    ]  # fmt: skip


#: What ``envgym train`` imports before it trains (a few seconds of CPU a process), and the trainer
#: tests' environment (it lives in that tests folder).
TRAIN_MODULES = [
    "torch",
    "transformers",
    "transformers.models.llama.modeling_llama",
    "envgym.models",
    "envgym.trainer.loop",
    "envgym.trainer.policy",
    "test_trainer_envs",
]


def test_envgym_train_killed_at_random_instants_resumes_to_the_same_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from typer.testing import CliRunner

    from envgym.cli import app
    from envgym.trainer.checkpoint import list_checkpoints
    from envgym.trainer.metrics import comparable, read_metrics

    rng = random.Random(8)
    out, straight = tmp_path / "killed", tmp_path / "straight"

    def rows_written(count: int) -> Callable[[_Forked], Callable[[], bool]]:
        # Startup (torch, the model) takes seconds; the instants count from a metrics row instead.
        return lambda proc: lambda: _lines(out / "metrics.jsonl") >= count

    # after the first evaluation, before or during the first checkpoint; then a few updates on
    kills = [(rows_written(1), rng.uniform(0.0, 1.0)), (rows_written(3), rng.uniform(0.0, 1.5))]
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}

    def describe() -> str:
        saved = sorted(p.name for p in (out / "checkpoints").iterdir()) if (out / "checkpoints").is_dir() else []
        return f"{_lines(out / 'metrics.jsonl')} metrics rows; checkpoints {saved}"

    log = tmp_path / "killed.log"
    zygote = _Zygote(TRAIN_MODULES, **env)
    try:
        events = _kills(zygote, _train_args(out), log, kills, describe)
    finally:
        zygote.close()
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]

    # The same command finishes the run, and plays the uninterrupted one, in this process: an
    # envgym train process spends most of its CPU importing torch and transformers, which this
    # one loads once for both (or has already). One thread, as the killed processes had.
    monkeypatch.syspath_prepend(str(TRAINER_TESTS))
    import test_trainer_envs  # noqa: F401  (registers envgymtest/Vowel-v0)

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for folder in (out, straight):
            result = CliRunner().invoke(app, _train_args(folder))
            assert result.exit_code == 0 and "Traceback" not in result.output, result.output[-3000:]
    finally:
        torch.set_num_threads(threads)
    rows = read_metrics(out)
    assert [r["update"] for r in rows] == [0, 1, 2, 3, 4], events  # nothing lost, nothing twice
    assert [comparable(r) for r in rows] == [comparable(r) for r in read_metrics(straight)], events
    assert [u for u, _ in list_checkpoints(out)] == [4]
    assert not list((out / "checkpoints").glob(".*")), "a temporary checkpoint folder was left behind"
    assert (out / "report.md").is_file()
