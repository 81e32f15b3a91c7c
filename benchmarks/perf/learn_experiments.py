"""What makes the bundled 135M model learn on a CPU? Short training runs that differ in one setting each.

Each experiment trains ``smollm2`` with ``envgym.trainer`` for ``--minutes`` of wall time from
the same start and records its training curve: success and valid-action rates of the first and
last updates' rollouts (train split, sampled at T = 1), the share of turns given the most common
reply (a collapsed policy answers one word everywhere), the share of groups with no reward
variance (no gradient), and seconds per update. The held-out evaluation of the recipe these runs
pick is ``learn.py``'s job; these are the screening runs behind it.

Results go to ``results/learn_experiments.json`` (merged: a run replaces only its own row), and
the table is printed::

    python benchmarks/perf/learn_experiments.py --minutes 10                   # every experiment
    python benchmarks/perf/learn_experiments.py --only local-grpo-shaped grid-grpo --minutes 10
    python benchmarks/perf/learn_experiments.py --table                       # print the recorded table

Figures depend on the machine's load: the JSON records the load average next to each row.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "learn_experiments.json"

SYSTEM = "You are playing a grid game. Reply with a single word: up, down, left or right."
LORA = {"r": 16, "alpha": 32, "dropout": 0.0, "target_modules": "all-linear", "top_layers": 8}
SHAPING = [{"progress_shaping": {"gamma": 1.0, "scale": 1.0}}]
#: The common start: FrozenLake easy, the local view, replies among the admissible actions, GRPO
#: with LoRA on the top 8 layers.
BASE: dict[str, Any] = {
    "env_id": "envgym/FrozenLake-v0",
    "env_kwargs": {"difficulty": "easy", "view": "local"},
    "algo": "grpo",
    "group_size": 8,
    "groups_per_update": 2,
    "lr": 3e-4,
    "max_turns": 6,
    "max_new_tokens": 2,
    "temperature": 1.0,
    "lora": LORA,
    "reward_wrappers": SHAPING,
    "choices": "admissible",
}
#: name -> (what it tests, the settings that differ from BASE).
EXPERIMENTS: dict[str, tuple[str, dict[str, Any]]] = {
    "local-grpo-shaped": ("local view, admissible replies, progress shaping, LoRA top 8, lr 3e-4", {}),
    "local-grpo-free": ("free replies: the format is learned too", {"choices": "free"}),
    "local-gigpo-free": ("free replies, GiGPO step groups", {"choices": "free", "algo": "gigpo"}),
    "local-grpo-sparse": ("no shaping: success reward only", {"reward_wrappers": None}),
    "grid-grpo-shaped": ("the map view instead of the local view", {"env_kwargs": {"difficulty": "easy"}}),
    "local-gigpo-shaped": ("GiGPO step groups instead of GRPO", {"algo": "gigpo"}),
    "local-grpo-lr1e-4": ("a lower learning rate", {"lr": 1e-4}),
    "local-grpo-lr1e-3": ("a higher learning rate", {"lr": 1e-3}),
    "local-grpo-g4": ("groups of 4, 4 groups per update", {"group_size": 4, "groups_per_update": 4}),
    "local-grpo-t07": ("sampling temperature 0.7", {"temperature": 0.7}),
    "local-grpo-entropy": ("an entropy bonus of 0.01", {"entropy_coef": 0.01}),
    "local-grpo-full": ("full fine-tuning (lr 1e-5) instead of LoRA", {"lora": None, "lr": 1e-5}),
    "local-grpo-t2": (
        "sampling temperature 2 (the base model's choice among four words is peaked)",
        {"temperature": 2.0},
    ),
    "local-grpo-horizon-t2": (
        "horizon curriculum 1 -> 3 -> 6 moves, temperature 2",
        {"horizon": [[0, 1], [15, 3], [30, 6]], "temperature": 2.0},
    ),
    "local-grpo-bandit": (
        "one move per episode (a contextual bandit), 16 groups of 4, temperature 2, lr 2e-4",
        {"max_turns": 1, "group_size": 4, "groups_per_update": 16, "temperature": 2.0, "lr": 2e-4},
    ),
    "local-grpo-bandit-t4": (
        "one move per episode, 16 groups of 4, temperature 4, lr 3e-4",
        {"max_turns": 1, "group_size": 4, "groups_per_update": 16, "temperature": 4.0},
    ),
    "local-grpo-bandit-g16": (
        "one move per episode, 4 groups of 16 (fewer groups with one reply), temperature 4, lr 3e-4",
        {"max_turns": 1, "group_size": 16, "groups_per_update": 4, "temperature": 4.0},
    ),
    "local-grpo-bandit-g16-lr1e-4": (
        "one move per episode, 4 groups of 16, temperature 4, lr 1e-4",
        {"max_turns": 1, "group_size": 16, "groups_per_update": 4, "temperature": 4.0, "lr": 1e-4},
    ),
    "local-grpo-bandit-uniform": (
        "one move per episode, 16 groups of 4, temperature 50 (uniform among the four actions), lr 3e-4",
        {"max_turns": 1, "group_size": 4, "groups_per_update": 16, "temperature": 50.0},
    ),
    "local-grpo-bandit-uniform-lr2e-3": (
        "one move per episode, 16 groups of 4, temperature 50, lr 2e-3",
        {"max_turns": 1, "group_size": 4, "groups_per_update": 16, "temperature": 50.0, "lr": 2e-3},
    ),
    "local-grpo-bandit-uniform-lr1e-3": (
        "one move per episode, 16 groups of 4, temperature 50, lr 1e-3",
        {"max_turns": 1, "group_size": 4, "groups_per_update": 16, "temperature": 50.0, "lr": 1e-3},
    ),
    "local-grpo-bandit-t4-lr1e-3": (
        "one move per episode, 16 groups of 4, temperature 4, lr 1e-3",
        {"max_turns": 1, "group_size": 4, "groups_per_update": 16, "temperature": 4.0, "lr": 1e-3},
    ),
    "local-grpo-bandit-uniform-mb8": (
        "one move per episode, 16 groups of 4, temperature 50, 8 optimizer steps per update (minibatches 8)",
        {"max_turns": 1, "group_size": 4, "groups_per_update": 16, "temperature": 50.0, "minibatches": 8},
    ),
    "local-grpo-bandit-t4-mb8": (
        "one move per episode, 16 groups of 4, temperature 4, minibatches 8",
        {"max_turns": 1, "group_size": 4, "groups_per_update": 16, "temperature": 4.0, "minibatches": 8},
    ),
    "local-grpo-t4": ("sampling temperature 4", {"temperature": 4.0}),
    "local-gigpo-t2": (
        "GiGPO step groups, 4 groups of 8, temperature 2, lr 2e-4",
        {"algo": "gigpo", "groups_per_update": 4, "temperature": 2.0, "lr": 2e-4},
    ),
    "local-grpo-horizon": (
        "horizon curriculum: one move per episode, then 3, then 6",
        {"horizon": [[0, 1], [15, 3], [30, 6]]},
    ),
}


def run(name: str, minutes: float, out: Path, seed: int, checkpoint_every: int = 0) -> dict[str, Any]:
    from envgym.rollout.prompting import PromptConfig
    from envgym.trainer import TrainConfig, Trainer

    what, changes = EXPERIMENTS[name]
    settings = {**BASE, **changes}
    config = TrainConfig(
        model="smollm2",
        updates=1000,
        micro_batch_size=16,
        eval_every=0,
        checkpoint_every=checkpoint_every,
        device="cpu",
        dtype="float32",
        seed=seed,
        collapse="warn",
        prompt=PromptConfig(
            system_prompt=SYSTEM, action_tags=(), history="none", show_admissible=False, format_feedback=False
        ),
        out=str(out / name),
        **settings,
    )
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    trainer: Any = None

    def on_update(row: dict[str, Any]) -> None:
        rows.append(row)
        print(
            f"{name} update {row['update']:3d} {(time.perf_counter() - t0) / 60:5.1f} min  "
            f"success {row.get('episode/success_rate', math.nan):.2f}  valid {row.get('episode/valid_action_rate', math.nan):.2f}  "
            f"top {row.get('policy/top_reply_share', math.nan):.2f}  flat {row.get('groups/zero_variance_share', math.nan):.2f}",
            flush=True,
        )
        if time.perf_counter() - t0 >= minutes * 60:
            trainer.request_stop()

    trainer = Trainer(config, on_update=on_update)
    trainer.train()

    def mean(key: str, part: list[dict[str, Any]]) -> float:
        values = [r[key] for r in part if key in r]
        return round(sum(values) / len(values), 3) if values else math.nan

    k = max(1, min(5, len(rows) // 3))
    first, last = rows[:k], rows[-k:]
    return {
        "what": what,
        "changes": changes,
        "minutes": round((time.perf_counter() - t0) / 60, 1),
        "updates": len(rows),
        "window": k,
        "success_first": mean("episode/success_rate", first),
        "success_last": mean("episode/success_rate", last),
        "valid_first": mean("episode/valid_action_rate", first),
        "valid_last": mean("episode/valid_action_rate", last),
        "top_reply_last": mean("policy/top_reply_share", last),
        "flat_groups_last": mean("groups/zero_variance_share", last),
        "s_per_update": round((time.perf_counter() - t0) / max(1, len(rows)), 1),
        "load_avg": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "seed": seed,
    }


def probe(spec: str, states: int = 60) -> dict[str, Any]:
    """How well the greedy policy ``spec`` picks its first move on ``states`` held-out start cells
    (test split, seeds ``0..states-1``), among the four actions: the share of cells where its
    favourite action brings the goal closer (a good move), and the mean probability it puts on the
    good moves. Training rollouts (sampled at a high temperature) hide this; it is what the
    screening runs were judged on."""
    import gymnasium as gym
    import torch

    from envgym.rollout.agent import AgentInput
    from envgym.rollout.prompting import Conversation, PromptConfig
    from envgym.rollout.specs import make_agent

    prompt = PromptConfig(
        system_prompt=SYSTEM, action_tags=(), history="none", show_admissible=False, format_feedback=False
    )
    actions = ["up", "down", "left", "right"]
    agent = make_agent(spec, seed=0, temperature=0.0, max_new_tokens=2, choices="admissible")
    try:
        ids = [agent.tokenizer(a, add_special_tokens=False)["input_ids"][0] for a in actions]
        good_mass, best_good = [], 0
        for seed in range(states):
            good = []
            for action in actions:
                env = gym.make(BASE["env_id"], **BASE["env_kwargs"], split="test")
                env.reset(seed=seed)
                before = env.unwrapped.progress()
                *_, info = env.step(action)
                good.append(info["progress"] > before)
                env.close()
            env = gym.make(BASE["env_id"], **BASE["env_kwargs"], split="test")
            observation, info = env.reset(seed=seed)
            env.close()
            conv = Conversation(prompt, BASE["env_id"], observation, info)
            item = AgentInput(f"probe{seed}", BASE["env_id"], observation, info, 0, tuple(conv.messages()))
            with torch.inference_mode():
                logits = agent.model(input_ids=torch.tensor([agent.prompt_ids(item)])).logits[0, -1, ids].float()
            probs = logits.softmax(-1)
            mask = torch.tensor(good)
            good_mass.append(float(probs[mask].sum()))
            best_good += bool(mask[int(probs.argmax())])
    finally:
        agent.close()
    return {
        "agent": spec,
        "states": states,
        "greedy_good_move_rate": round(best_good / states, 3),
        "mean_prob_on_good_moves": round(sum(good_mass) / states, 3),
    }


def table(results: dict[str, Any]) -> str:
    head = (
        "| experiment | what | updates | success first -> last | valid first -> last | top reply | flat groups "
        "| s/update | held-out first move: greedy good / mass on good |"
    )
    lines = [head, "|" + "---|" * 9]
    for name, r in results.items():
        p = r.get("probe")
        probed = f"{p['greedy_good_move_rate']:.2f} / {p['mean_prob_on_good_moves']:.2f}" if p else "-"
        if "updates" not in r:  # the untrained model's probe
            lines.append(f"| {name} | {r['what']} | 0 | - | - | - | - | - | {probed} |")
            continue
        lines.append(
            f"| {name} | {r['what']} | {r['updates']} | {r['success_first']:.2f} -> {r['success_last']:.2f} | "
            f"{r['valid_first']:.2f} -> {r['valid_last']:.2f} | {r['top_reply_last']:.2f} | {r['flat_groups_last']:.2f} | "
            f"{r['s_per_update']:.0f} | {probed} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", choices=sorted(EXPERIMENTS), help="experiments to run (default: all)")
    parser.add_argument("--minutes", type=float, default=10.0, help="training wall time per experiment")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/learn-experiments"))
    parser.add_argument("--table", action="store_true", help="print the recorded table and exit")
    parser.add_argument("--checkpoint-every", type=int, default=0, help="keep checkpoints to evaluate (0: the last)")
    parser.add_argument(
        "--probe",
        nargs="*",
        metavar="EXPERIMENT",
        help="judge the named experiments' last checkpoints (and the untrained model) on held-out first moves",
    )
    args = parser.parse_args()
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    if args.probe is not None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        probes = {"untrained": probe("hf:smollm2")}
        for name in args.probe:
            checkpoints = sorted((args.out / f"seed{args.seed}" / name / "checkpoints").glob("update-*"))
            if not checkpoints:
                raise SystemExit(f"no checkpoint of {name} under {args.out}: run it first")
            probes[name] = {**probe(f"hf:smollm2+{checkpoints[-1]}"), "checkpoint": checkpoints[-1].name}
        print(json.dumps(probes, indent=2))
        results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
        for name, row in probes.items():
            if name in results:
                results[name]["probe"] = row
        results["untrained"] = {"what": "the bundled model, no training", "probe": probes["untrained"]}
        RESULTS.write_text(json.dumps(results, indent=2) + "\n")
        return 0
    if not args.table:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        for name in args.only or list(EXPERIMENTS):
            out = args.out / f"seed{args.seed}"
            if (out / name).exists():
                import shutil

                shutil.rmtree(out / name)  # a screening run starts from scratch
            row = run(name, args.minutes, out, args.seed, args.checkpoint_every)
            # read again: another process may have recorded its experiment meanwhile
            results = {**(json.loads(RESULTS.read_text()) if RESULTS.exists() else {}), name: row}
            RESULTS.parent.mkdir(exist_ok=True)
            RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
