"""Serving envs over the network: what `envgym serve` adds to a step, and what it holds.

Prints (the server always runs in its own process, as a user runs it):

* **round trip**: per env, the time of one ``step`` in-process and through ``envgym.remote``
  against ``envgym serve`` over loopback, on the same seeds and actions: p50/p99 of each and the
  overhead (remote minus in-process, at p50 and p99). Target: p50 overhead < 0.5 ms for text envs.
* **sessions**: ``--sessions`` concurrent WebSocket sessions of a text env (raw protocol frames
  from one asyncio client process), each resetting and stepping for ``--seconds``: steps/s over
  all sessions, p50/p99 step latency, errors; and the server's memory per idle session (its RSS
  with every session open and reset, minus its RSS before, over the count).
* **vs OpenEnv**: the same client load on ``envgym serve`` and on OpenEnv's own server
  (openenv-core's ``create_app`` over the same envgym env logic, :func:`envgym.integrations.openenv.serve_with_openenv`),
  one after the other: steps/s of each and their ratio (goal: envgym >= OpenEnv).
* **disconnects**: ``--disconnects`` sessions of a browser env (and, with ``--docker``, of an SWE
  env on the Docker backend) opened, reset, stepped and dropped without a close message; the
  browser processes and containers counted before and after (goal: none left); and the typed
  error a client gets when the server is killed mid-episode.

Usage::

    python benchmarks/perf/serve.py                          # everything, default sizes
    python benchmarks/perf/serve.py --quick --json           # a smoke run (the test suite's)
    python benchmarks/perf/serve.py --only roundtrip --steps 5000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import platform
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

TEXT_IDS = ("envgym/Wordle-v0", "envgym/Sokoban-v0")
BROWSER_ID = "envgym/MiniWoB-click-button-v0"
SESSION_ID = "envgym/Sokoban-v0"
SOKOBAN_MOVES = ("push up", "push down", "push left", "push right")


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


# ----------------------------------------------------------------------------- the server process
def _serve_child(env_ids: list[str], options: dict[str, Any], conn: Any) -> None:
    from envgym.serve import Server

    server = Server(env_ids, **options).start()
    conn.send(server.url)
    signal.sigwait({signal.SIGTERM})
    server.stop()


@contextmanager
def served(env_ids: Sequence[str], **options: Any) -> Iterator[tuple[str, int]]:
    """``envgym serve`` for ``env_ids`` in a child process: yields (url, pid)."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])  # the child inherits the mask: sigwait works
    try:
        proc = ctx.Process(target=_serve_child, args=(list(env_ids), options, child), daemon=True)
        proc.start()
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])
    try:
        deadline = time.monotonic() + 180
        while not parent.poll(0.2):
            if not proc.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the server for {list(env_ids)} did not start (see its error above)")
        url = parent.recv()
        yield url, proc.pid
    finally:
        if proc.is_alive():
            proc.terminate()
        proc.join(60)
        if proc.is_alive():
            proc.kill()
            proc.join()


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


# ----------------------------------------------------------------------------- actions
def choose(env: Any, info: dict[str, Any], rng: random.Random) -> Any:
    admissible = info.get("admissible_actions")
    if admissible:
        return rng.choice(list(admissible))
    sample = getattr(env.unwrapped, "sample_action", None)
    if callable(sample):
        return sample(rng)
    return env.action_space.sample()


def script(env_id: str, steps: int, seed: int = 0) -> list[tuple[int, list[Any]]]:
    """Episodes as (seed, actions) played in-process, ``steps`` steps in all (the last one cut)."""
    import envgym

    env = envgym.make(env_id)
    rng = random.Random(seed)
    episodes: list[tuple[int, list[Any]]] = []
    total = 0
    while total < steps:
        episode_seed = seed + len(episodes)
        _, info = env.reset(seed=episode_seed)
        actions: list[Any] = []
        done = False
        while not done and total < steps:
            action = choose(env, info, rng)
            _, _, terminated, truncated, info = env.step(action)
            actions.append(action)
            total += 1
            done = terminated or truncated
        episodes.append((episode_seed, actions))
    env.close()
    return episodes


def timed_steps(env: Any, episodes: list[tuple[int, list[Any]]]) -> list[float]:
    times: list[float] = []
    for episode_seed, actions in episodes:
        env.reset(seed=episode_seed)
        for action in actions:
            start = time.perf_counter()
            env.step(action)
            times.append(time.perf_counter() - start)
    return times


