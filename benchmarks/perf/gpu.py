"""The bundled model on one accelerator: core-v1 with ``hf:smollm2``, tokens/s per call, the decode
step's Python overhead, transformers' static-cache generation on the same prompts, and envgym's GRPO
update against TRL's.

Made for a machine with a CUDA GPU, torch and transformers, but no package index and no vLLM;
on a machine without a GPU the same figures come from the CPU. Five parts:

1. **core-v1** (``--suite``): the whole suite played by ``HFAgent`` on the device, timed after
   the model is loaded (target on one GPU: <= 10 s), with the agent calls read back from the
   run's records: calls, episodes per call, completion tokens/s per call (median and mean).
2. **decode-step profile**: turn ``--turn`` prompts of that run replayed through the decoding
   loop of this checkout and of the pre-issue-36 loop (``agents/hf.py`` at ``--baseline``, read
   with ``git show``), interleaved ``--repeats`` times, every reply exactly ``--new-tokens``
   long: per decode step, wall ms, ms inside the model's forward, and the share outside it
   (sampling, stop checks, bookkeeping: the Python overhead). On CUDA the forward is timed
   with synchronisation around it.
3. **trainer**: ``trainer_vs_trl.py --device DEVICE`` (envgym's GRPO update next to TRL's
   ``GRPOTrainer`` on one job) when ``trl`` imports; otherwise the report says so.
4. **transformers' own generation** (``--no-generate`` skips it): the same prompts through
   ``model.generate``, greedy, every reply exactly ``--new-tokens`` long, left-padded into one
   batch, with transformers' dynamic cache, its static cache (``cache_implementation="static"``)
   and, on CUDA, the static cache with the forward compiled (its ``CompileConfig`` default,
   ``mode="reduce-overhead"``: CUDA graphs; ``--no-compile`` skips it; the first call, which
   compiles and captures, is not timed). Decoding tokens/s come from the difference between a
   reply of ``--new-tokens`` and a reply of one token (prefill and first token cancel out); the
   static rows also say whether their tokens equal the dynamic cache's.
5. **model**: the bundled model (``smollm2``; its GGUF converts once into envgym's cache), a
   converted transformers folder or a ``.gguf`` file (``--model PATH``), or randomly initialised
   weights of the same architecture (``--random-weights``: timings only, said in the output).

Usage::

    python benchmarks/perf/gpu.py                    # table; CUDA when available
    python benchmarks/perf/gpu.py --json --out benchmarks/perf/results/gpu_h200.json
    python benchmarks/perf/gpu.py --model /models/SmolLM2-135M-Instruct --no-trainer
    python benchmarks/perf/gpu.py --quick --json     # tiny random model, 2 episodes (smoke test)

It measures and reports; it asserts nothing. The report includes the load average.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
BASELINE = "63d6b63"  # main before issue 36: per-row generators, tokens to the host every step

QUICK_SUITE = """\
name: gpu-quick
version: 1
defaults: {episodes: 2, seed: 0, split: test, max_turns: 2, trials: 1}
metrics: [success_rate, mean_reward, tokens, wall_time]
prompt: {history: last_k, last_k: 1, max_new_tokens: 8, stop_at_action: true}
entries:
  - name: frozenlake
    env: envgym/FrozenLake-v0
    kwargs: {difficulty: easy}
