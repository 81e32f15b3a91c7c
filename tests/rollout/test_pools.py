"""Env pools (envgym.rollout.pools): the same transitions on every backend, and failures that
stay contained: an env that raises, a worker killed between or during calls, a worker that hangs.

Real worker processes throughout (forkserver children of this interpreter), and a real local Ray
instance (one for the module, two CPUs) for the Ray tests. The misbehaving env is
``pool_toy_envs.CrashEnv``, registered for this module only.
"""

from __future__ import annotations

import os
import pickle
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import pool_toy_envs as toys

from envgym.errors import ConfigError, EnvgymError, UnknownEnvError
from envgym.rollout.pools import (
    EnvFailure,
    EnvPool,
    InProcessPool,
    ProcessPool,
    ResetRequest,
    StepRequest,
    StepResult,
    make_pool,
)

SUPPORT = Path(__file__).resolve().parents[1] / "support"
ROOT = SUPPORT.parents[1]
CRASH = toys.CRASH_ID


@pytest.fixture(scope="module", autouse=True)
def _toy_registered() -> Iterator[None]:
    toys.register_toy()
    yield
    toys.unregister_toy()


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_dead(pids: list[int], timeout: float = 10.0) -> list[int]:
    """Wait until every pid is gone; return those still alive at the timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [p for p in pids if alive(p)]
        if not left:
            return []
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def ok(result: StepResult | EnvFailure) -> StepResult:
    assert isinstance(result, StepResult), result
    return result


#: The step timeout of the timeout tests: far above what a reset or a short step takes, even on a
#: machine that other jobs keep busy (a 0.5 s limit timed out their resets there), far below the
#: 30 s of the hung step.
STEP_TIMEOUT_S = 2.0


def reset_ok(pool: EnvPool, slots: list[int]) -> list[StepResult]:
    """Reset ``slots`` (seed = slot); a reset that timed out on a very busy machine is tried again
    on the worker that replaced the killed one, at most twice, since the timeout tests are about steps."""
    results: dict[int, StepResult | EnvFailure] = {}
    todo = list(slots)
    for _ in range(3):
        for slot, result in zip(todo, pool.reset([ResetRequest(s, s) for s in todo])):
            results[slot] = result
        todo = [s for s in todo if isinstance(results[s], EnvFailure) and results[s].kind == "timeout"]
        if not todo:
            break
    return [ok(results[s]) for s in slots]


def play(pool: EnvPool, *, steps: int, seed: int = 0) -> list[tuple[Any, ...]]:
    """Lock-step random play on every slot (random admissible actions, ended slots reset with the
    next seed); returns every transition, so two pools can be compared."""
    rng = random.Random(seed)
    next_seed = pool.num_slots
    trace: list[tuple[Any, ...]] = []
    current = [ok(r) for r in pool.reset([ResetRequest(s, s, want_sample=True) for s in range(pool.num_slots)])]
    trace += [("reset", r.observation, r.sampled_action, r.info["task"]["id"]) for r in current]
    for _ in range(steps):
        actions = [rng.choice(r.info["admissible_actions"]) for r in current]
        results = [ok(r) for r in pool.step([StepRequest(s, a, True) for s, a in enumerate(actions)])]
        trace += [(r.observation, r.reward, r.terminated, r.truncated, r.sampled_action) for r in results]
        ended = [s for s, r in enumerate(results) if r.terminated or r.truncated]
        if ended:
            resets = pool.reset([ResetRequest(s, next_seed + i, want_sample=True) for i, s in enumerate(ended)])
            next_seed += len(ended)
            for s, r in zip(ended, resets):
                results[s] = ok(r)
                trace.append(("reset", results[s].observation, results[s].sampled_action))
        current = results
    return trace


# ---------------------------------------------------------------- determinism across backends
@pytest.mark.parametrize("env_id", ["envgym/Sokoban-v0", "envgym/FrozenLake-v0"])
def test_inproc_and_process_pools_give_the_same_transitions(env_id: str) -> None:
    with make_pool(env_id, None, num_slots=5, backend="inproc") as local:
        expected = play(local, steps=40)
    with make_pool(env_id, None, num_slots=5, backend="process", workers=2) as remote:
        assert remote.backend == "process" and len(set(remote.worker_pids())) == 2
        got = play(remote, steps=40)
    assert got == expected
    # The trace is not trivial: several episodes ended and were restarted, actions were sampled.
    assert sum(1 for t in expected if t[0] == "reset") > 5
    assert all(t[2] is not None for t in expected if t[0] == "reset")


def test_results_carry_env_time_and_samples() -> None:
    with make_pool("envgym/FrozenLake-v0", {"max_turns": 3}, num_slots=2, backend="process", workers=2) as pool:
        first = [ok(r) for r in pool.reset([ResetRequest(0, 7, want_sample=True), ResetRequest(1, 8)])]
        assert first[0].reward == 0.0 and not first[0].terminated and not first[0].truncated
        assert first[0].sampled_action in first[0].info["admissible_actions"]
        assert first[1].sampled_action is None  # not asked for
        assert all(0 < r.env_s < 1.0 for r in first)
        for _ in range(3):
            last = ok(pool.step([StepRequest(0, "up", want_sample=True)])[0])
        # max_turns=3 ends the episode (unless a hole or the goal came first): no sample then.
        assert last.terminated or last.truncated
        assert last.sampled_action is None


@pytest.mark.parametrize("backend", ["inproc", "process"])
def test_a_pool_of_several_envs_plays_the_one_each_reset_names(backend: str) -> None:
    kinds = [("envgym/FrozenLake-v0", {"max_turns": 3}), ("envgym/Sokoban-v0", {"size": 6})]
    with make_pool("envgym/FrozenLake-v0", {"max_turns": 3}, num_slots=1) as lake, make_pool(
        "envgym/Sokoban-v0", {"size": 6}, num_slots=1
    ) as boxes:
        alone = {0: ok(lake.reset([ResetRequest(0, 5)])[0]), 1: ok(boxes.reset([ResetRequest(0, 5)])[0])}
        after = {0: ok(lake.step([StepRequest(0, "up")])[0]), 1: ok(boxes.step([StepRequest(0, "up")])[0])}
    with make_pool(kinds, num_slots=2, backend=backend, workers=2) as pool:
        assert pool.envs == [(k, dict(kw)) for k, kw in kinds] and pool.env_id == "envgym/FrozenLake-v0"
        # Slot 0 plays each kind in turn (its env is replaced), slot 1 the second kind.
        for kind in (0, 1, 0):
            got = [ok(r) for r in pool.reset([ResetRequest(0, 5, env=kind), ResetRequest(1, 5, env=1)])]
            assert got[0].observation == alone[kind].observation and got[1].observation == alone[1].observation
            stepped = [ok(r) for r in pool.step([StepRequest(0, "up"), StepRequest(1, "up")])]
            assert stepped[0].observation == after[kind].observation
            assert stepped[1].observation == after[1].observation
        with pytest.raises(ValueError, match=r"ResetRequest.env must index the pool's 2 env\(s\) \(0 to 1\), got 2"):
            pool.reset([ResetRequest(0, 5, env=2)])
    with pytest.raises(ConfigError, match="give env_kwargs inside each"):
        make_pool(kinds, {"size": 6}, num_slots=1)
    with pytest.raises(ConfigError, match=r"each env of a pool must be an \(env_id, env_kwargs\) pair"):
        make_pool(["envgym/Sokoban-v0"], num_slots=1)


# ---------------------------------------------------------------- env errors
@pytest.mark.parametrize("backend", ["inproc", "process"])
def test_env_exception_fails_only_its_request_and_the_slot_recovers(backend: str) -> None:
    with make_pool(CRASH, None, num_slots=3, backend=backend, workers=2) as pool:
        reset = [ok(r) for r in pool.reset([ResetRequest(s, 10 + s) for s in range(3)])]
        results = pool.step([StepRequest(0, "tick"), StepRequest(1, "raise"), StepRequest(2, "tick")])
        failure = results[1]
        assert isinstance(failure, EnvFailure)
        assert (failure.kind, failure.message, failure.worker_lost) == (
            "env_error",
            "ValueError: boom on purpose",
            False,
        )
        assert failure.traceback is not None and "boom on purpose" in failure.traceback
        assert ok(results[0]).observation.endswith("ticks 1") and ok(results[2]).observation.endswith("ticks 1")
        # The failed slot's env was dropped: stepping it without a reset fails, a reset brings it back
        # with the same task as before for the same seed.
        again = pool.step([StepRequest(1, "tick")])[0]
        assert isinstance(again, EnvFailure) and again.kind == "env_error" and "reset" in again.message
        fresh = ok(pool.reset([ResetRequest(1, 11)])[0])
        assert fresh.info["task"] == reset[1].info["task"]
        assert ok(pool.step([StepRequest(1, "tick")])[0]).observation.endswith("ticks 1")
        # A reset that raises fails alone, too.
        results = pool.reset([ResetRequest(0, 1, options={"raise": "no task"}), ResetRequest(2, 2)])
        assert isinstance(results[0], EnvFailure) and results[0].message == "RuntimeError: no task"
        ok(results[1])
        ok(pool.reset([ResetRequest(0, 1)])[0])


def test_unpicklable_info_fails_its_request_only() -> None:
    with make_pool(CRASH, None, num_slots=2, backend="process", workers=1) as pool:
        pool.reset([ResetRequest(0, 0), ResetRequest(1, 1)])
        pid = pool.worker_pids()[0]
        bad, good = pool.step([StepRequest(0, "unpicklable"), StepRequest(1, "tick")])
        assert isinstance(bad, EnvFailure) and not bad.worker_lost
        assert "cannot be sent between processes" in bad.message and "lock" in bad.message
        ok(good)
        assert pool.worker_pids() == [pid]  # the worker lives on


# ---------------------------------------------------------------- dead and hung workers
def test_worker_killed_between_calls_is_replaced() -> None:
    with make_pool(CRASH, None, num_slots=4, backend="process", workers=2) as pool:
        [ok(r) for r in pool.reset([ResetRequest(s, s) for s in range(4)])]
        old = pool.worker_pids()
        os.kill(old[0], signal.SIGKILL)
        assert wait_dead([old[0]]) == []
        results = pool.step([StepRequest(s, "tick") for s in range(4)])
        for s in (0, 2):  # worker 0's slots
            failure = results[s]
            assert isinstance(failure, EnvFailure) and failure.worker_lost and failure.kind == "env_error"
            assert failure.message == f"worker 0 (pid {old[0]}) died: exit code -9 (SIGKILL)"
        for s in (1, 3):  # worker 1's slots stepped as usual
            assert ok(results[s]).observation.endswith("ticks 1")
        new = pool.worker_pids()
        assert new[1] == old[1] and new[0] not in (None, old[0]) and alive(new[0])
        # Later episodes are fine, on the new worker.
        for r in pool.reset([ResetRequest(0, 0), ResetRequest(2, 2)]):
            assert ok(r).info["pid"] == new[0]
        assert ok(pool.step([StepRequest(0, "tick")])[0]).observation.endswith("ticks 1")


def test_spawned_workers_work_and_are_replaced() -> None:
    # The fallback where the platform has no forkserver; slower to start (a fresh interpreter).
    pool = ProcessPool(CRASH, None, num_slots=2, workers=2, start_method="spawn")
    try:
        assert pool.start_method == "spawn"
        [ok(r) for r in pool.reset([ResetRequest(0, 0), ResetRequest(1, 1)])]
        old = pool.worker_pids()
        os.kill(old[1], signal.SIGKILL)
        lost, fine = pool.step([StepRequest(1, "tick"), StepRequest(0, "tick")])
        assert isinstance(lost, EnvFailure) and lost.worker_lost and "SIGKILL" in lost.message
        ok(fine)
        assert ok(pool.reset([ResetRequest(1, 1)])[0]).info["pid"] == pool.worker_pids()[1] != old[1]
    finally:
        pool.close()
    with pytest.raises(ConfigError, match="start_method must be 'forkserver' or 'spawn'.*got 'fork'"):
        ProcessPool(CRASH, None, num_slots=1, start_method="fork")


def test_slots_not_in_the_failing_call_also_lost_their_state() -> None:
    with make_pool(CRASH, None, num_slots=4, backend="process", workers=2) as pool:
        [ok(r) for r in pool.reset([ResetRequest(s, s) for s in range(4)])]
        os.kill(pool.worker_pids()[0], signal.SIGKILL)
        assert pool.step([StepRequest(0, "tick")])[0].worker_lost  # type: ignore[union-attr]
        # Slot 2 lived on worker 0 too but was not in that call: its env state is gone as well.
        lost = pool.step([StepRequest(2, "tick"), StepRequest(3, "tick")])
        assert isinstance(lost[0], EnvFailure) and lost[0].worker_lost and lost[0].kind == "env_error"
        assert "slot 2 lost its env state" in lost[0].message and "worker 0 was replaced" in lost[0].message
        ok(lost[1])
        # A reset clears it.
        ok(pool.reset([ResetRequest(2, 2)])[0])
        assert ok(pool.step([StepRequest(2, "tick")])[0]).observation.endswith("ticks 1")


def test_worker_killed_during_a_call() -> None:
    with make_pool(CRASH, None, num_slots=2, backend="process", workers=2) as pool:
        pool.reset([ResetRequest(0, 0), ResetRequest(1, 1)])
        victim = pool.worker_pids()[0]
        timer = threading.Timer(0.3, os.kill, (victim, signal.SIGKILL))
        timer.start()
        t0 = time.monotonic()
        dead, fine = pool.step([StepRequest(0, "sleep 20"), StepRequest(1, "tick")])
        elapsed = time.monotonic() - t0
        timer.join()
        assert elapsed < 15  # the loss was noticed, not the 20 s step waited out (seconds spare for a busy machine)
        assert isinstance(dead, EnvFailure) and dead.worker_lost and dead.kind == "env_error"
        assert dead.message == f"worker 0 (pid {victim}) died: exit code -9 (SIGKILL)"
        ok(fine)
        assert pool.worker_pids()[0] != victim
        ok(pool.reset([ResetRequest(0, 0)])[0])
        ok(pool.step([StepRequest(0, "tick")])[0])


def test_worker_that_exits_during_a_call() -> None:
    with make_pool(CRASH, None, num_slots=2, backend="process", workers=1) as pool:
        pool.reset([ResetRequest(0, 0), ResetRequest(1, 1)])
        pid = pool.worker_pids()[0]
        results = pool.step([StepRequest(0, "tick"), StepRequest(1, "exit")])
        # One worker holds both slots: both requests of the call fail with it.
        for result in results:
            assert isinstance(result, EnvFailure) and result.worker_lost
            assert result.message == f"worker 0 (pid {pid}) died: exit code 3"
        assert [ok(r).observation.endswith("ticks 0") for r in pool.reset([ResetRequest(0, 0), ResetRequest(1, 1)])]


def test_step_timeout_kills_and_replaces_the_worker() -> None:
    with make_pool(CRASH, None, num_slots=2, backend="process", workers=2, step_timeout_s=STEP_TIMEOUT_S) as pool:
        reset_ok(pool, [0, 1])
        old = pool.worker_pids()
        t0 = time.monotonic()
        hung, fine = pool.step([StepRequest(0, "sleep 30"), StepRequest(1, "sleep 0.1")])
        elapsed = time.monotonic() - t0
        assert STEP_TIMEOUT_S <= elapsed < 15  # the timeout ended it, not the 30 s sleep (a busy machine's seconds spare)
        assert isinstance(hung, EnvFailure) and (hung.kind, hung.worker_lost) == ("timeout", True)
        assert hung.message.startswith(f"worker 0 (pid {old[0]}) did not answer 1 request(s) within {STEP_TIMEOUT_S:g} s")
        ok(fine)  # a slow step under the limit is fine
        assert wait_dead([old[0]]) == []
        new = pool.worker_pids()
        assert new[1] == old[1] and new[0] != old[0]
        reset_ok(pool, [0])
        assert ok(pool.step([StepRequest(0, "tick")])[0]).info["pid"] == new[0]


# ---------------------------------------------------------------- lifecycle and threads
def test_close_twice_stops_workers_and_refuses_calls() -> None:
    pool = make_pool(CRASH, None, num_slots=3, backend="process", workers=3)
    assert isinstance(pool, ProcessPool)
    pool.reset([ResetRequest(0, 0)])
    pids = pool.worker_pids()
    assert len(pids) == 3 and all(pid is not None and alive(pid) for pid in pids)
    pool.close()
    pool.close()
    assert pool.closed and wait_dead([p for p in pids if p is not None], timeout=5) == []
    with pytest.raises(EnvgymError, match="is closed"):
        pool.step([StepRequest(0, "tick")])
    inproc = make_pool(CRASH, None, num_slots=1)
    inproc.reset([ResetRequest(0, 0)])
    env = inproc.slot_env(0)
    assert env is not None and env.unwrapped.secret > 0
    inproc.close()
    inproc.close()
    with pytest.raises(EnvgymError, match="is closed"):
        inproc.reset([ResetRequest(0, 0)])


@pytest.mark.parametrize("backend", ["inproc", "process"])
def test_threads_on_different_slots(backend: str) -> None:
    slots, turns = 4, 25

    def episode(pool: EnvPool, slot: int) -> list[str]:
        seen = [ok(pool.reset([ResetRequest(slot, 100 + slot)])[0]).observation]
        for _ in range(turns):
            seen.append(ok(pool.step([StepRequest(slot, "tick")])[0]).observation)
        return seen

    with make_pool(CRASH, None, num_slots=slots, backend=backend, workers=2) as pool, ThreadPoolExecutor(slots) as ex:
        futures = [ex.submit(episode, pool, s) for s in range(slots)]
        got = [f.result(timeout=60) for f in futures]
    with make_pool(CRASH, None, num_slots=slots) as reference:
        expected = [episode(reference, s) for s in range(slots)]
    assert got == expected
    assert got[0][-1].endswith(f"ticks {turns}")


def test_inproc_pool_slot_env_and_remote_none() -> None:
    with make_pool("envgym/Sokoban-v0", {"size": 6}, num_slots=2) as pool:
        assert isinstance(pool, InProcessPool) and pool.backend == "inproc" and pool.worker_pids() == []
        assert pool.slot_env(1) is None  # built on first use
        first = ok(pool.reset([ResetRequest(1, 3)])[0])
        env = pool.slot_env(1)
        assert env is not None and env.unwrapped.sample_action(random.Random(0)) in first.info["admissible_actions"]
        with pytest.raises(ValueError, match="slot must be an integer from 0 to 1"):
            pool.slot_env(2)
    with make_pool("envgym/Sokoban-v0", None, num_slots=1, backend="process") as remote:
        assert remote.slot_env(0) is None


# ---------------------------------------------------------------- bad input
def test_make_pool_validates_its_arguments() -> None:
    with pytest.raises(
        ConfigError,
        match=r"backend must be one of 'inproc', 'process', 'ray', 'remote', got 'proces'\. "
        r"Did you mean 'process'\?",
    ):
        make_pool(CRASH, None, num_slots=1, backend="proces")
    with pytest.raises(ConfigError, match="workers must be an integer >= 1, got 0"):
        make_pool(CRASH, None, num_slots=1, backend="process", workers=0)
    with pytest.raises(ConfigError, match="num_slots must be an integer >= 1, got 0"):
        make_pool(CRASH, None, num_slots=0)
    with pytest.raises(ConfigError, match="step_timeout_s must be a positive number"):
        make_pool(CRASH, None, num_slots=1, backend="process", step_timeout_s=0)
    with pytest.raises(UnknownEnvError, match="Did you mean 'envgym/Sokoban-v0'"):
        make_pool("envgym/Sokoban-v1x", None, num_slots=1)
    from envgym import registration

    registration.register(registration.EnvSpec(id="pooltoy/Duo-v0", entry_point="x:Y", family="test", kind="aec"))
    try:
        with pytest.raises(ConfigError, match="single-agent environments, got the aec environment 'pooltoy/Duo-v0'"):
            make_pool("pooltoy/Duo-v0", None, num_slots=1)
    finally:
        registration._multi.pop("pooltoy/Duo-v0", None)
    with pytest.raises(ConfigError, match="env_kwargs must be picklable.*module level"):
        make_pool(CRASH, {"reward": lambda components, context: 1.0}, num_slots=1, backend="process")
    # In-process pools take anything, and ignore workers.
    with make_pool(CRASH, {"reward": lambda components, context: 2.0}, num_slots=1, workers=7) as pool:
        pool.reset([ResetRequest(0, 0)])
        assert ok(pool.step([StepRequest(0, "tick")])[0]).reward == 2.0


@pytest.mark.parametrize("backend", ["inproc", "process"])
def test_programming_errors_raise(backend: str) -> None:
    with make_pool(CRASH, None, num_slots=2, backend=backend) as pool:
        with pytest.raises(ValueError, match="slot must be an integer from 0 to 1.*got 2"):
            pool.reset([ResetRequest(2, 0)])
        with pytest.raises(ValueError, match=r"distinct slots, got slots \[0, 1, 0\] \(repeated: \[0\]\)"):
            pool.step([StepRequest(0, "tick"), StepRequest(1, "tick"), StepRequest(0, "tick")])
        with pytest.raises(ValueError, match="expected StepRequest objects"):
            pool.step([ResetRequest(0, 0)])  # type: ignore[list-item]
        assert pool.reset([]) == [] and pool.step([]) == []
        ok(pool.reset([ResetRequest(0, 0)])[0])  # still usable


def test_records_pickle() -> None:
    items = [
        ResetRequest(1, 2, {"a": 1}, True),
        StepRequest(0, "up"),
        StepResult("obs", 1.0, True, False, {"x": [1]}, 0.1, "down"),
        EnvFailure("timeout", "slow", True),
    ]
    assert [pickle.loads(pickle.dumps(item)) for item in items] == items


# ---------------------------------------------------------------- Ctrl-C and a dying parent
_PARENT = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {tests!r})
    import pool_toy_envs
    from envgym.rollout.pools import ResetRequest, StepRequest, make_pool

    if __name__ == "__main__":
        pool_toy_envs.register_toy()
        pool = make_pool(pool_toy_envs.CRASH_ID, None, num_slots=2, backend="process", workers=2)
        pool.reset([ResetRequest(0, 0), ResetRequest(1, 1)])
        print(*pool.worker_pids(), flush=True)
        pool.step([StepRequest(0, "sleep 60"), StepRequest(1, "sleep 60")])
    """
)


