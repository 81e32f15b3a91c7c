"""The learning figure: does RL lift the bundled SmolLM2-135M-Instruct beyond chance on held-out tasks, on this CPU?

For one preset (an environment, its prompt and a training recipe, see ``PRESETS``) the script

1. evaluates the untrained model (``hf:smollm2``, greedy) and the random-valid-action agent
   (``random``) on ``--eval-episodes`` held-out tasks (seeds ``0..N-1`` of the ``test`` split);
2. trains LoRA adapters with the preset's recipe (``envgym.trainer``) on the ``train`` split until
   ``--minutes`` of wall time have passed (the update running then finishes) or its updates are done;
3. evaluates the trained policy the way any user loads it, ``hf:smollm2+<checkpoint>`` (the base
   model with the adapter merged in), on the same tasks, greedy;
4. writes ``results/learn_<preset>.json`` (``eval.before``, ``eval.after``, ``eval.random``, each
   with ``success_rate`` and its Wilson 95 % interval ``success_ci95``, the valid-action rate with an
   episode-level bootstrap interval, the most common replies; the training curve; the recipe) and
   ``results/learn_<preset>.png`` (training return, success and valid-action rate per update, and the
   three evaluations with their intervals);
5. with ``--export``, copies the trained adapter into the package as ``envgym/adapters/<name>/``
   (loadable as the agent spec ``hf:smollm2+<name>``) with an ``envgym-adapter.json`` that records
   the recipe, the figures and the command that reproduces it.

Run (about 40 minutes per preset on an idle 2-core CPU: 30 of training, the rest evaluation)::

    python benchmarks/perf/learn.py --preset frozenlake-local --export
    python benchmarks/perf/learn.py --preset frozenlake-local --minutes 5 --eval-episodes 50   # a quick look

The run folder (``runs/learn-<preset>`` by default) resumes: running again continues training from
its newest checkpoint up to the same wall-time budget counted over the sessions, and reuses the
evaluations already written there.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
ROOT = HERE.parents[1]

#: What the MiniWoB presets share: clicks only (the admissible actions are one click(id) per
#: element of the page's tree), no screenshots (render_mode None: nothing reads them), the prompt.
_MINIWOB_CLICKS: dict[str, Any] = {
    "env_kwargs": {"action_set": "click", "render_mode": None},
    "max_turns": 5,
    "max_new_tokens": 6,
    "system_prompt": "You are using a web page. Reply with one action: click(id) of the element the task asks for.",
    # the task again after the page's tree, right before the reply (it also opens the observation)
    "goal_reminder": True,
}

#: Presets: the task, the prompt and the recipe the experiments (README, "Training") settled on.
PRESETS: dict[str, dict[str, Any]] = {
    "frozenlake-local": {
        "adapter": "frozenlake-local",
        "env_id": "envgym/FrozenLake-v0",
        "env_kwargs": {"difficulty": "easy", "view": "local"},
        "max_turns": 6,
        "max_new_tokens": 2,
        "system_prompt": "You are playing a grid game. Reply with a single word: up, down, left or right.",
        "train": {
            "algo": "grpo",
            # One move per training episode (a contextual bandit over random start cells; the
            # evaluation plays whole episodes of max_turns): 16 start cells x 4 replies per update.
            "horizon": [[0, 1]],
            "group_size": 4,
            "groups_per_update": 16,
            "minibatches": 8,  # 8 optimizer steps per update: on a CPU steps, not samples, were scarce
            "lr": 3e-4,
            "temperature": 4.0,  # the base model's choice among the four words is peaked ("up")
            "lora": {"r": 16, "alpha": 32, "dropout": 0.0, "target_modules": "all-linear", "top_layers": 8},
            "reward_wrappers": [{"progress_shaping": {"gamma": 1.0, "scale": 1.0}}],
            "choices": "admissible",
        },
    },
    "household-pickplace": {
        "adapter": "household-pickplace",
        "env_id": "envgym/Household-PickPlace-v0",
        "env_kwargs": {"difficulty": "easy"},
        # Training episodes start part-way along the privileged shortest plan (0-4 of its steps,
        # never the last): a reverse curriculum whose starts are as often next to the goal as at
        # the beginning. Evaluation episodes start at the beginning, as any agent's do.
        "train_env_kwargs": {"start_steps": [0, 4]},
        # held-out: floor plans and (object, receptacle) pairs that never occur in training
        "eval_split": "valid_unseen",
        "max_turns": 12,
        "max_new_tokens": 16,
        "system_prompt": "You are in a house. Your task is to: {goal}. Reply with one command.",
        "train": {
            # Step-level credit: the turns of a group that saw the same observation are compared by
            # their discounted return from there (the episode return alone smears one good move
            # over twelve).
            "algo": "gigpo",
            "gamma": 0.9,
            "horizon": [[0, 4]],  # 4 moves per training episode (evaluation: max_turns)
            "group_size": 4,
            "groups_per_update": 16,
            "minibatches": 8,
            "lr": 5e-4,
            "temperature": 2.0,
            "lora": {"r": 16, "alpha": 32, "dropout": 0.0, "target_modules": "all-linear", "top_layers": 8},
            "choices": "admissible",
        },
    },
    "miniwob-click-tab": {
        **_MINIWOB_CLICKS,
        "adapter": "miniwob-click-tab",
        "env_id": "envgym/MiniWoB-click-tab-v0",
        # 9 elements; any click ends the episode, +1 on the named tab (MiniWoB's reward; a click on
        # the tab list lands on its middle tab) and -1 elsewhere
        "train": {
            "algo": "grpo",
            # 8 replies per task: the right click (1 of 9) is in most groups; 4 steps of 16 sequences
            "group_size": 8,
            "groups_per_update": 8,
            "minibatches": 4,
            "lr": 1e-3,
            "temperature": 4.0,
            "lora": {"r": 16, "alpha": 32, "dropout": 0.0, "target_modules": "all-linear", "top_layers": 8},
            "choices": "admissible",
        },
    },
    "miniwob-click-link": {
        **_MINIWOB_CLICKS,
        "adapter": "miniwob-click-link",
        "env_id": "envgym/MiniWoB-click-link-v0",
        # a paragraph with a few links (the tree lists only them); a click on any link ends the
        # episode, +1 on the one the task names, -1 on another
        "train": {
            "algo": "grpo",
            "group_size": 8,
            "groups_per_update": 8,
            "minibatches": 4,
            "lr": 5e-4,
            "temperature": 2.0,
            "lora": {"r": 16, "alpha": 32, "dropout": 0.0, "target_modules": "all-linear", "top_layers": 8},
            "choices": "admissible",
        },
    },
    "miniwob-click-option": {
        **_MINIWOB_CLICKS,
        "adapter": "miniwob-click-option",
        "env_id": "envgym/MiniWoB-click-option-v0",
        "env_kwargs": {"action_set": "click_text", "render_mode": None},
        "max_turns": 4,
        # the previous turn stays in the prompt: "I clicked the radio already" is a whole
        # assistant message there, where the latest page alone says it with the one word "checked"
        "history": "last_k",
        "last_k": 1,
        "max_new_tokens": 24,
        "system_prompt": 'You are using a web page. Reply with one action: click("text") of the element to click next.',
        "train": {
            # Step-level credit: turns of a group that saw the same page (the first page of the
            # task; the page with the target checked) are compared by their return from there,
            # so Submit is taught where it pays (after the radio) and not before it.
            "algo": "gigpo",
            "gamma": 0.9,
            # success pays 1, anything else 0: with MiniWoB's -1 for a wrong Submit, never
            # submitting (0) was the safe reply the policy drifted to
            "reward_wrappers": [{"outcome": {"rubric": "outcome_reward"}}],
            "horizon": [[0, 3]],  # 3 clicks per training episode (the radio, Submit, one spare)
            "group_size": 8,
            "groups_per_update": 8,
            "minibatches": 4,
            "lr": 5e-4,
            "temperature": 4.0,  # Submit after the radio is rare at 2 (the model repeats its click)
            "lora": {"r": 16, "alpha": 32, "dropout": 0.0, "target_modules": "all-linear", "top_layers": 8},
            "choices": "admissible",
        },
    },
    "tools-sql-choice": {
        "adapter": "tools-sql-choice",
        "env_id": "envgym/Tools-SQL-Easy-v0",
        # Multiple-choice text-to-SQL: the observation lists 4 candidate queries of the question's
        # database (the gold one, the same template with other values, another template); the
        # admissible replies are their submit calls. Held-out: the test split's (template,
        # schema, database) triples, none of which occurs in training.
        "env_kwargs": {"candidates": 4, "size": "small"},
        "max_turns": 1,
        "max_new_tokens": 64,  # the longest submit call is about 45 tokens
        "system_prompt": "You answer questions about a SQLite database. Reply with one tool call as JSON: "
        "submit the candidate query that answers the question.",
        "train": {
            "algo": "grpo",
            # one submit per episode: a contextual bandit over questions, 8 replies per question
            "group_size": 8,
            "groups_per_update": 8,
            "minibatches": 4,
            "lr": 1e-3,
            # the untrained model already picks the right query about half the time (the screening
            # run): at T = 1 a group of 8 mixes right and wrong picks; at T = 2 training success
            # fell to chance (0.23) and most of the signal with it
            "temperature": 1.0,
            "lora": {"r": 16, "alpha": 32, "dropout": 0.0, "target_modules": "all-linear", "top_layers": 8},
            "choices": "admissible",
        },
    },
    "miniwob-click-button": {
        **_MINIWOB_CLICKS,
        "adapter": "miniwob-click-button",
        "env_id": "envgym/MiniWoB-click-button-v0",
        "train": {
            "algo": "grpo",
            "horizon": [[0, 1]],  # one click per training episode (the evaluation plays max_turns)
            "group_size": 4,
            "groups_per_update": 16,
            "minibatches": 8,
            "lr": 3e-4,
            "temperature": 2.0,
            "lora": {"r": 16, "alpha": 32, "dropout": 0.0, "target_modules": "all-linear", "top_layers": 8},
            "choices": "admissible",
        },
    },
}


def prompt_config(preset: dict[str, Any]) -> Any:
    from envgym.rollout.prompting import PromptConfig

    return PromptConfig(
        system_prompt=preset["system_prompt"],
        action_tags=(),
        history=preset.get("history", "none"),
        last_k=preset.get("last_k", 4),
        show_admissible=False,
        format_feedback=False,
        goal_reminder=preset.get("goal_reminder", False),
    )


def train_config(args: argparse.Namespace, preset: dict[str, Any]) -> Any:
    from envgym.trainer import TrainConfig

    recipe = dict(preset["train"])
    if args.lr is not None:
        recipe["lr"] = args.lr
    return TrainConfig(
        env_id=preset["env_id"],
        env_kwargs={**preset["env_kwargs"], **preset.get("train_env_kwargs", {})},
        model="smollm2",
        updates=args.updates,
        max_turns=preset["max_turns"],
        max_new_tokens=preset["max_new_tokens"],
        micro_batch_size=16,
        eval_every=0,
        checkpoint_every=5,
        device=args.device,
        dtype="float32" if args.device == "cpu" else "bfloat16",
        seed=args.seed,
        prompt=prompt_config(preset),
        out=str(args.out / "train"),
        collapse="warn",
        **recipe,
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


def above(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether ``a``'s success interval lies entirely above ``b``'s."""
    return a["success_ci95"][0] > b["success_ci95"][1]


