"""The agent calls of a finished run, read back from its records: how many, how big, how fast.

Every turn record carries ``agent_s``, the wall time of the batched agent call that produced it
(shared by every episode of that call), and ``completion_tokens``. Turns are grouped into calls
by the ``(agent_s, turn index)`` they share (episodes of one lock-step call have the same turn index
unless they started at different times, so a call can split into a few groups: the call count is
then an upper bound and its batch sizes a lower bound). Reported per run folder:

* **calls**, **mean batch** (episodes per call) and **max batch**;
* **agent s**: the summed wall time of the calls (time the run spent waiting on the agent);
* **tokens/s per call**: completion tokens of a call divided by its wall time, as the median and
  the token-weighted mean over calls (the mean is total tokens / total agent time);
* **episodes**, **turns** and **completion tokens**.

A bench run folder (``entries/<name>/episodes.jsonl``) is read as one run; a plain run folder
(``episodes.jsonl``) too. Usage::

    python benchmarks/perf/agent_calls.py runs/main/core-v1/hf-smollm2
    python benchmarks/perf/agent_calls.py RUN_A RUN_B --json

It measures and reports; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any


def episode_files(folder: Path) -> list[Path]:
    files = sorted(folder.glob("entries/*/episodes.jsonl"))
    if (folder / "episodes.jsonl").exists():
        files.append(folder / "episodes.jsonl")
    return files


def call_stats(folder: Path) -> dict[str, Any]:
    """The figures above for one run folder (bench or plain)."""
    calls: dict[tuple[float, int], list[int]] = defaultdict(list)
    episodes = turns = 0
    for file in episode_files(folder):
        for line in file.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            record = json.loads(line)
            episodes += 1
            for turn in record.get("turns") or []:
                turns += 1
                seconds = turn.get("agent_s")
                if seconds is None:
                    continue
                calls[(float(seconds), int(turn.get("index", 0)))].append(int(turn.get("completion_tokens") or 0))
    rates = [sum(tokens) / seconds for (seconds, _), tokens in calls.items() if seconds > 0]
    batches = [len(tokens) for tokens in calls.values()]
    agent_s = sum(seconds for seconds, _ in calls)
    tokens = sum(sum(t) for t in calls.values())
    return {
        "folder": str(folder),
        "episodes": episodes,
        "turns": turns,
        "calls": len(calls),
        "mean_batch": statistics.fmean(batches) if batches else 0.0,
        "max_batch": max(batches, default=0),
        "agent_s": agent_s,
        "completion_tokens": tokens,
        "tokens_per_s_median": statistics.median(rates) if rates else 0.0,
        "tokens_per_s_mean": tokens / agent_s if agent_s > 0 else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="run folders or bench run folders")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    missing = [str(f) for f in args.folders if not episode_files(f)]
    if missing:
        print(f"no episodes.jsonl under {', '.join(missing)}", file=sys.stderr)
        return 2
    rows = [call_stats(folder) for folder in args.folders]
    if args.json:
        print(json.dumps({"runs": rows}, indent=2))
        return 0
    header = f"{'run':40} {'episodes':>8} {'turns':>6} {'calls':>6} {'batch':>6} {'max':>4} {'agent s':>8} "
    header += f"{'tokens':>7} {'tok/s med':>9} {'tok/s':>7}"
    print(header)
    for row in rows:
        print(
            f"{row['folder'][-40:]:40} {row['episodes']:8d} {row['turns']:6d} {row['calls']:6d} "
            f"{row['mean_batch']:6.1f} {row['max_batch']:4d} {row['agent_s']:8.1f} {row['completion_tokens']:7d} "
            f"{row['tokens_per_s_median']:9.1f} {row['tokens_per_s_mean']:7.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