def _start_parent(tmp_path: Path) -> tuple[subprocess.Popen[str], list[int]]:
    script = tmp_path / "parent.py"
    script.write_text(_PARENT.format(tests=str(SUPPORT)))
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    pids = [int(p) for p in line.split()]
    assert len(pids) == 2, (line, proc.stderr.read() if proc.poll() is not None else "")  # type: ignore[union-attr]
    time.sleep(0.3)  # the workers are inside their 60 s step now
    return proc, pids


def test_ctrl_c_leaves_no_workers_and_no_worker_tracebacks(tmp_path: Path) -> None:
    proc, pids = _start_parent(tmp_path)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal does on Ctrl-C: the whole group
    _, stderr = proc.communicate(timeout=20)
    assert proc.returncode != 0
    # One traceback, the parent's KeyboardInterrupt; the workers ignored SIGINT silently.
    assert stderr.count("Traceback") == 1 and stderr.rstrip().endswith("KeyboardInterrupt"), stderr
    assert wait_dead(pids) == []


def test_workers_exit_when_the_parent_dies(tmp_path: Path) -> None:
    proc, pids = _start_parent(tmp_path)
    os.kill(proc.pid, signal.SIGKILL)  # no cleanup at all in the parent
    proc.communicate(timeout=20)
    # The workers are inside a 60 s step, so they cannot see their pipe close: their parent
    # watch notices the parent's death within a second.
    assert wait_dead(pids, timeout=10) == []


