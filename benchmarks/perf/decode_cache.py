"""One decoding step of the hf agent's model with the KV cache appended to vs written in place.

transformers' ``DynamicCache`` appends each step's keys and values with ``torch.cat``, a copy of
the whole cache per step; the hf agent gives the cache spare room after the prefill
(``envgym.agents.hf._make_room``) and decoding writes into it. This script prefills ``--rows``
rows of ``--positions`` random token ids (a few rows left-padded, as in a bucketed call), copies
the cache into both forms and then alternates decoding steps between them (the order flips every
step, so a machine that speeds up or slows down weighs on both alike). Reported per form: median
and mean wall and CPU seconds per step, and whether the two forms gave the same logits bit for
bit at every step (they must: the attention reads the same numbers).

Usage::

    python benchmarks/perf/decode_cache.py                       # SmolLM2, 40 rows x 400 positions, 24 steps
    python benchmarks/perf/decode_cache.py --rows 8 --positions 1000 --json
    python benchmarks/perf/decode_cache.py --model tiny --rows 4 --positions 32 --steps 4   # smoke run

It measures and reports; it asserts nothing.
"""

from __future__ import annotations

import argparse
import copy
import inspect
import json
import os
import statistics
import sys
import time
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _model(name: str) -> Any:
    from envgym.models import load_causal_lm, tiny_causal_lm

    model = (tiny_causal_lm(seed=0) if name == "tiny" else load_causal_lm(name))[0]
    return model.eval()


def measure(model: Any, rows: int, positions: int, steps: int) -> dict[str, Any]:
    import torch
    from envgym.agents import hf

    generator = torch.Generator().manual_seed(0)
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (rows, positions), generator=generator)
    step_ids = torch.randint(0, vocab, (rows, steps), generator=generator)
    mask = torch.ones(rows, positions, dtype=torch.long)
    mask[: max(1, rows // 8), : positions // 8] = 0  # a few left-padded rows
    position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
    forms: dict[str, dict[str, Any]] = {}
    # transformers >= 5.24 names the cache argument ``cache`` (``past_key_values`` is deprecated)
    cache_name = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    with torch.inference_mode():
        out = model(input_ids=ids, attention_mask=mask, position_ids=position_ids, use_cache=True, logits_to_keep=1)
        cache = getattr(out, cache_name)
        for name in ("appended", "in place"):
            form = copy.deepcopy(cache)
            if name == "in place":
                hf._make_room(form, steps)
            forms[name] = {"cache": form, "mask": mask, "wall": [], "cpu": [], "logits": []}
        if type(forms["in place"]["cache"].layers[0]).__name__ != "_RoomyLayer":
            raise SystemExit("this model's cache is not a plain DynamicCache: the agent decodes it by appending")
        for step in range(steps):
            order = ("appended", "in place") if step % 2 else ("in place", "appended")
            for name in order:
                form = forms[name]
                form["mask"] = torch.cat([form["mask"], form["mask"].new_ones(rows, 1)], dim=-1)
                wall, cpu = time.perf_counter(), time.process_time()
                result = model(
                    input_ids=step_ids[:, step : step + 1],
                    attention_mask=form["mask"],
                    position_ids=position_ids[:, -1:] + 1 + step,
                    **{cache_name: form["cache"]},
                    use_cache=True,
                    logits_to_keep=1,
                )
                form["wall"].append(time.perf_counter() - wall)
                form["cpu"].append(time.process_time() - cpu)
                form["logits"].append(result.logits[:, -1])
    identical = all(torch.equal(a, b) for a, b in zip(forms["appended"]["logits"], forms["in place"]["logits"]))
    report: dict[str, Any] = {
        "rows": rows,
        "positions": positions,
        "steps": steps,
        "threads": torch.get_num_threads(),
        "loadavg": list(os.getloadavg()),
        "identical_logits": identical,
    }
    for name, form in forms.items():
        report[name] = {
            "median_s": statistics.median(form["wall"]),
            "mean_s": statistics.fmean(form["wall"]),
            "median_cpu_s": statistics.median(form["cpu"]),
            "mean_cpu_s": statistics.fmean(form["cpu"]),
        }
    report["in_place_over_appended"] = report["in place"]["median_s"] / report["appended"]["median_s"]
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2", help="a model spec (default smollm2) or 'tiny'")
    parser.add_argument("--rows", type=int, default=40)
    parser.add_argument("--positions", type=int, default=400)
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if min(args.rows, args.positions, args.steps) < 1:
        parser.error("--rows, --positions and --steps must be at least 1")
    report = measure(_model(args.model), args.rows, args.positions, args.steps)
    report["model"] = args.model
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(
        f"{args.model}: {args.rows} rows x {args.positions} positions, {args.steps} steps each, "
        f"{report['threads']} threads, load {report['loadavg'][0]:.2f}"
    )
    for name in ("appended", "in place"):
        row = report[name]
        print(
            f"  {name:9s} median {row['median_s'] * 1e3:8.1f} ms/step (CPU {row['median_cpu_s'] * 1e3:8.1f} ms), "
            f"mean {row['mean_s'] * 1e3:8.1f} ms"
        )
    print(
        f"  in place / appended: {report['in_place_over_appended']:.2f}; logits identical: {report['identical_logits']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