"""


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _script(name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"perf_{name}", HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_model(args: argparse.Namespace, device: str) -> tuple[Any, Any, str]:
    """The model, its tokenizer and a line saying which weights they are."""
    import torch
    import transformers

    from envgym import models

    if args.quick:
        model, tokenizer = models.tiny_causal_lm(seed=0, device=device)
        return model, tokenizer, "tiny random Llama (2 layers, width 32) with the SmolLM2 tokenizer: --quick"
    spec = args.model
    if spec.endswith(".gguf"):
        target = Path(tempfile.mkdtemp(prefix="envgym-gpu-")) / "model"
        _progress(f"converting {spec} into {target} ...")
        spec = str(models.convert_gguf(spec, target))
    folder = models.resolve_model(spec)
    dtype = torch.float32 if args.dtype == "float32" else torch.bfloat16
    if args.random_weights:
        config = transformers.AutoConfig.from_pretrained(folder)
        torch.manual_seed(0)
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype).to(device).eval()
        tokenizer = models.load_tokenizer(str(folder))
        return model, tokenizer, f"RANDOMLY INITIALISED weights of {folder.name}'s architecture (timings only)"
    model, tokenizer = models.load_causal_lm(spec, device=device, dtype=dtype)
    return model, tokenizer, f"{folder} ({args.dtype})"


def run_suite(model: Any, tokenizer: Any, suite: str, out: Path) -> dict[str, Any]:
    """Play ``suite`` with ``HFAgent`` on the model; wall time and the agent calls' figures."""
    from envgym.agents.hf import HFAgent

    from envgym.bench.run import run_suite as bench

    agent = HFAgent(model_obj=model, tokenizer=tokenizer, name="hf:smollm2")
    _progress(f"playing {suite} ...")
    start = time.perf_counter()
    run = bench(suite, "hf:smollm2", agent_object=agent, out=out)
    seconds = time.perf_counter() - start
    calls = _script("agent_calls").call_stats(out)
    results = run.results()
    return {
        "suite": suite,
        "seconds": seconds,
        "success_rate": results.get("overall", {}).get("success_rate"),
        **{k: calls[k] for k in ("episodes", "turns", "calls", "mean_batch", "agent_s", "completion_tokens")},
        "tokens_per_s_per_call_median": calls["tokens_per_s_median"],
        "tokens_per_s_per_call_mean": calls["tokens_per_s_mean"],
    }


def baseline_module(commit: str) -> types.ModuleType | None:
    """``agents/hf.py`` as it was at ``commit`` (``None`` when git or the commit is missing)."""
    try:
        source = subprocess.run(
            ["git", "show", f"{commit}:agents/hf.py"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    module = types.ModuleType("envgym_hf_baseline")
    module.__file__ = f"{commit}:agents/hf.py"
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, module.__file__, "exec"), module.__dict__)  # noqa: S102 - this repository's own past source
    return module


def profile_decode(
    agents: dict[str, Any], prompts: list[list[int]], new_tokens: int, repeats: int, cuda: bool
) -> dict[str, dict[str, float]]:
    """Per decode step: wall ms, forward ms and the share outside the forward, for each agent's
    loop on the same prompts (best of ``repeats`` interleaved runs, by wall time)."""
    import torch

    def once(agent: Any, module: Any) -> dict[str, float]:
        times = {"forward": 0.0, "prefill": 0.0, "steps": 0}
        forward = agent._forward

        def timed(input_ids: Any, *rest: Any) -> Any:
            if cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
            out = forward(input_ids, *rest)
            if cuda:
                torch.cuda.synchronize()
            seconds = time.perf_counter() - start
            if input_ids.shape[1] == 1 and rest[-1] is not None:  # a decoding step feeds one token
                times["forward"] += seconds
                times["steps"] += 1
            else:
                times["prefill"] += seconds
            return out

        agent._forward = timed
        first = module._Row.__dataclass_fields__  # the third field: a generator (before) or a key
        third = list(first)[2]
        rows = []
        for i, prompt in enumerate(prompts):
            source = torch.Generator(device=agent.device).manual_seed(i) if third == "generator" else i
            rows.append(module._Row(list(prompt), new_tokens, source, [], [], []))
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.inference_mode():
            agent._generate(rows)
        if cuda:
            torch.cuda.synchronize()
        total = time.perf_counter() - start
        agent._forward = forward
        decode_wall = total - times["prefill"]
        steps = max(1, int(times["steps"]) + 1)  # the last step samples without a forward after it
        return {
            "decode_steps": steps,
            "step_ms": 1e3 * decode_wall / steps,
            "forward_ms": 1e3 * times["forward"] / steps,
            "outside_forward_share": (decode_wall - times["forward"]) / decode_wall if decode_wall > 0 else 0.0,
            "decode_tokens_per_s": len(prompts) * new_tokens / decode_wall if decode_wall > 0 else 0.0,
        }

    best: dict[str, dict[str, float]] = {}
    for _ in range(max(1, repeats)):
        for name, (agent, module) in agents.items():
            result = once(agent, module)
            if name not in best or result["step_ms"] < best[name]["step_ms"]:
                best[name] = result
    return best


