"""OpenEnv's own client playing envgym environments served by ``envgym serve``.

``envgym serve`` speaks OpenEnv's wire format (docs/serving.md), so OpenEnv's client classes from
``openenv-core`` connect unchanged: ``GenericEnvClient(base_url=...)`` with the base URL of a
served id (``http://HOST:PORT/<id>``; the client appends ``/ws``), actions ``{"action": "<text>"}``,
observations ``{"obs", "info", "terminated", "truncated", ...}`` with OpenEnv's ``reward`` and
``done``. This is the client side of TRL's OpenEnv path: a rollout function that holds one such
client per episode.

Each episode here is played by the env's oracle (envgym's solver, which reads only the
observation and ``info`` that came over the wire) and then replayed in process with the same
actions: the rewards must be the same, step by step.

    envgym serve envgym/Wordle-v0 --port 8000 &
    python examples/openenv_client.py --url http://127.0.0.1:8000 --env-id envgym/Wordle-v0 --seeds 0 1
    python examples/openenv_client.py --smoke   # serves Wordle and Sokoban in this process, one episode each
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from envgym.agents.oracle import load_solver
from openenv.core import GenericEnvClient

import envgym
from envgym.serve import Server
from envgym.serve.codec import decode_info


def play(base_url: str, env_id: str, seed: int, max_turns: int) -> dict[str, Any]:
    """One episode through OpenEnv's client; its actions, rewards and end."""
    policy = load_solver(env_id)(env_id, seed)
    actions: list[str] = []
    rewards: list[float] = []
    with GenericEnvClient(base_url=base_url).sync() as client:
        result = client.reset(seed=seed)
        while not result.done and len(actions) < max_turns:
            observation = result.observation
            action = policy.act(observation["obs"], decode_info(observation["info"]))
            result = client.step({"action": action})
            actions.append(action)
            rewards.append(float(result.reward))
            print(f"  {env_id} seed {seed} turn {len(actions)}: {action!r} -> reward {result.reward:+.3f}", flush=True)
    info = result.observation["info"]
    return {
        "env_id": env_id,
        "seed": seed,
        "actions": actions,
        "rewards": rewards,
        "return": sum(rewards),
        "done": result.done,
        "success": info.get("success"),
        "termination_reason": info.get("termination_reason"),
    }


def replay(episode: dict[str, Any]) -> list[float]:
    """The rewards of the same actions in process."""
    env = envgym.make(episode["env_id"])
    try:
        env.reset(seed=episode["seed"])
        return [float(env.step(action)[1]) for action in episode["actions"]]
    finally:
        env.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="the envgym serve server (http://HOST:PORT)")
    parser.add_argument("--env-id", action="append", help="a served id to play (repeatable)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--max-turns", type=int, default=60)
    parser.add_argument("--smoke", action="store_true", help="serve two ids in this process and play one seed each")
    args = parser.parse_args(argv)
    env_ids = args.env_id or ["envgym/Wordle-v0", "envgym/Sokoban-v0"]
    if not args.smoke and not args.url:
        parser.error("give --url of an envgym serve server, or --smoke")
    started = time.perf_counter()
    server = Server(env_ids).start() if args.smoke else None
    try:
        url = server.url if server is not None else args.url.rstrip("/")
        episodes = [play(f"{url}/{env_id}", env_id, seed, args.max_turns) for env_id in env_ids for seed in args.seeds]
    finally:
        if server is not None:
            server.stop()
    same = True
    for episode in episodes:
        episode["same_as_in_process"] = replay(episode) == episode["rewards"]
        same = same and episode["same_as_in_process"]
        print(json.dumps(episode), flush=True)
    print(f"{len(episodes)} episode(s) in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
