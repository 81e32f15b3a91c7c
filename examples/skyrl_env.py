"""envgym environments as SkyRL-gym text envs, played the way SkyRL's generator plays them.

In a SkyRL run you do not write the loop below: SkyRL's generator does. What you write:

1. ``import envgym.integrations.skyrl`` in your entry point (it registers ``env_class: envgym``
   in ``skyrl_gym``; ``envgym.integrations.skyrl.register("wordle", env_id=...)`` adds names);
2. a dataset: ``envgym.integrations.skyrl.dataset_rows("envgym/Wordle-v0", seeds=range(512))``
   written to parquet (each row: an empty ``prompt``, ``env_class``, ``env_id``, ``seed``);
3. the config: ``environment.env_class=envgym`` and ``generator.max_turns=8`` (optional defaults
   under ``environment.skyrl_gym.envgym``: ``env_kwargs``, ``url`` of an ``envgym serve`` server,
   ``prompt`` fields).

This script plays a few episodes through ``skyrl_gym.make("envgym", ...)`` with a local
transformers model in SkyRL's order of calls (make, init, generate/step until done,
get_metrics, close) and prints each episode's rewards and metrics as JSON.

    python examples/skyrl_env.py --env-id envgym/Wordle-v0 --seeds 0 1 2 --max-turns 8
    python examples/skyrl_env.py --smoke          # the tiny random test model, 2 episodes of 3 turns
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from typing import Any

import skyrl_gym

import envgym.integrations.skyrl as envgym_skyrl
from envgym import models


def generate(model: Any, tokenizer: Any, messages: list[dict[str, str]], max_new_tokens: int) -> str:
    """One reply from ``model`` to ``messages`` (greedy), as text."""
    import torch

    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        out = model.generate(**ids, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    return tokenizer.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)


def play(row: dict[str, Any], model: Any, tokenizer: Any, *, max_turns: int, max_new_tokens: int) -> dict[str, Any]:
    """One episode in the order SkyRL's generator calls a text env."""
    extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")}
    extras["max_turns"] = max_turns  # the generator writes its turn limit into the extras
    env = skyrl_gym.make(row["env_class"], env_config={}, extras=extras)
    chat, _ = env.init(copy.deepcopy(row["prompt"]))
    rewards, done = [], False
    try:
        while not done:
            reply = generate(model, tokenizer, chat, max_new_tokens)
            out = env.step(reply)
            rewards.append(out["reward"])
            done = out["done"]
            chat += [{"role": "assistant", "content": reply}, *out["observations"]]
        metrics = env.get_metrics()
    finally:
        env.close()
    return {"env_id": row["env_id"], "seed": row["seed"], "rewards": rewards, "metrics": metrics}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="envgym/Wordle-v0", help="an envgym single-agent text id")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="one episode per seed")
    parser.add_argument("--max-turns", type=int, default=8, help="SkyRL's generator.max_turns")
    parser.add_argument("--max-new-tokens", type=int, default=48, help="tokens per reply")
    parser.add_argument("--model", default="smollm2", help="a model spec of envgym.models.load_causal_lm")
    parser.add_argument("--url", default=None, help="play on an envgym serve server (ws://HOST:P)")
    parser.add_argument("--smoke", action="store_true", help="tiny random model, 2 episodes of at most 3 turns")
    args = parser.parse_args(argv)
    if args.smoke:
        model, tokenizer = models.tiny_causal_lm(seed=0)
        args.max_turns, args.max_new_tokens, args.seeds = 3, 12, args.seeds[:2]
    else:
        model, tokenizer = models.load_causal_lm(args.model)
    t0 = time.perf_counter()
    rows = envgym_skyrl.dataset_rows(args.env_id, args.seeds, url=args.url)
    episodes = [
        play(row, model, tokenizer, max_turns=args.max_turns, max_new_tokens=args.max_new_tokens) for row in rows
    ]
    aggregate = envgym_skyrl.EnvgymTextEnv.aggregate_metrics([e["metrics"] for e in episodes])
    json.dump({"episodes": episodes, "aggregate": aggregate}, sys.stdout, indent=2)
    print()
    print(f"{len(episodes)} episodes in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