def generate_figures(
    model: Any, tokenizer: Any, prompts: list[list[int]], new_tokens: int, repeats: int, cuda: bool, compiled: bool
) -> dict[str, Any]:
    """transformers' ``generate`` on ``prompts`` (part 4 of the module docstring): per variant, the
    best of ``repeats`` timings of a ``new_tokens`` reply and of a one-token reply, and the decoding
    tokens/s their difference gives."""
    import torch

    # left padding with the pad token that envgym's tokenizer loaders always set
    batch = tokenizer.pad({"input_ids": prompts}, padding=True, padding_side="left", return_tensors="pt")
    ids, mask = batch["input_ids"].to(model.device), batch["attention_mask"].to(model.device)
    width = ids.shape[1]
    variants: dict[str, dict[str, Any]] = {
        "dynamic_cache": {"disable_compile": True},
        "static_cache": {"cache_implementation": "static", "disable_compile": True},
    }
    if cuda and compiled:
        variants["static_cache_compiled"] = {"cache_implementation": "static", "disable_compile": False}

    def timed(kwargs: dict[str, Any], tokens: int) -> tuple[float, Any]:
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=tokens,
                min_new_tokens=tokens,
                do_sample=False,
                pad_token_id=tokenizer.pad_token_id,
                **kwargs,
            )
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter() - start, out[:, width:]

    figures: dict[str, Any] = {}
    reference = None
    for name, kwargs in variants.items():
        if name.endswith("compiled"):
            _progress("compiling the forward for transformers' static cache (not timed) ...")
            timed(kwargs, new_tokens)
            timed(kwargs, 1)
        full, first = math.inf, math.inf
        tokens = None
        for _ in range(max(1, repeats)):
            seconds, tokens = timed(kwargs, new_tokens)
            full = min(full, seconds)
            first = min(first, timed(kwargs, 1)[0])
        decode = full - first
        row: dict[str, Any] = {
            "seconds": full,
            "one_token_seconds": first,
            "decode_tokens_per_s": len(prompts) * (new_tokens - 1) / decode if decode > 0 and new_tokens > 1 else None,
        }
        if reference is None:
            reference = tokens
        else:
            row["same_tokens_as_dynamic"] = bool(torch.equal(tokens, reference))
        figures[name] = row
    return figures


def recorded_prompts(folder: Path, turn: int) -> list[list[int]]:
    prompts = _script("batching").recorded_prompts(folder, turn)
    return [p for batch in prompts.values() for p in batch]