def evaluate(agent_spec: str, preset: dict[str, Any], *, episodes: int, folder: Path) -> dict[str, Any]:
    """Play ``episodes`` held-out tasks (seeds 0..episodes-1 of the test split), greedy."""
    from envgym.rollout.runner import RunConfig, Runner
    from envgym.rollout.specs import make_agent

    options = (
        {}
        if agent_spec == "random"
        else {"temperature": 0.0, "max_new_tokens": preset["max_new_tokens"], "choices": preset["train"]["choices"]}
    )
    agent = make_agent(agent_spec, seed=0, **options)
    config = RunConfig(
        env_id=preset["env_id"],
        agent=agent_spec,
        agent_options=options,
        episodes=episodes,
        seed=0,
        env_kwargs={**preset["env_kwargs"], "split": preset.get("eval_split", "test")},
        max_turns=preset["max_turns"],
        num_envs=min(episodes, 64),
        prompt=prompt_config(preset),
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
    return {
        "agent": agent_spec,
        "temperature": options.get("temperature"),
        "choices": options.get("choices"),
        "episodes": len(scored),
        "success_rate": wins / len(scored) if scored else math.nan,
        "success_ci95": wilson(wins, len(scored)),
        "valid_action_rate": valid / turns if turns else math.nan,
        "valid_action_ci95": valid_rate_ci(per_episode) if per_episode else [math.nan, math.nan],
        "mean_return": sum(t.total_reward for t in scored) / len(scored) if scored else math.nan,
        "turns": turns,
        "wall_s": round(time.perf_counter() - t0, 1),
        "most_common_replies": sorted(replies.items(), key=lambda kv: -kv[1])[:8],
    }


def train(args: argparse.Namespace, preset: dict[str, Any]) -> dict[str, Any]:
    from envgym.trainer import Trainer
    from envgym.trainer.checkpoint import latest_checkpoint

    config = train_config(args, preset)
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
            f"top reply {row.get('policy/top_reply_share', math.nan):.2f}  "
            f"update {row.get('perf/update_s', math.nan):.0f} s",
            flush=True,
        )
        spent_file.write_text(json.dumps({"seconds": elapsed}))
        if elapsed >= budget:
            trainer.request_stop()

    final_update = None
    if spent < budget:
        trainer = Trainer(config, on_update=on_update)
        final_update = trainer.train().final_update
    seconds = json.loads(spent_file.read_text())["seconds"] if spent_file.exists() else 0.0
    checkpoint = latest_checkpoint(config.out_dir)
    if checkpoint is None:
        raise SystemExit(f"no checkpoint under {config.out_dir}: training did not complete an update")
    if final_update is None:  # the budget was spent in an earlier session: its newest checkpoint
        final_update = int(checkpoint.name.rsplit("-", 1)[-1])
    return {"seconds": round(seconds, 1), "final_update": final_update, "checkpoint": str(checkpoint)}


