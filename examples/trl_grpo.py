"""Train a model with TRL's GRPOTrainer on an envgym environment: multi-turn, one tool call per action.

TRL runs the whole loop; envgym supplies the environment (``environment_factory``), the rows
(``dataset``) and the reward (``get_reward``: the env's rubric, plus one logged function per
reward component). What this script adds is a short *format warm-up*: a few supervised steps
that show the model the tool-call format (``<tool_call>{"name": "act", ...}</tool_call>``) on
the first turn of some training rows, since a small model (and any random one) does not emit
that format by itself and GRPO has nothing to learn from rollouts with no action in them.

    python examples/trl_grpo.py --smoke
        the tiny random test model, 2 GRPO steps on FrozenLake (under 2 minutes on a CPU); its
        warm-up teaches a valid and an invalid action, so rewards differ within each group
    python examples/trl_grpo.py
        the bundled SmolLM2-135M-Instruct with TRL's Qwen3 tool template, 200 GRPO steps on
        FrozenLake (8 rollouts per step, groups of 4), warm-up on random valid actions
    envgym serve envgym/FrozenLake-v0 --port 8000 &
    python examples/trl_grpo.py --url ws://127.0.0.1:8000
        the same, with the envs in the server (on this machine or another)

It prints one JSON summary on stdout: the steps, the envgym steps taken, the rewards TRL logged
per step, and the mean return of the episodes envgym recorded.
Install: ``pip install 'envgym[integrations]'``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Any

import envgym
from envgym import models
from envgym.integrations import trl as envgym_trl

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is marked experimental


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """What one run trains (``--smoke`` swaps in the small one)."""

    env_id: str = "envgym/FrozenLake-v0"
    """The envgym single-agent text id."""
    max_turns: int = 8
    """The env's turn limit (an env kwarg)."""
    model: str = "smollm2"
    """An envgym model spec (``envgym.models.load_causal_lm``), or ``tiny`` (the random test model)."""
    seeds: int = 256
    """Training rows: seeds ``0 .. seeds-1`` of the train split."""
    steps: int = 200
    """GRPO optimizer steps."""
    batch_size: int = 8
    """Rollouts per step."""
    num_generations: int = 4
    """Rollouts per row (a GRPO group)."""
    max_completion_length: int = 512
    """Tokens per rollout, tool results included."""
    max_tool_calls: int = 8
    """Tool-call rounds per rollout (TRL's max_tool_calling_iterations)."""
    learning_rate: float = 1e-5
    """GRPO's learning rate."""
    warmup_steps: int = 30
    """Format warm-up steps (0: none)."""
    warmup_rows: int = 8
    """Rows the warm-up shows the tool-call format on."""
    warmup_actions: tuple[str, ...] = ()
    """The warm-up's actions (empty: random valid actions of each row)."""
    warmup_lr: float = 1e-4
    """The warm-up's learning rate."""
    output_dir: str = "runs/trl-grpo"
    """Where TRL writes its run (checkpoints, logs)."""


SMOKE = Recipe(
    max_turns=3,
    model="tiny",
    seeds=2,
    steps=2,
    batch_size=4,
    num_generations=2,
    max_completion_length=96,
    max_tool_calls=1,
    learning_rate=1e-3,
    warmup_steps=25,
    warmup_rows=2,
    warmup_actions=("up", "jump"),
    warmup_lr=2e-2,
    output_dir="",
)


#: What envgym's reward functions log per step besides the rewards (envgym.integrations.trl).
EPISODE_METRICS = ("episode/unscored", "episode/success_rate", "episode/turns", "episode/finished")


def tool_call(action: str) -> str:
    """The assistant text of one ``act`` call in the Qwen3 template's format."""
    return '<tool_call>\n{"name": "act", "arguments": ' + json.dumps({"action": action}) + "}\n</tool_call>"


def teach_tool_calls(
    model: Any,
    tokenizer: Any,
    factory: envgym_trl.EnvironmentFactory,
    rows: list[dict[str, Any]],
    *,
    actions: tuple[str, ...] = (),
    steps: int,
    lr: float,
    seed: int = 0,
) -> float:
    """A few supervised steps on the first turn of ``rows``: the prompt as TRL renders it, then a
    tool call. Each row is shown with every action of ``actions`` (or, when empty, with a random
    valid action of its env). Returns the last step's mean loss."""
    import torch
    from trl.chat_template_utils import get_training_chat_template, is_chat_template_prefix_preserving

    template = None if is_chat_template_prefix_preserving(tokenizer) else get_training_chat_template(tokenizer)
    env = factory()
    rng = random.Random(seed)
    examples = []
    for row in rows:
        first = env.reset(**row)
        messages = [{"role": "user", "content": row["prompt"][-1]["content"] + first}]
        prompt = tokenizer.apply_chat_template(
            messages, tools=[env.act], chat_template=template, add_generation_prompt=True, tokenize=False
        )
        if actions:
            chosen = list(actions)
        else:
            # A valid action of the row's first state (envgym's own sampler: a listed action, or
            # a plausible one where the action set is open, such as Wordle's words).
            probe = envgym.make(row["env_id"], max_turns=1, split=row["split"])
            probe.reset(seed=row["seed"])
            chosen = [probe.unwrapped.sample_action(rng)]
            probe.close()
        prompt_ids = tokenizer(prompt, add_special_tokens=False).input_ids
        for action in chosen:
            target_ids = tokenizer(tool_call(action) + tokenizer.eos_token, add_special_tokens=False).input_ids
            examples.append((prompt_ids + target_ids, len(target_ids)))
    device = next(model.parameters()).device
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    loss_mean = math.nan
    for _ in range(steps):
        losses = []
        for ids, n in examples:
            x = torch.tensor([ids], device=device)
            # Logits of the target positions only: the vocabulary is most of the cost.
            logits = model(input_ids=x, logits_to_keep=n + 1).logits[0, :-1]
            loss = torch.nn.functional.cross_entropy(logits.float(), x[0, -n:]) / len(examples)
            loss.backward()
            losses.append(loss.item() * len(examples))
        optimizer.step()
        optimizer.zero_grad()
        loss_mean = sum(losses) / len(losses)
    model.eval()
    return loss_mean