def roundtrip(env_ids: Sequence[str], steps: int) -> list[dict[str, Any]]:
    import envgym
    import envgym.remote

    rows = []
    with served(env_ids) as (url, _):
        for env_id in env_ids:
            episodes = script(env_id, steps)
            local = envgym.make(env_id)
            remote = envgym.remote.make(url, env_id)
            try:
                timed_steps(local, episodes[:2])  # warm both
                timed_steps(remote, episodes[:2])
                here = timed_steps(local, episodes)
                there = timed_steps(remote, episodes)
            finally:
                local.close()
                remote.close()
            row = {"id": env_id, "steps": len(here)}
            for name, times in (("inproc", here), ("remote", there)):
                row[f"{name}_p50_ms"] = percentile(times, 50) * 1e3
                row[f"{name}_p99_ms"] = percentile(times, 99) * 1e3
            row["overhead_p50_ms"] = row["remote_p50_ms"] - row["inproc_p50_ms"]
            row["overhead_p99_ms"] = row["remote_p99_ms"] - row["inproc_p99_ms"]
            rows.append(row)
            print(f"  {env_id}: +{row['overhead_p50_ms']:.3f} ms at p50", file=sys.stderr)
    return rows


# ----------------------------------------------------------------------------- concurrent sessions
async def _session(ws_url: str, seconds: float, latencies: list[float], errors: list[str], seed: int) -> int:
    from websockets.asyncio.client import connect

    steps = 0
    rng = random.Random(seed)
    async with connect(ws_url, max_size=2**24, open_timeout=120) as ws:
        await ws.send(json.dumps({"type": "reset", "data": {"seed": seed}}))
        reply = json.loads(await ws.recv())
        if reply.get("type") == "error":
            errors.append(reply["data"].get("code", "?"))
            return 0
        deadline = time.perf_counter() + seconds
        episode = seed
        while time.perf_counter() < deadline:
            frame = json.dumps({"type": "step", "data": {"action": rng.choice(SOKOBAN_MOVES)}})
            start = time.perf_counter()
            await ws.send(frame)
            reply = json.loads(await ws.recv())
            latencies.append(time.perf_counter() - start)
            if reply.get("type") == "error":
                errors.append(reply["data"].get("code", "?"))
                break
            steps += 1
            if reply["data"].get("done"):
                episode += 1000
                await ws.send(json.dumps({"type": "reset", "data": {"seed": episode}}))
                json.loads(await ws.recv())
        await ws.send(json.dumps({"type": "close"}))
    return steps


async def _load(ws_url: str, sessions: int, seconds: float) -> dict[str, Any]:
    latencies: list[float] = []
    errors: list[str] = []
    start = time.perf_counter()
    counts = await asyncio.gather(
        *(_session(ws_url, seconds, latencies, errors, seed) for seed in range(sessions)), return_exceptions=True
    )
    wall = time.perf_counter() - start
    failed = [repr(c) for c in counts if isinstance(c, BaseException)]
    steps = sum(c for c in counts if isinstance(c, int))
    return {
        "sessions": sessions,
        "steps": steps,
        "steps_per_s": steps / wall,
        "p50_ms": percentile(latencies, 50) * 1e3,
        "p99_ms": percentile(latencies, 99) * 1e3,
        "errors": len(errors) + len(failed),
        "error_codes": sorted(set(errors)) + failed[:3],
    }


async def _idle(ws_url: str, sessions: int, pid: int) -> float:
    from websockets.asyncio.client import connect

    before = rss_mb(pid)
    sockets = []
    try:
        for seed in range(sessions):
            ws = await connect(ws_url, open_timeout=120)
            sockets.append(ws)
            await ws.send(json.dumps({"type": "reset", "data": {"seed": seed}}))
            await ws.recv()
        after = rss_mb(pid)
    finally:
        for ws in sockets:
            await ws.close()
    return (after - before) / sessions * 1024  # KiB per session


def sessions_figure(count: int, seconds: float) -> dict[str, Any]:
    with served([SESSION_ID], max_sessions=count + 8) as (url, pid):
        ws_url = url.replace("http://", "ws://") + f"/{SESSION_ID}/ws"
        row = asyncio.run(_load(ws_url, count, seconds))
        row["idle_kib_per_session"] = asyncio.run(_idle(ws_url, count, pid))
        row["id"] = SESSION_ID
    return row