def curve(args: argparse.Namespace) -> list[dict[str, Any]]:
    from envgym.trainer.metrics import read_metrics

    keys = (
        "episode/return",
        "episode/success_rate",
        "episode/valid_action_rate",
        "policy/top_reply_share",
        "groups/zero_variance_share",
        "perf/rollout_s",
        "perf/update_s",
        "perf/generated_tokens_per_s",
        "perf/tokens_per_s",
    )
    return [
        {"update": r["update"], **{k: r[k] for k in keys if k in r}}
        for r in read_metrics(args.out / "train")
        if "episode/return" in r
    ]


def plot(name: str, summary: dict[str, Any]) -> Path:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    rows = summary["curve"]
    updates = [r["update"] for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    axes[0].plot(updates, [r["episode/return"] for r in rows], marker=".")
    axes[0].set_title("training return (mean per update)")
    axes[1].plot(updates, [r["episode/success_rate"] for r in rows], marker=".", label="success")
    axes[1].plot(updates, [r.get("episode/valid_action_rate", math.nan) for r in rows], marker=".", label="valid")
    axes[1].set_ylim(-0.02, 1.02)
    horizon = summary["train"].get("horizon")
    episodes = f"{horizon[-1][1]}-move episodes" if horizon else f"{summary['task']['max_turns']} turns"
    axes[1].set_title(f"training rollouts (T = {summary['train']['temperature']:g}, {episodes})")
    axes[1].legend()
    for ax in axes[:2]:
        ax.set_xlabel("update")
    labels, values, lows, highs = [], [], [], []
    for phase in ("random", "before", "after"):
        ev = summary["eval"][phase]
        labels.append(phase)
        values.append(ev["success_rate"])
        lows.append(ev["success_rate"] - ev["success_ci95"][0])
        highs.append(ev["success_ci95"][1] - ev["success_rate"])
    axes[2].bar(range(3), values, yerr=[lows, highs], capsize=4, color=["#bbb", "#999", "#37a"])
    axes[2].set_xticks(range(3), labels)
    axes[2].set_ylim(0, 1)
    axes[2].set_title(f"held-out success ({summary['eval_episodes']} tasks, 95 % CI)")
    fig.suptitle(
        f"{summary['task']['env_id']} {summary['task']['env_kwargs']}: SmolLM2-135M + LoRA, "
        f"{summary['train']['algo'].upper()}, {summary['train']['seconds'] / 60:.0f} min of CPU training"
    )
    fig.tight_layout()
    path = RESULTS / f"learn_{name}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def export_adapter(checkpoint: Path, preset: dict[str, Any], summary: dict[str, Any], command: str) -> Path:
    """Copy the checkpoint's adapter into envgym/adapters/<name>/ with its provenance."""
    target = ROOT / "envgym" / "adapters" / preset["adapter"]
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        shutil.copy2(checkpoint / "adapter" / name, target / name)
    config = json.loads((target / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = "smollm2"  # the envgym alias, not this machine's cache path
    (target / "adapter_config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    meta = {
        "base": "smollm2",
        "env_id": preset["env_id"],
        "env_kwargs": preset["env_kwargs"],
        "max_turns": preset["max_turns"],
        "max_new_tokens": preset["max_new_tokens"],
        "system_prompt": preset["system_prompt"],
        # the rest of the prompt it was trained and evaluated with: loading the adapter applies
        # it to every prompt field a run leaves unset (envgym.models.adapter_prompt)
        "prompt": {k: v for k, v in prompt_config(preset).to_dict().items() if k != "system_prompt"},
        "recipe": preset["train"],
        # how an agent loading the adapter replies by default (the way it was trained and evaluated)
        "agent_options": {"choices": preset["train"]["choices"]},
        "trained_s": summary["train"]["seconds"],
        "updates": summary["train"]["final_update"],
        "eval": {
            k: {"success_rate": v["success_rate"], "success_ci95": v["success_ci95"]}
            for k, v in summary["eval"].items()
        },
        "reproduce": command,
    }
    (target / "envgym-adapter.json").write_text(json.dumps(meta, indent=2) + "\n")
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="frozenlake-local")
    parser.add_argument("--minutes", type=float, default=30.0, help="training wall-time budget")
    parser.add_argument("--updates", type=int, default=400, help="most updates")
    parser.add_argument("--eval-episodes", type=int, default=200)
    parser.add_argument("--lr", type=float, default=None, help="override the preset's learning rate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="where to train (cuda: bfloat16); the evaluations run where the hf agent puts them (CUDA when available)",
    )
    parser.add_argument("--out", type=Path, default=None, help="run folder (default runs/learn-<preset>)")
    parser.add_argument("--export", action="store_true", help="copy the trained adapter into envgym/adapters/")
    args = parser.parse_args()
    preset = PRESETS[args.preset]
    args.out = args.out or Path("runs") / f"learn-{args.preset}"
    args.out.mkdir(parents=True, exist_ok=True)
    RESULTS.mkdir(exist_ok=True)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    def evaluated(agent: str, phase: str) -> dict[str, Any]:
        cached = args.out / f"eval-{phase}.json"
        if cached.exists():
            doc = json.loads(cached.read_text())
            wanted = None if agent == "random" else preset["train"]["choices"]
            if doc.get("episodes") == args.eval_episodes and doc.get("agent") == agent and doc.get("choices") == wanted:
                return doc
        shutil.rmtree(args.out / f"eval-{phase}", ignore_errors=True)  # another agent or setting: play anew
        doc = evaluate(agent, preset, episodes=args.eval_episodes, folder=args.out / f"eval-{phase}")
        cached.write_text(json.dumps(doc))
        print(
            f"{phase}: success {doc['success_rate']:.3f} {doc['success_ci95']}  valid {doc['valid_action_rate']:.3f}",
            flush=True,
        )
        return doc

    random_eval = evaluated("random", "random")
    before = evaluated("hf:smollm2", "before")
    trained = train(args, preset)
    after = evaluated(f"hf:smollm2+{trained['checkpoint']}", "after")
    import torch

    import envgym

    config = train_config(args, preset)
    summary = {
        "preset": args.preset,
        "task": {
            "env_id": preset["env_id"],
            "env_kwargs": preset["env_kwargs"],
            "max_turns": preset["max_turns"],
            "max_new_tokens": preset["max_new_tokens"],
            "system_prompt": preset["system_prompt"],
            "history": preset.get("history", "none"),
            "train_split": "train",
            "eval_split": preset.get("eval_split", "test"),
            "eval_seeds": f"0..{args.eval_episodes - 1}",
        },
        "train": {
            **trained,
            "budget_minutes": args.minutes,
            **{
                k: getattr(config, k)
                for k in ("algo", "group_size", "groups_per_update", "lr", "temperature", "minibatches", "choices")
            },
            "horizon": [list(stage) for stage in config.horizon] if config.horizon else None,
            "lora": dict(config.lora or {}),
            "reward_wrappers": preset["train"].get("reward_wrappers"),
        },
        "eval_episodes": args.eval_episodes,
        "eval": {"before": before, "after": after, "random": random_eval},
        "verdict": {
            "after_above_before": above(after, before),
            "after_above_random": above(after, random_eval),
        },
        "curve": curve(args),
        "machine": {
            "cpus": os.cpu_count(),
            "load_avg": os.getloadavg() if hasattr(os, "getloadavg") else None,
            "python": platform.python_version(),
            "torch": torch.__version__,
            "envgym": envgym.__version__,
        },
    }
    out = RESULTS / f"learn_{args.preset}.json"
    out.write_text(json.dumps(summary, indent=2) + "\n")
    path = plot(args.preset, summary)
    print(f"\nwrote {out} and {path}")
    for phase in ("random", "before", "after"):
        ev = summary["eval"][phase]
        print(
            f"{phase:6s} success {ev['success_rate']:.3f} [{ev['success_ci95'][0]:.3f}, {ev['success_ci95'][1]:.3f}]  "
            f"valid {ev['valid_action_rate']:.3f}"
        )
    print(
        f"trained interval above untrained: {summary['verdict']['after_above_before']}, above random: "
        f"{summary['verdict']['after_above_random']}"
    )
    if args.export and not all(summary["verdict"].values()):
        print("not exported: the trained interval is not above both the untrained and the random one")
    elif args.export:
        command = f"python benchmarks/perf/learn.py --preset {args.preset} --minutes {args.minutes:g} --seed {args.seed} --export"
        target = export_adapter(Path(trained["checkpoint"]), preset, summary, command)
        print(f"adapter exported to {target} (agent spec hf:smollm2+{preset['adapter']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