def grpo_config(recipe: Recipe, components: int, output_dir: str) -> Any:
    """TRL's ``GRPOConfig`` of ``recipe`` (``components``: how many component reward functions)."""
    import torch
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=output_dir,
        max_steps=recipe.steps,
        per_device_train_batch_size=recipe.batch_size,
        num_generations=recipe.num_generations,
        max_completion_length=recipe.max_completion_length,
        max_tool_calling_iterations=recipe.max_tool_calls,
        learning_rate=recipe.learning_rate,
        reward_weights=[0.0] * components,  # logged only: get_reward is the trained reward
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        use_cpu=not torch.cuda.is_available(),
        bf16=torch.cuda.is_available(),
        # TRL defaults to gradient checkpointing under its deprecated name; saying it here keeps
        # transformers' FutureWarning away. It saves GPU memory; on a CPU it only slows a step.
        activation_checkpointing=torch.cuda.is_available(),
        seed=0,
    )


def build(recipe: Recipe, *, url: str | None = None, output_dir: str | None = None) -> tuple[Any, Any]:
    """The model (format warm-up done), the environment factory and TRL's trainer of ``recipe``:
    returns ``(trainer, factory)``."""
    from trl import GRPOTrainer

    if recipe.model == "tiny":
        model, tokenizer = models.tiny_causal_lm(seed=0)
    else:
        model, tokenizer = models.load_causal_lm(recipe.model)
    envgym_trl.use_tool_chat_template(tokenizer)  # SmolLM2's template has no tools: TRL's Qwen3 one
    factory = envgym_trl.environment_factory(recipe.env_id, url=url, max_turns=recipe.max_turns)
    rows = envgym_trl.dataset(recipe.env_id, seeds=range(recipe.seeds))
    if recipe.warmup_steps:
        teach_tool_calls(
            model,
            tokenizer,
            factory,
            [rows[i] for i in range(min(recipe.warmup_rows, len(rows)))],
            actions=recipe.warmup_actions,
            steps=recipe.warmup_steps,
            lr=recipe.warmup_lr,
        )
    components = envgym_trl.reward_functions(factory)
    args = grpo_config(recipe, len(components), output_dir or recipe.output_dir)
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        train_dataset=rows,
        reward_funcs=list(components),  # TRL appends get_reward to the list it is given
        args=args,
        environment_factory=factory,
    )
    return trainer, factory


def train(trainer: Any, factory: envgym_trl.EnvironmentFactory) -> dict[str, Any]:
    """Run ``trainer``; returns the summary :func:`main` prints: what TRL logged per step, and the
    episodes envgym recorded (the last 16 of them in full)."""
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    logged = [entry for entry in trainer.state.log_history if "reward" in entry]
    episodes = list(factory.episodes)
    after = trainer.model.parameters()
    moved = max((p.detach() - b).abs().max().item() for p, b in zip(after, before, strict=True))
    names = [name.removesuffix("_reward") or name for name in factory.reward_components]
    return {
        "env_id": factory.env_id,
        "url": factory.url,
        "steps": trainer.state.global_step,
        "env_steps": factory.steps,
        "episodes": len(episodes),
        "episode_return_mean": sum(e.total_reward for e in episodes) / len(episodes) if episodes else None,
        "logged_reward": [entry["reward"] for entry in logged],
        "logged_env_reward": [entry[f"rewards/{factory.env_class.__name__}/mean"] for entry in logged],
        "logged_components": {name: [entry[f"rewards/{name}/mean"] for entry in logged] for name in names},
        "logged_episode": {key: [entry[key] for entry in logged] for key in EPISODE_METRICS},
        "frac_reward_zero_std": [entry["frac_reward_zero_std"] for entry in logged],
        "tool_call_frequency": [entry.get("tools/call_frequency") for entry in logged],
        "max_weight_change": moved,
        "last_episodes": [asdict(e) for e in episodes[-16:]],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="the tiny test model, 2 steps (< 2 min on a CPU)")
    parser.add_argument("--url", default=None, help="play the envs of an envgym serve server (ws://HOST:P)")
    parser.add_argument("--env-id", default=None, help="an envgym single-agent text id (default: FrozenLake)")
    parser.add_argument("--model", default=None, help="an envgym model spec (default: smollm2)")
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps")
    parser.add_argument("--output-dir", default=None, help="TRL's output folder")
    args = parser.parse_args(argv)
    recipe = SMOKE if args.smoke else Recipe()
    changes = {"env_id": args.env_id, "model": args.model, "steps": args.steps}
    recipe = Recipe(**{**asdict(recipe), **{k: v for k, v in changes.items() if v is not None}})
    if args.smoke:
        import torch

        torch.set_num_threads(1)  # a tiny model on a shared CPU: threads only contend
    started = time.perf_counter()
    output_dir = args.output_dir
    if not output_dir and not recipe.output_dir:
        output_dir = tempfile.mkdtemp(prefix="trl-grpo-")
    with contextlib.redirect_stdout(sys.stderr):  # TRL prints its logs; stdout is for the summary
        trainer, factory = build(recipe, url=args.url, output_dir=output_dir)
        try:
            summary = train(trainer, factory)
        finally:
            factory.close()
    summary["wall_s"] = round(time.perf_counter() - started, 1)
    json.dump(summary, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
