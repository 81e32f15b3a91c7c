"""Rollouts whose environments live in another process (or on another machine): ``envgym serve``
plays the envs, envgym's harness plays the agent here.

What you write in your own code:

1. on the machine with the envs: ``envgym serve envgym/Sokoban-v0 --port 8000``;
2. here, one env as a ``gymnasium.Env``::

       import envgym.remote
       with envgym.remote.make("ws://HOST:8000", "envgym/Sokoban-v0", size=6) as env:
           obs, info = env.reset(seed=0)
           obs, reward, terminated, truncated, info = env.step(info["admissible_actions"][0])

   (or ``gymnasium.make("envgym/Remote-v0", url="ws://HOST:8000", env_id="envgym/Sokoban-v0")``);
3. or the whole harness: ``envgym run envgym/Sokoban-v0 --agent oracle --backend remote --url
   ws://HOST:8000`` (``envgym bench run`` takes the same flags; ``envgym train`` takes
   ``--rollout-backend remote --rollout-url ws://HOST:8000``).

This script does all three against a server it starts (``envgym serve`` as a subprocess, on a free
port) unless ``--url`` names one, plays the same episodes in process too, and prints a summary as
JSON: returns, success, whether the records match the in-process run, steps per second both ways.

    python examples/remote_rollouts.py --env-id envgym/Sokoban-v0 --agent oracle --episodes 20
    python examples/remote_rollouts.py --url ws://127.0.0.1:8000 --env-id envgym/Wordle-v0
    python examples/remote_rollouts.py --smoke     # 4 oracle episodes of Sokoban, a few seconds
"""

from __future__ import annotations

import argparse
import json
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import envgym.remote
from envgym.rollout import RunConfig, run
from envgym.rollout.records import TIMING_FIELDS, TURN_TIMING_FIELDS, Trajectory

_READY = re.compile(r"health: (\S+)/health")


@contextmanager
def served(env_id: str, *, timeout_s: float = 120.0) -> Iterator[str]:
    """``envgym serve env_id --port 0`` in a subprocess; yields its URL, then stops it (SIGTERM:
    every session is told the server stops and every env is closed)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "envgym", "serve", env_id, "--port", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    found: list[str] = []
    lines: list[str] = []

    def read() -> None:  # the server logs to stderr for as long as it runs: keep the pipe drained
        for line in proc.stderr:  # type: ignore[union-attr]
            lines.append(line)
            match = _READY.search(line)
            if match and not found:
                found.append(match[1])

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout_s
    try:
        while not found:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"envgym serve did not start (exit {proc.poll()}):\n{''.join(lines)}")
            time.sleep(0.05)
        yield found[0]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
        reader.join(5)


def by_hand(url: str, env_id: str, seed: int) -> dict[str, Any]:
    """One episode through :func:`envgym.remote.make`: a seeded random admissible action each turn."""
    rng = random.Random(seed)
    with envgym.remote.make(url, env_id) as env:
        _, info = env.reset(seed=seed)
        total, turns, ended = 0.0, 0, False
        while not ended and turns < 20:
            _, reward, terminated, truncated, info = env.step(rng.choice(info.get("admissible_actions") or [""]))
            total, turns, ended = total + reward, turns + 1, terminated or truncated
        return {"return": total, "turns": turns, "reward_components": info["reward_components"]}


def record(traj: Trajectory) -> dict[str, Any]:
    """A trajectory without its timings: what two runs of the same seeds must share."""
    data = traj.to_dict()
    for key in TIMING_FIELDS:
        data.pop(key)
    data["turns"] = [{k: v for k, v in t.items() if k not in TURN_TIMING_FIELDS} for t in data["turns"]]
    return data


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="A running envgym serve (ws://HOST:PORT); default: start one here.")
    parser.add_argument("--env-id", default="envgym/Sokoban-v0", help="A single-agent id the server serves.")
    parser.add_argument("--agent", default="oracle", help="An agent spec: oracle, random, hf:smollm2, ...")
    parser.add_argument("--episodes", type=int, default=8, help="Episodes to play.")
    parser.add_argument("--num-envs", type=int, default=4, help="Environments played at once.")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the first episode.")
    parser.add_argument("--smoke", action="store_true", help="4 oracle episodes of Sokoban (the suite runs this).")
    args = parser.parse_args(argv)
    if args.smoke:
        args.env_id, args.agent, args.episodes, args.num_envs = "envgym/Sokoban-v0", "oracle", 4, 2
    settings = {
        "env_id": args.env_id,
        "agent": args.agent,
        "episodes": args.episodes,
        "num_envs": args.num_envs,
        "seed": args.seed,
    }

    def play(url: str) -> dict[str, Any]:
        hand = by_hand(url, args.env_id, args.seed)
        remote = run(RunConfig(backend="remote", url=url, **settings))
        local = run(RunConfig(**settings))
        return {
            "env_id": args.env_id,
            "agent": args.agent,
            "url": url,
            "by_hand": hand,
            "episodes": remote.summary["episodes"],
            "mean_return": remote.summary["mean_return"],
            "success_rate": remote.summary["success_rate"],
            "infra_errors": remote.summary["infra_errors"],
            "records_match_inproc": [record(t) for t in remote.trajectories] == [record(t) for t in local.trajectories],
            "steps_per_s": {"remote": remote.summary["steps_per_s"], "inproc": local.summary["steps_per_s"]},
        }

    if args.url:
        summary = play(args.url)
    else:
        with served(args.env_id) as url:
            summary = play(url)
    print(json.dumps(summary, indent=2))
    return summary


if __name__ == "__main__":
    result = main()
    sys.exit(0 if result["records_match_inproc"] and not result["infra_errors"] else 1)
