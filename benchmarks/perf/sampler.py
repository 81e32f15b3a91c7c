"""The hf agent's next-token sampler (``envgym.agents.sampling``) timed alone, optionally beside an older copy.

A call draws one token per row with counter-based noise: the row's 64 most likely tokens race
with their own noise and the rest of the vocabulary as one competitor; when the rest wins, its
tokens race among themselves, which hashes a counter for every token of the vocabulary. How often
that happens depends on the distribution: a random (or very uncertain) model spreads its mass, so
the rest wins often; a trained model's replies mostly come from its top tokens. This script times
``sample_next_tokens`` at temperature 1 on both kinds of logits:

* ``flat``: standard normal logits x 0.5 (a randomly initialised model, the tests' tiny ones);
* ``peaked``: standard normal logits x 8 (the rest almost never wins).

With ``--baseline FILE`` (the ``agents/sampling.py`` of another commit, e.g.
``git show f27884b~1:agents/sampling.py > /tmp/sampling_before.py``) both copies run on the same
logits and keys, alternating step by step, and the report says whether every call gave the same
tokens and log-probabilities bit for bit.

Usage::

    python benchmarks/perf/sampler.py                                  # 8 and 40 rows, 49,152 tokens, 1 thread
    python benchmarks/perf/sampler.py --baseline /tmp/sampling_before.py --json
    python benchmarks/perf/sampler.py --rows 2 --vocab 1000 --steps 2  # smoke run

It measures and reports; it asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

#: Logit scales: standard normal logits times this.
DISTRIBUTIONS = {"flat": 0.5, "peaked": 8.0}


def _load(path: str | None) -> Any:
    if path is None:
        from envgym.agents import sampling

        return sampling
    spec = importlib.util.spec_from_file_location("sampling_baseline", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"--baseline {path!r} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "sample_next_tokens"):
        raise SystemExit(f"--baseline {path!r} has no sample_next_tokens (expected an agents/sampling.py)")
    return module


def measure(samplers: dict[str, Any], rows: int, vocab: int, scale: float, steps: int) -> dict[str, Any]:
    import torch

    generator = torch.Generator().manual_seed(rows)
    logits = torch.randn(rows, vocab, generator=generator) * scale
    keys = torch.randint(0, 2**62, (rows,), generator=generator)
    seconds: dict[str, list[float]] = {name: [] for name in samplers}
    identical, rest_won = True, 0
    top = logits.topk(min(64, vocab), dim=-1).indices
    for step in range(steps):
        outputs = {}
        names = list(samplers) if step % 2 == 0 else list(reversed(samplers))
        for name in names:
            start = time.perf_counter()
            outputs[name] = samplers[name].sample_next_tokens(logits, keys, step=step)
            seconds[name].append(time.perf_counter() - start)
        first, *others = outputs.values()
        identical &= all(all(torch.equal(a, b) for a, b in zip(first, other, strict=True)) for other in others)
        rest_won += int((top != first[0].unsqueeze(-1)).all(dim=-1).sum())
    report: dict[str, Any] = {"rows": rows, "vocab": vocab, "logit_scale": scale, "steps": steps}
    report["rest_won_share"] = rest_won / (rows * steps)
    for name, times in seconds.items():
        report[f"{name}_ms"] = round(statistics.median(times) * 1e3, 3)
    if len(samplers) > 1:
        report["identical"] = identical
        report["speedup"] = round(report["baseline_ms"] / report["current_ms"], 3)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[8, 40], help="rows per call (default 8 40)")
    parser.add_argument("--vocab", type=int, default=49152, help="vocabulary size (default SmolLM2's 49,152)")
    parser.add_argument("--steps", type=int, default=10, help="calls per case and copy (default 10)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--baseline", default=None, help="another commit's agents/sampling.py, timed beside this one")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    if min(args.rows) < 1 or args.vocab < 2 or args.steps < 1 or args.threads < 1:
        parser.error("--rows, --steps and --threads must be >= 1 and --vocab >= 2")
    if args.baseline is not None and not Path(args.baseline).is_file():
        parser.error(f"--baseline {args.baseline!r} is not a file")
    import torch

    torch.set_num_threads(args.threads)
    samplers = {"current": _load(None)}
    if args.baseline is not None:
        samplers["baseline"] = _load(args.baseline)
    cases = [
        measure(samplers, rows, args.vocab, scale, args.steps) | {"distribution": name}
        for name, scale in DISTRIBUTIONS.items()
        for rows in args.rows
    ]
    report = {"benchmark": "sampler", "threads": args.threads, "baseline": args.baseline, "cases": cases}
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    for case in cases:
        line = (
            f"{case['distribution']:7s} rows={case['rows']:3d} vocab={case['vocab']} rest won "
            f"{case['rest_won_share']:6.1%}  current {case['current_ms']:8.2f} ms"
        )
        if "baseline_ms" in case:
            line += f"  baseline {case['baseline_ms']:8.2f} ms  x{case['speedup']:.2f}  identical={case['identical']}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