def trainer_figures(device: str, quick: bool) -> dict[str, Any]:
    """envgym's GRPO update against TRL's on the same job, or why not."""
    if importlib.util.find_spec("trl") is None:
        return {"skipped": "trl does not import here; run benchmarks/perf/trainer_vs_trl.py from a venv with TRL"}
    out = Path(tempfile.mkdtemp(prefix="envgym-gpu-trl-")) / "trainer_vs_trl.json"
    command = [sys.executable, str(HERE / "trainer_vs_trl.py"), "--device", device, "--json", "--out", str(out)]
    if quick:
        command += ["--model", "tiny", "--prompts", "2", "--group-size", "2", "--steps", "1", "--warmup", "0"]
    _progress("envgym's trainer against TRL's ...")
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return {"failed": proc.stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]}
    return json.loads(proc.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2", help="smollm2, a transformers folder, or a .gguf file")
    parser.add_argument("--random-weights", action="store_true", help="random weights of the model's architecture")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--suite", default="core-v1")
    parser.add_argument("--turn", type=int, default=1, help="which turn's prompts the profile replays (default 1)")
    parser.add_argument("--new-tokens", type=int, default=32, help="tokens per reply in the profile (default 32)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved runs per loop in the profile")
    parser.add_argument("--baseline", default=BASELINE, help=f"commit of the 'before' loop (default {BASELINE})")
    parser.add_argument("--threads", type=int, default=None, help="torch threads on a CPU (default: torch's)")
    parser.add_argument("--no-trainer", action="store_true", help="skip the trainer comparison")
    parser.add_argument("--no-generate", action="store_true", help="skip transformers' generate (part 4)")
    parser.add_argument("--no-compile", action="store_true", help="part 4 on CUDA: skip the compiled static cache")
    parser.add_argument("--quick", action="store_true", help="tiny random model and a 2-episode suite")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON report here")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    for name in ("turn", "new_tokens", "repeats"):
        if getattr(args, name) < (0 if name == "turn" else 1):
            parser.error(f"--{name.replace('_', '-')} must be >= {0 if name == 'turn' else 1}")

    import torch
    from envgym.agents import hf

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device here")
    if args.threads:
        torch.set_num_threads(args.threads)
    cuda = device.startswith("cuda")
    start = time.perf_counter()
    model, tokenizer, weights = load_model(args, device)
    load_s = time.perf_counter() - start
    scratch = Path(tempfile.mkdtemp(prefix="envgym-gpu-"))
    suite = args.suite
    if args.quick:
        suite = str(scratch / "gpu-quick-v1.yaml")
        Path(suite).write_text(QUICK_SUITE, encoding="utf-8")
    played = run_suite(model, tokenizer, suite, scratch / "run")

    prompts = recorded_prompts(scratch / "run", args.turn) or recorded_prompts(scratch / "run", 0)
    loops: dict[str, Any] = {"after": (hf.HFAgent(model_obj=model, tokenizer=tokenizer, ignore_eos=True), hf)}
    old = baseline_module(args.baseline)
    if old is not None:
        loops["before"] = (old.HFAgent(model_obj=model, tokenizer=tokenizer, ignore_eos=True), old)
    for agent, _ in loops.values():
        agent.max_new_tokens = args.new_tokens
        agent.batch_size = 10**6
    _progress(f"decode-step profile: {len(prompts)} prompts, {args.new_tokens} tokens each ...")
    profile = profile_decode(loops, prompts, args.new_tokens, args.repeats, cuda)
    generated: dict[str, Any] = {"skipped": "--no-generate"}
    if not args.no_generate:
        _progress("transformers' generate on the same prompts ...")
        generated = generate_figures(
            model, tokenizer, prompts, args.new_tokens, args.repeats, cuda, not args.no_compile
        )
    report = {
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "weights": weights,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "model_load_s": load_s,
        "suite_run": played,
        "decode_profile": {
            "prompts": len(prompts),
            "prompt_tokens": sum(map(len, prompts)),
            "new_tokens": args.new_tokens,
            "baseline": args.baseline if old is not None else f"unavailable (git show {args.baseline} failed)",
            **profile,
        },
        "transformers_generate": generated,
        "trainer": {"skipped": "--no-trainer"} if args.no_trainer else trainer_figures(device, args.quick),
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    run = report["suite_run"]
    print(f"{report['device']}, {weights}, {report['threads']} threads, load {report['load_average']}")
    print(f"model load {load_s:.1f} s")
    print(
        f"{run['suite']}: {run['seconds']:.1f} s for {run['episodes']} episodes, {run['calls']} calls "
        f"(mean batch {run['mean_batch']:.1f}); tokens/s per call: median {run['tokens_per_s_per_call_median']:.0f}, "
        f"mean {run['tokens_per_s_per_call_mean']:.0f}"
    )
    print(f"decode step ({len(prompts)} rows):  {'wall ms':>8} {'forward ms':>10} {'outside':>8} {'tok/s':>8}")
    for name in ("before", "after"):
        if name in profile:
            row = profile[name]
            print(
                f"  {name:24} {row['step_ms']:8.1f} {row['forward_ms']:10.1f} "
                f"{100 * row['outside_forward_share']:7.0f}% {row['decode_tokens_per_s']:8.0f}"
            )
    if "skipped" not in generated:
        print(f"transformers' generate (greedy, {len(prompts)} rows):  {'decode tok/s':>12} {'same tokens':>11}")
        for name, row in generated.items():
            rate = row["decode_tokens_per_s"]
            same = row.get("same_tokens_as_dynamic", "-")
            print(f"  {name:24} {rate if rate is None else round(rate):>12} {same!s:>11}")
    trainer = report["trainer"]
    print("trainer:", trainer.get("skipped") or trainer.get("failed") or json.dumps(trainer)[:400])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
