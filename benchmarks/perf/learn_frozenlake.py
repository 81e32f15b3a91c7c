"""Does GRPO teach the bundled SmolLM2-135M-Instruct something on this CPU within 30 minutes?

Task: ``envgym/FrozenLake-v0`` easy (4x4, 15 % holes, random start and goal, not slippery; the
shortest path is 3 to 7 moves, 5 or fewer on 93 % of the test maps), five turns, the reply is the action (no tags; a reply must be exactly a direction such as
``up`` or ``Right``), at most two tokens per reply, the latest observation only (no history).
The bundled model is a 4-bit (Q4_1) GGUF of SmolLM2-135M-Instruct: it rarely answers with a bare
direction, so the valid-action rate is what it has to learn first, then where to go.

The script

1. evaluates the untrained model on ``--eval-episodes`` held-out (``test`` split) maps, greedy
   and sampled at the training temperature, through the ordinary harness (``hf:smollm2``);
2. trains with GRPO (``envgym.trainer``) until ``--minutes`` of wall time have passed (the update
   running then finishes) or ``--updates`` are done;
3. evaluates the final checkpoint (``hf:<checkpoint>/model``, loaded like any model folder) on the
   same maps the same two ways;
4. writes ``results/learn_frozenlake.json`` (rates with 95 % confidence intervals: Wilson for
   episode success, an episode-level bootstrap for the per-turn valid-action rate) and the
   learning-curve plot ``results/learn_frozenlake.png`` (training return, success and valid-action
   rate per update, and the before/after evaluations).

Run (about 45 minutes on 2 cores: 30 of training, the rest evaluation)::

    python benchmarks/perf/learn_frozenlake.py
    python benchmarks/perf/learn_frozenlake.py --minutes 5 --eval-episodes 32   # a quick look

The run folder (``runs/learn-frozenlake`` by default) resumes: running again continues training
from its newest checkpoint up to the same wall-time budget counted over the sessions.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import random
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"

SYSTEM_PROMPT = "You are playing a grid game. Reply with a single word: up, down, left or right. Do not explain."
ENV_ID = "envgym/FrozenLake-v0"
ENV_KWARGS = {"difficulty": "easy"}
MAX_TURNS = 5
MAX_NEW_TOKENS = 2
TEMPERATURE = 1.0


def prompt_config() -> Any:
    from envgym.rollout.prompting import PromptConfig

    return PromptConfig(
        system_prompt=SYSTEM_PROMPT, action_tags=(), history="none", show_admissible=False, format_feedback=False
    )


def train_config(args: argparse.Namespace) -> Any:
    from envgym.trainer import TrainConfig

    return TrainConfig(
        env_id=ENV_ID,
        env_kwargs=ENV_KWARGS,
        model="smollm2",
        algo="grpo",
        group_size=args.group_size,
        groups_per_update=args.groups,
        updates=args.updates,
        lr=args.lr,
        max_turns=MAX_TURNS,
        temperature=TEMPERATURE,
        max_new_tokens=MAX_NEW_TOKENS,
        micro_batch_size=8,
        eval_every=0,
        checkpoint_every=5,
        device="cpu",
        dtype="float32",
        seed=args.seed,
        prompt=prompt_config(),
        out=str(args.out / "train"),
    )


def wilson(successes: int, n: int, z: float = 1.959964) -> list[float]:
    """Wilson score interval of a binomial proportion."""
    if n == 0:
        return [math.nan, math.nan]
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [max(0.0, centre - half), min(1.0, centre + half)]


def valid_rate_ci(per_episode: list[tuple[int, int]], resamples: int = 4000, seed: int = 0) -> list[float]:
    """Percentile bootstrap over episodes of the pooled valid-turn rate (turns of an episode are
    not independent, episodes are)."""
    rng = random.Random(seed)
    n = len(per_episode)
    stats = []
    for _ in range(resamples):
        pick = [per_episode[rng.randrange(n)] for _ in range(n)]
        turns = sum(t for _, t in pick)
        stats.append(sum(v for v, _ in pick) / turns if turns else 0.0)
    stats.sort()
    return [stats[int(0.025 * resamples)], stats[int(0.975 * resamples) - 1]]


def evaluate(agent_spec: str, *, episodes: int, temperature: float, folder: Path) -> dict[str, Any]:
    """Play ``episodes`` held-out maps (seeds 0..episodes-1 of the test split) with the agent."""
    from envgym.rollout.runner import RunConfig, Runner
    from envgym.rollout.specs import make_agent

    agent = make_agent(agent_spec, seed=0, temperature=temperature, max_new_tokens=MAX_NEW_TOKENS)
    config = RunConfig(
        env_id=ENV_ID,
        agent=agent_spec,
        agent_options={"temperature": temperature, "max_new_tokens": MAX_NEW_TOKENS},
        episodes=episodes,
        seed=0,
        env_kwargs={**ENV_KWARGS, "split": "test"},
        max_turns=MAX_TURNS,
        num_envs=min(episodes, 64),
        prompt=prompt_config(),
    )
    t0 = time.perf_counter()
    try:
        trajectories = Runner(config, agent, out=folder).run().trajectories
    finally:
        agent.close()
    scored = [t for t in trajectories if t.scored]
    wins = sum(bool(t.success) for t in scored)
    per_episode = [(sum(turn.action_valid for turn in t.turns), len(t.turns)) for t in scored]
    turns = sum(n for _, n in per_episode)
    valid = sum(v for v, _ in per_episode)
    replies: dict[str, int] = {}
    for t in scored:
        for turn in t.turns:
            replies[turn.completion] = replies.get(turn.completion, 0) + 1
    common = sorted(replies.items(), key=lambda kv: -kv[1])[:8]
    return {
        "agent": agent_spec,
        "temperature": temperature,
        "episodes": len(scored),
        "success_rate": wins / len(scored) if scored else math.nan,
        "success_ci95": wilson(wins, len(scored)),
        "valid_action_rate": valid / turns if turns else math.nan,
        "valid_action_ci95": valid_rate_ci(per_episode) if per_episode else [math.nan, math.nan],
        "mean_return": sum(t.total_reward for t in scored) / len(scored) if scored else math.nan,
        "turns": turns,
        "wall_s": round(time.perf_counter() - t0, 1),
        "most_common_replies": common,
    }


def train(args: argparse.Namespace) -> dict[str, Any]:
    from envgym.trainer import Trainer
    from envgym.trainer.checkpoint import latest_checkpoint

    config = train_config(args)
    budget = args.minutes * 60.0
    spent_file = args.out / "train_seconds.json"
    spent = json.loads(spent_file.read_text())["seconds"] if spent_file.exists() else 0.0
    start = time.perf_counter()
    trainer: Any = None

    def on_update(row: dict[str, Any]) -> None:
        elapsed = spent + time.perf_counter() - start
        print(
            f"update {row['update']:3d}  {elapsed / 60:5.1f} min  return {row.get('episode/return', math.nan):+.3f}  "
            f"success {row.get('episode/success_rate', math.nan):.2f}  "
            f"valid {row.get('episode/valid_action_rate', math.nan):.2f}  "
            f"update {row.get('perf/update_s', math.nan):.0f} s",
            flush=True,
        )
        spent_file.write_text(json.dumps({"seconds": elapsed}))
        if elapsed >= budget:
            trainer.request_stop()

    if spent < budget:
        trainer = Trainer(config, on_update=on_update)
        result = trainer.train()
        final_update = result.final_update
    else:
        final_update = None
    seconds = json.loads(spent_file.read_text())["seconds"] if spent_file.exists() else 0.0
    checkpoint = latest_checkpoint(config.out_dir)
    return {"seconds": round(seconds, 1), "final_update": final_update, "checkpoint": str(checkpoint)}


def plot(args: argparse.Namespace, summary: dict[str, Any]) -> Path:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    from envgym.trainer.metrics import read_metrics

    rows = [r for r in read_metrics(args.out / "train") if "episode/return" in r]
    updates = [r["update"] for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    axes[0].plot(updates, [r["episode/return"] for r in rows], marker=".")
    axes[0].set_title("training return (mean per update)")
    axes[1].plot(updates, [r["episode/success_rate"] for r in rows], marker=".", label="success")
    axes[1].plot(
        updates, [r.get("episode/valid_action_rate", math.nan) for r in rows], marker=".", label="valid action"
    )
    axes[1].set_ylim(-0.02, 1.02)
    axes[1].set_title("training rollouts (T = 1)")
    axes[1].legend()
    labels, values, lows, highs = [], [], [], []
    for phase in ("before", "after"):
        for mode in ("greedy", "sampled"):
            ev = summary["eval"][phase][mode]
            for key, ci in (("success_rate", "success_ci95"), ("valid_action_rate", "valid_action_ci95")):
                labels.append(f"{phase}\n{mode}\n{'succ' if key == 'success_rate' else 'valid'}")
                values.append(ev[key])
                lows.append(ev[key] - ev[ci][0])
                highs.append(ev[ci][1] - ev[key])
    axes[2].bar(
        range(len(values)), values, yerr=[lows, highs], capsize=3, color=["#999", "#bbb"] * 2 + ["#37a", "#6ad"] * 2
    )
    axes[2].set_xticks(range(len(values)), labels, fontsize=7)
    axes[2].set_ylim(0, 1)
    axes[2].set_title(f"held-out evaluation ({summary['eval_episodes']} maps, 95 % CI)")
    for ax in axes[:2]:
        ax.set_xlabel("update")
    fig.suptitle(
        f"GRPO, SmolLM2-135M-Instruct (Q4_1 GGUF), FrozenLake easy, CPU: {summary['train']['seconds'] / 60:.1f} min of training"
    )
    fig.tight_layout()
    path = RESULTS / "learn_frozenlake.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="training wall-time budget")
    parser.add_argument("--updates", type=int, default=200, help="most updates")
    parser.add_argument("--eval-episodes", type=int, default=128)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--groups", type=int, default=2)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/learn-frozenlake"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    RESULTS.mkdir(exist_ok=True)

    def both(agent: str, phase: str) -> dict[str, Any]:
        out = {}
        for mode, temperature in (("greedy", 0.0), ("sampled", TEMPERATURE)):
            cached = args.out / f"eval-{phase}-{mode}.json"
            if cached.exists():
                out[mode] = json.loads(cached.read_text())
                continue
            out[mode] = evaluate(
                agent, episodes=args.eval_episodes, temperature=temperature, folder=args.out / f"eval-{phase}-{mode}"
            )
            cached.write_text(json.dumps(out[mode]))
            print(f"{phase} {mode}: {json.dumps(out[mode])}", flush=True)
        return out

    before = both("hf:smollm2", "before")
    trained = train(args)
    after = both(f"hf:{Path(trained['checkpoint']) / 'model'}", "after")
    import torch

    import envgym

    summary = {
        "task": {
            "env_id": ENV_ID,
            "env_kwargs": ENV_KWARGS,
            "max_turns": MAX_TURNS,
            "max_new_tokens": MAX_NEW_TOKENS,
            "system_prompt": SYSTEM_PROMPT,
            "train_split": "train",
            "eval_split": "test",
        },
        "train": {
            **trained,
            **{
                k: getattr(train_config(args), k)
                for k in ("algo", "group_size", "groups_per_update", "lr", "temperature")
            },
        },
        "eval_episodes": args.eval_episodes,
        "eval": {"before": before, "after": after},
        "machine": {
            "cpus": __import__("os").cpu_count(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "envgym": envgym.__version__,
        },
    }
    (RESULTS / "learn_frozenlake.json").write_text(json.dumps(summary, indent=2))
    path = plot(args, summary)
    print(f"\nwrote {RESULTS / 'learn_frozenlake.json'} and {path}")
    for phase in ("before", "after"):
        for mode in ("greedy", "sampled"):
            ev = summary["eval"][phase][mode]
            print(
                f"{phase:6s} {mode:7s} success {ev['success_rate']:.3f} [{ev['success_ci95'][0]:.3f}, {ev['success_ci95'][1]:.3f}]  "
                f"valid {ev['valid_action_rate']:.3f} [{ev['valid_action_ci95'][0]:.3f}, {ev['valid_action_ci95'][1]:.3f}]"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