def openenv_figure(count: int, seconds: float) -> dict[str, Any]:
    try:
        from envgym.integrations.openenv import serve_with_openenv
    except ImportError as err:  # the integrations extra
        return {"skipped": f"openenv-core is not installed: {err}"}
    with served([SESSION_ID], max_sessions=count + 8) as (url, _):
        ours = asyncio.run(_load(url.replace("http://", "ws://") + f"/{SESSION_ID}/ws", count, seconds))
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = serve_with_openenv(SESSION_ID, port, max_sessions=count + 8)
    try:
        theirs = asyncio.run(_load(f"ws://127.0.0.1:{port}/ws", count, seconds))
    finally:
        server.stop()
    return {
        "id": SESSION_ID,
        "sessions": count,
        "envgym_steps_per_s": ours["steps_per_s"],
        "openenv_steps_per_s": theirs["steps_per_s"],
        "ratio": ours["steps_per_s"] / theirs["steps_per_s"] if theirs["steps_per_s"] else float("nan"),
        "envgym_p50_ms": ours["p50_ms"],
        "openenv_p50_ms": theirs["p50_ms"],
        "errors": ours["errors"] + theirs["errors"],
    }


# ----------------------------------------------------------------------------- disconnects and kills
def count_containers() -> int | None:
    try:
        out = subprocess.run(["docker", "ps", "-aq"], capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return len(out.split())


def _drop_sessions(ws_url: str, n: int, action: str) -> None:
    import socket

    from websockets.exceptions import WebSocketException
    from websockets.sync.client import connect

    for seed in range(n):
        try:
            with connect(ws_url, open_timeout=120, max_size=2**24) as ws:
                ws.send(json.dumps({"type": "reset", "data": {"seed": seed}}))
                ws.recv(timeout=120)
                ws.send(json.dumps({"type": "step", "data": {"action": action}}))
                ws.recv(timeout=120)
                ws.socket.shutdown(socket.SHUT_RDWR)  # dropped: no close message, no close frame
        except (OSError, WebSocketException):  # closing a socket shut under it
            continue


def descendants(pid: int, name: str) -> set[int]:
    """Live processes under ``pid`` whose command line contains ``name``."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            todo.append(child)
            try:
                with open(f"/proc/{child}/cmdline", "rb") as f:
                    if name.encode() in f.read():
                        found.add(child)
            except OSError:
                pass
    return found


def _settle(count: Any, target: int, seconds: float = 60) -> int:
    deadline = time.monotonic() + seconds
    value = count()
    while value > target and time.monotonic() < deadline:
        time.sleep(0.2)
        value = count()
    return value


def disconnects_figure(n: int, docker: bool) -> dict[str, Any]:
    """Sessions dropped without a close: the server's browser processes before and after ``n``
    drops (each leaked page would keep a renderer), and whether any outlives the server."""
    rows: dict[str, Any] = {}
    with served([BROWSER_ID], max_sessions=8) as (url, pid):
        ws_url = url.replace("http://", "ws://") + f"/{BROWSER_ID}/ws"
        from websockets.sync.client import connect

        # One session stays open through the drops, so the browser stays up: a page a dropped
        # session leaked would keep its renderer process, and the count would grow.
        with connect(ws_url, open_timeout=120, max_size=2**24) as anchor:
            anchor.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
            anchor.recv(timeout=120)
            live = len(descendants(pid, "chromium"))
            start = time.perf_counter()
            _drop_sessions(ws_url, n, "click(1)")
            seconds = time.perf_counter() - start
            seen = descendants(pid, "chromium")
            after_n = _settle(lambda: len(descendants(pid, "chromium")), live)
        after_all = _settle(lambda: len(descendants(pid, "chromium")), 0, 30)
    alive = lambda: sum(os.path.exists(f"/proc/{p}") for p in seen)
    rows["browser"] = {
        "id": BROWSER_ID,
        "disconnects": n,
        "seconds": seconds,
        "chromium_one_session_open": live,
        "chromium_after_n_dropped": after_n,
        "chromium_after_all_closed": after_all,
        "chromium_after_stop": _settle(alive, 0),
    }
    if docker:
        containers_before = count_containers()
        if containers_before is None:
            rows["docker"] = {"skipped": "no Docker engine answers"}
        else:
            swe = "envgym/SWE-v0"
            docker_n = max(1, n // 10)
            with served([swe], max_sessions=4, env_kwargs={swe: {"sandbox": "docker"}}) as (url, _):
                start = time.perf_counter()
                _drop_sessions(url.replace("http://", "ws://") + f"/{swe}/ws", docker_n, "ls")
                seconds = time.perf_counter() - start
                during = count_containers()
            rows["docker"] = {
                "id": swe,
                "disconnects": docker_n,
                "seconds": seconds,
                "containers_before": containers_before,
                "containers_while_serving": during,
                "containers_after": _settle(lambda: count_containers() or 0, containers_before),
            }
    rows["kill"] = kill_figure()
    return rows


def kill_figure() -> dict[str, Any]:
    import envgym.remote

    with served(["envgym/Wordle-v0"]) as (url, pid):
        env = envgym.remote.make(url, "envgym/Wordle-v0", message_timeout_s=30)
        env.reset(seed=0)
        env.step("crane")
        os.kill(pid, signal.SIGKILL)
        try:
            env.step("slate")
        except Exception as err:  # noqa: BLE001 - the point is which type arrives
            return {
                "error": type(err).__name__,
                "code": getattr(err, "code", None),
                "retryable": getattr(err, "retryable", None),
            }
        finally:
            env.close()
    return {"error": None}


# ----------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["roundtrip", "sessions", "openenv", "disconnects"], action="append")
    parser.add_argument("--steps", type=int, default=3000, help="steps per env for the round trip")
    parser.add_argument("--sessions", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds of load per session figure")
    parser.add_argument("--openenv-sessions", type=int, default=16)
    parser.add_argument("--disconnects", type=int, default=100)
    parser.add_argument("--docker", action="store_true", help="also drop sessions of an SWE env on Docker")
    parser.add_argument("--browser", action="store_true", help="add the browser env to the round trip")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.sessions, args.seconds = 200, 8, 0.5
        args.openenv_sessions, args.disconnects = 4, 3
    parts = set(args.only or ["roundtrip", "sessions", "openenv", "disconnects"])
    report: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load": os.getloadavg()[0]},
    }
    if "roundtrip" in parts:
        print("round trip ...", file=sys.stderr)
        ids = list(TEXT_IDS) + ([BROWSER_ID] if args.browser else [])
        report["roundtrip"] = roundtrip(ids, args.steps)
    if "sessions" in parts:
        print(f"{args.sessions} sessions ...", file=sys.stderr)
        report["sessions"] = sessions_figure(args.sessions, args.seconds)
    if "openenv" in parts:
        print("vs OpenEnv ...", file=sys.stderr)
        report["openenv"] = openenv_figure(args.openenv_sessions, args.seconds)
    if "disconnects" in parts:
        print(f"{args.disconnects} disconnects ...", file=sys.stderr)
        report["disconnects"] = disconnects_figure(args.disconnects, args.docker)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    for row in report.get("roundtrip", []):
        print(
            f"{row['id']:<36} in-process p50 {row['inproc_p50_ms']:.3f} ms p99 {row['inproc_p99_ms']:.3f} | "
            f"remote p50 {row['remote_p50_ms']:.3f} p99 {row['remote_p99_ms']:.3f} | "
            f"added p50 {row['overhead_p50_ms']:.3f} ms p99 {row['overhead_p99_ms']:.3f} ms"
        )
    if "sessions" in report:
        s = report["sessions"]
        print(
            f"{s['sessions']} sessions of {s['id']}: {s['steps_per_s']:.0f} steps/s, p50 {s['p50_ms']:.2f} ms, "
            f"p99 {s['p99_ms']:.2f} ms, {s['errors']} errors; {s['idle_kib_per_session']:.0f} KiB per idle session"
        )
    if "openenv" in report:
        o = report["openenv"]
        if "skipped" in o:
            print(f"vs OpenEnv: skipped ({o['skipped']})")
        else:
            print(
                f"vs OpenEnv ({o['sessions']} sessions of {o['id']}): envgym {o['envgym_steps_per_s']:.0f} steps/s, "
                f"OpenEnv {o['openenv_steps_per_s']:.0f} steps/s, ratio {o['ratio']:.2f}"
            )
    if "disconnects" in report:
        d = report["disconnects"]
        b = d["browser"]
        print(
            f"{b['disconnects']} dropped sessions of {b['id']} ({b['seconds']:.1f} s): the server's chromium "
            f"processes with one other session open: {b['chromium_one_session_open']} before, "
            f"{b['chromium_after_n_dropped']} after; {b['chromium_after_all_closed']} once every session closed, "
            f"{b['chromium_after_stop']} alive after the server stopped"
        )
        if "docker" in d:
            print(f"docker: {json.dumps(d['docker'])}")
        print(f"server killed mid-episode: {json.dumps(d['kill'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
