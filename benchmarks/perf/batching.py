"""Cross-entry batching, measured on a real run's prompts: tokens/s per agent call when each suite
entry's episodes are answered on their own (5 per call, as runs went entry by entry) against all
live episodes of the suite in one call, with and without bucketed prefill.

Reads the prompts a bundled-model run recorded (``prompt_token_ids`` of turn ``--turn`` of every
episode of a bench run folder, e.g. the main job's ``runs/main/core-v1/hf-smollm2``) and replays
them through ``HFAgent``'s decoding loop with ``ignore_eos`` so every reply is exactly
``--new-tokens`` long. Three ways to answer the same prompts:

* **per entry**: one call per suite entry (its episodes together), one padded prefill each;
* **one call, one prefill**: every prompt in one call, padded to the longest;
* **one call, bucketed** (what ``HFAgent`` does now): prompts of similar length prefill together,
  then one decoding batch.

Reported per way: calls, wall time, completion tokens/s (all calls together), and the time split
between prefill and decoding. Each way runs ``--repeats`` times (default 1) and keeps the fastest.
Usage::

    python benchmarks/perf/batching.py runs/main/core-v1/hf-smollm2
    python benchmarks/perf/batching.py RUN --turn 2 --threads 2 --json

``--tiny`` uses a tiny random model with the real tokenizer (for the smoke test). It measures
and reports; it asserts nothing. On a machine shared with other busy processes the numbers drop:
the report includes the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def recorded_prompts(folder: Path, turn: int) -> dict[str, list[list[int]]]:
    """Entry name -> the prompt ids of turn ``turn`` of each of its episodes (those that reached it)."""
    prompts: dict[str, list[list[int]]] = {}
    for file in sorted(folder.glob("entries/*/episodes.jsonl")):
        for line in file.read_text(encoding="utf-8").splitlines():
            turns = json.loads(line).get("turns") or []
            if len(turns) > turn and turns[turn].get("prompt_token_ids"):
                prompts.setdefault(file.parent.name, []).append(turns[turn]["prompt_token_ids"])
    return prompts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a bench run folder of a model agent (records with prompt ids)")
    parser.add_argument("--turn", type=int, default=2, help="which turn's prompts to replay (default 2)")
    parser.add_argument("--new-tokens", type=int, default=32, help="tokens per reply (default 32, as core-v1)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--tiny", action="store_true", help="a tiny random model (smoke test)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    import torch
    from envgym.agents import hf as hf_module
    from envgym.agents.hf import HFAgent, _Row

    from envgym.models import tiny_causal_lm

    if args.threads:
        torch.set_num_threads(args.threads)
    prompts = recorded_prompts(args.run, args.turn)
    if not prompts:
        print(f"no recorded prompt ids at turn {args.turn} under {args.run}/entries", file=sys.stderr)
        return 2
    if args.tiny:
        model, tokenizer = tiny_causal_lm(seed=0)
        agent = HFAgent(model_obj=model, tokenizer=tokenizer, max_new_tokens=args.new_tokens, ignore_eos=True)
    else:
        agent = HFAgent(max_new_tokens=args.new_tokens, ignore_eos=True)
    agent.batch_size = 10**6  # one decoding batch per call: the way decides the calls

    def timed_call(batch: list[list[int]], bucketed: bool) -> tuple[float, float]:
        """(prefill seconds, whole call seconds) for one call answering ``batch``."""
        saved = hf_module.PREFILL_PADDING, hf_module.PREFILL_POSITIONS
        if not bucketed:
            hf_module.PREFILL_PADDING, hf_module.PREFILL_POSITIONS = float("inf"), 10**12
        try:
            rows = [_Row(p, args.new_tokens, i, [], [], []) for i, p in enumerate(batch)]  # key i
            prefill_s = 0.0
            prefill = agent._prefill

            def timing_prefill(rows_: Any) -> Any:
                nonlocal prefill_s
                start = time.perf_counter()
                out = prefill(rows_)
                prefill_s = time.perf_counter() - start
                return out

            agent._prefill = timing_prefill  # type: ignore[method-assign]
            start = time.perf_counter()
            with torch.inference_mode():
                agent._generate(rows)
            return prefill_s, time.perf_counter() - start
        finally:
            agent._prefill = prefill  # type: ignore[method-assign]
            hf_module.PREFILL_PADDING, hf_module.PREFILL_POSITIONS = saved

    everything = [p for batch in prompts.values() for p in batch]
    ways = {
        "per entry": ([batch for batch in prompts.values()], False),
        "one call, one prefill": ([everything], False),
        "one call, bucketed": ([everything], True),
    }
    timed_call(everything[:2], True)  # warm-up
    rows_out = []
    for name, (calls, bucketed) in ways.items():
        best: tuple[float, float] | None = None
        for _ in range(max(1, args.repeats)):
            results = [timed_call(batch, bucketed) for batch in calls]
            total = (sum(r[0] for r in results), sum(r[1] for r in results))
            best = total if best is None or total[1] < best[1] else best
        assert best is not None
        tokens = len(everything) * args.new_tokens
        rows_out.append(
            {
                "way": name,
                "calls": len(calls),
                "episodes": len(everything),
                "prompt_tokens": sum(map(len, everything)),
                "seconds": best[1],
                "prefill_s": best[0],
                "decode_s": best[1] - best[0],
                "tokens_per_s": tokens / best[1],
            }
        )
    report = {
        "run": str(args.run),
        "turn": args.turn,
        "new_tokens": args.new_tokens,
        "threads": torch.get_num_threads(),
        "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "model": "tiny" if args.tiny else "smollm2",
        "results": rows_out,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"{len(everything)} prompts of turn {args.turn} from {args.run} ({report['model']}, "
        f"{report['threads']} threads, load {report['load_average']})"
    )
    print(f"{'way':24} {'calls':>5} {'seconds':>8} {'prefill s':>9} {'decode s':>8} {'tok/s':>7}")
    for row in rows_out:
        print(
            f"{row['way']:24} {row['calls']:5d} {row['seconds']:8.1f} {row['prefill_s']:9.1f} "
            f"{row['decode_s']:8.1f} {row['tokens_per_s']:7.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
