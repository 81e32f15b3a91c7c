"""PPO on a numeric driving id: Stable-Baselines3's PPO trains on ``envgym/Drive-*-Kinematics-v0``.

Shows that the numeric views are plain Gymnasium envs a standard PPO trains on: the collision
rate and success rate of the deterministic policy on held-out test-split seeds, before training
and after each chunk of ``--steps / --evals`` environment steps (train split). Settings follow
highway-env's own PPO example (MlpPolicy [256, 256], lr 5e-4, gamma 0.8, batch 64, 10 epochs).

Stable-Baselines3 is not an envgym dependency: install it for this script only, e.g.
``pip install stable-baselines3`` (or ``pip install --no-deps --target /tmp/sb3 stable-baselines3``
and ``PYTHONPATH=/tmp/sb3``).

Usage::

    python benchmarks/perf/driving_ppo.py                       # highway, 6,000 steps, 50 eval seeds
    python benchmarks/perf/driving_ppo.py --steps 600 --eval-episodes 5 --json   # smoke size
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import envgym


def evaluate(model: Any, env_id: str, episodes: int, duration: float | None) -> dict[str, float]:
    kwargs: dict[str, Any] = {"split": "test"}
    if duration is not None:
        kwargs["duration"] = duration
    env = envgym.make(env_id, **kwargs)
    collisions = successes = 0
    progress = 0.0
    for seed in range(episodes):
        obs, info = env.reset(seed=seed)
        done = False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, _, terminated, truncated, info = env.step(int(action))
            done = terminated or truncated
        collisions += bool(info["collision"])
        successes += bool(info["success"])
        progress += info["progress"]
    env.close()
    return {
        "collision_rate": collisions / episodes,
        "success_rate": successes / episodes,
        "mean_progress": progress / episodes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--env", default="envgym/Drive-Highway-Kinematics-v0")
    parser.add_argument("--steps", type=int, default=6000, help="training environment steps in all")
    parser.add_argument("--evals", type=int, default=3, help="evaluations after training chunks")
    parser.add_argument("--eval-episodes", type=int, default=50)
    parser.add_argument("--duration", type=float, default=None, help="episode time limit override (s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        import torch
        from stable_baselines3 import PPO
    except ImportError as err:  # not an envgym dependency
        parser.exit(2, f"needs stable-baselines3 and torch: pip install stable-baselines3 ({err})\n")
    torch.set_num_threads(1)
    kwargs: dict[str, Any] = {"split": "train"}
    if args.duration is not None:
        kwargs["duration"] = args.duration
    env = envgym.make(args.env, **kwargs)
    model = PPO(
        "MlpPolicy",
        env,
        policy_kwargs={"net_arch": [256, 256]},
        learning_rate=5e-4,
        n_steps=256,
        batch_size=64,
        n_epochs=10,
        gamma=0.8,
        seed=args.seed,
        verbose=0,
        device="cpu",
    )
    curve = [{"steps": 0, **evaluate(model, args.env, args.eval_episodes, args.duration), "train_s": 0.0}]
    chunk = max(1, args.steps // args.evals)
    spent = 0.0
    for i in range(args.evals):
        t0 = time.perf_counter()
        model.learn(total_timesteps=chunk, reset_num_timesteps=False)
        spent += time.perf_counter() - t0
        curve.append(
            {"steps": (i + 1) * chunk, **evaluate(model, args.env, args.eval_episodes, args.duration), "train_s": spent}
        )
    report = {"env": args.env, "eval_episodes": args.eval_episodes, "curve": curve}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{'steps':>7}{'collision':>11}{'success':>9}{'progress':>10}{'train s':>9}")
    for row in curve:
        print(
            f"{row['steps']:>7}{row['collision_rate']:>11.2f}{row['success_rate']:>9.2f}"
            f"{row['mean_progress']:>10.3f}{row['train_s']:>9.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