# ---------------------------------------------------------------- Ray
def test_ray_missing_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    from envgym.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(MissingDependencyError, match=r"pip install 'envgym\[ray\]'"):
        make_pool(CRASH, None, num_slots=1, backend="ray")


@pytest.mark.slow
def test_ray_pool_gives_the_same_transitions(ray_instance: Any) -> None:
    with make_pool("envgym/FrozenLake-v0", None, num_slots=4, backend="inproc") as local:
        expected = play(local, steps=25)
    pool = make_pool("envgym/FrozenLake-v0", None, num_slots=4, backend="ray", workers=2)
    try:
        assert pool.backend == "ray" and pool.slot_env(0) is None
        got = play(pool, steps=25)
        pids = pool.worker_pids()
        assert len(set(pids)) == 2 and os.getpid() not in pids
    finally:
        pool.close()
        pool.close()
    assert got == expected
    assert ray_instance.is_initialized()  # a Ray the pool did not start is left running


def _wait_until_dead(ray: Any, actor: Any, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get(actor.pid.remote(), timeout=timeout_s)
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.05)
    raise AssertionError("the killed Ray actor still answers")


@pytest.mark.slow
def test_ray_actor_death_and_timeout(ray_instance: Any) -> None:
    with make_pool(CRASH, None, num_slots=4, backend="ray", workers=2, step_timeout_s=STEP_TIMEOUT_S) as pool:
        reset_ok(pool, [0, 1, 2, 3])
        old = pool.worker_pids()
        error = pool.step([StepRequest(1, "raise")])[0]
        assert (
            isinstance(error, EnvFailure) and error.message == "ValueError: boom on purpose" and not error.worker_lost
        )
        # Kill actor 0 between calls: its slot in the call fails, the other actor's slots step.
        victim = pool.actors()[0]
        ray_instance.kill(victim)
        _wait_until_dead(ray_instance, victim)  # ray.kill returns before the actor is gone
        results = pool.step([StepRequest(0, "tick"), StepRequest(3, "tick")])
        assert isinstance(results[0], EnvFailure) and results[0].worker_lost and results[0].kind == "env_error"
        assert results[0].message.startswith(f"worker 0 (Ray actor, pid {old[0]}) died: ")
        assert ok(results[1]).observation.endswith("ticks 1")
        # Slot 2 (actor 0, not in that call) lost its state too; a reset brings both back.
        lost = pool.step([StepRequest(2, "tick")])[0]
        assert isinstance(lost, EnvFailure) and lost.worker_lost and "slot 2 lost its env state" in lost.message
        fresh = reset_ok(pool, [0, 2])
        new = pool.worker_pids()
        assert new[0] not in (None, old[0]) and fresh[0].info["pid"] == new[0]
        # A hung step: the actor is killed after the timeout and replaced.
        t0 = time.monotonic()
        hung = pool.step([StepRequest(0, "sleep 30")])[0]
        assert time.monotonic() - t0 < 15  # the timeout, not the 30 s sleep (a busy machine's seconds spare)
        assert isinstance(hung, EnvFailure) and (hung.kind, hung.worker_lost) == ("timeout", True)
        reset_ok(pool, [0])
        assert ok(pool.step([StepRequest(0, "tick")])[0]).observation.endswith("ticks 1")
