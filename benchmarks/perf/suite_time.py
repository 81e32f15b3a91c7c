"""Where the test suite's time goes: a run's JUnit XML (and per-test CPU seconds) summed up.

Run the suite as CI does, writing JUnit XML, and (optionally) each test's CPU seconds with the
``suite_cpu`` plugin of this folder::

    PYTHONPATH=benchmarks/perf/plugins ENVGYM_SUITE_CPU_DIR=/tmp/cpu \\
        bash scripts/test.sh -p suite_cpu --junitxml=/tmp/run.xml
    python benchmarks/perf/suite_time.py /tmp/run.xml --cpu /tmp/cpu
    python benchmarks/perf/suite_time.py /tmp/run.xml --before /tmp/older.xml   # the 20 slowest, before and after

It prints the run (tests, outcomes, pytest's wall time, the summed test seconds and their ratio
to the wall time: how many workers were busy on average), the files that took longest (the
contract checks of ``tests/test_all_envs.py`` split by environment family), the slowest tests,
and with ``--cpu`` the CPU seconds (the test's process, the children it reaped and its live
descendants such as browsers: a floor, see ``plugins/suite_cpu.py``) per file and the tests that mostly
wait (wall time far above CPU time). With ``--before`` each file and each of the slowest tests
(of either run) shows both runs. ``--json`` prints one JSON document instead of tables.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path
from typing import Any

#: The contract checks of every registered id: one row per environment family in the file table.
_ALL_ENVS = "tests/test_all_envs.py"
_FAMILY = re.compile(r"\[(?:[a-z]+:)?(?:[\w.-]+/)?([A-Za-z]+)")


def _module_path(classname: str) -> tuple[str, list[str]]:
    """``tests.rollout.test_runner.TestX`` -> (``tests/rollout/test_runner.py``, ``["TestX"]``)."""
    parts = classname.split(".")
    for i, part in enumerate(parts):
        if part.startswith("test_") or part == "conftest":
            return "/".join(parts[: i + 1]) + ".py", parts[i + 1 :]
    return "/".join(parts) + ".py", []


def read_junit(path: str | Path) -> dict[str, Any]:
    """The tests of one JUnit XML file: ``{"wall": s, "tests": [{"id", "file", "seconds", "outcome"}]}``."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as err:
        raise SystemExit(f"cannot read JUnit XML {path}: {err}") from None
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    if not suites:
        raise SystemExit(f"{path}: no <testsuite> element (is it pytest's --junitxml output?)")
    tests = []
    for case in root.iter("testcase"):
        file, classes = _module_path(case.get("classname", ""))
        name = case.get("name", "").split("@", 1)[0]  # xdist's loadgroup suffix
        node = "::".join([file, *classes, name])  # pytest's node id
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            if case.find(tag) is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
        tests.append({"id": node, "file": file, "seconds": float(case.get("time") or 0.0), "outcome": outcome})
    return {"wall": sum(float(s.get("time") or 0.0) for s in suites), "tests": tests}


def group_of(test: dict[str, Any]) -> str:
    """The file of a test, with the contract checks split by environment family."""
    if test["file"] == _ALL_ENVS:
        match = _FAMILY.search(test["id"])
        if match:
            return f"{_ALL_ENVS} [{match.group(1)}]"
    return test["file"]


def read_cpu(folder: str | Path) -> dict[str, dict[str, float]]:
    """Per test id (as :func:`read_junit` names them), the ``suite_cpu`` plugin's figures."""
    rows: dict[str, dict[str, float]] = {}
    files = sorted(Path(folder).glob("*.jsonl"))
    if not files:
        raise SystemExit(f"no *.jsonl in {folder} (run the suite with -p suite_cpu, see --help)")
    for file in files:
        for line in file.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            node = row["id"].split("@", 1)[0]
            cpu = row["self"] + row["children"] + max(0.0, row["live"])
            rows[node] = {"wall": row["wall"], "cpu": cpu}
    return rows


def summarise(run: dict[str, Any], *, top: int, cpu: dict[str, dict[str, float]] | None = None) -> dict[str, Any]:
    tests = run["tests"]
    outcomes: dict[str, int] = defaultdict(int)
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for test in tests:
        outcomes[test["outcome"]] += 1
        row = files[group_of(test)]
        row[0] += test["seconds"]
        row[1] += 1
    summed = sum(t["seconds"] for t in tests)
    report: dict[str, Any] = {
        "tests": len(tests),
        "outcomes": dict(sorted(outcomes.items())),
        "wall_s": round(run["wall"], 1),
        "summed_s": round(summed, 1),
        "busy_workers": round(summed / run["wall"], 2) if run["wall"] else None,
        "files": [
            {"file": name, "seconds": round(s, 1), "tests": n}
            for name, (s, n) in sorted(files.items(), key=lambda kv: -kv[1][0])[:top]
        ],
        "slowest": [
            {"id": t["id"], "seconds": round(t["seconds"], 2)} for t in sorted(tests, key=lambda t: -t["seconds"])[:top]
        ],
    }
    if cpu is not None:
        by_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        matched = []
        for test in tests:
            seen = cpu.get(test["id"])
            if seen is None:
                continue
            matched.append((test, seen))
            row = by_file[group_of(test)]
            row[0] += seen["cpu"]
            row[1] += test["seconds"]
        report["cpu"] = {
            "tests_measured": len(matched),
            "cpu_s": round(sum(seen["cpu"] for _, seen in matched), 1),
            "files": [
                {"file": name, "cpu_s": round(c, 1), "seconds": round(s, 1)}
                for name, (c, s) in sorted(by_file.items(), key=lambda kv: -kv[1][0])[:top]
            ],
            "waiting": [
                {"id": t["id"], "seconds": round(t["seconds"], 2), "cpu_s": round(seen["cpu"], 2)}
                for t, seen in sorted(matched, key=lambda ts: -(ts[0]["seconds"] - ts[1]["cpu"]))[:top]
            ],
        }
    return report


def compare(before: dict[str, Any], after: dict[str, Any], *, top: int) -> dict[str, Any]:
    """Files and slowest tests of either run, with both runs' seconds (None where a run lacks it)."""

    def per(run: dict[str, Any], key: Any) -> dict[str, float]:
        out: dict[str, float] = defaultdict(float)
        for test in run["tests"]:
            out[key(test)] += test["seconds"]
        return out

    files_b, files_a = per(before, group_of), per(after, group_of)
    tests_b, tests_a = per(before, lambda t: t["id"]), per(after, lambda t: t["id"])

    def rows(b: dict[str, float], a: dict[str, float], label: str) -> list[dict[str, Any]]:
        names = sorted(b, key=lambda n: -b[n])[:top]
        names += [n for n in sorted(a, key=lambda n: -a[n])[:top] if n not in names]
        names.sort(key=lambda n: -max(b.get(n, 0.0), a.get(n, 0.0)))
        return [
            {label: n, "before_s": round(b[n], 2) if n in b else None, "after_s": round(a[n], 2) if n in a else None}
            for n in names
        ]

    return {
        "before": {
            "tests": len(before["tests"]),
            "wall_s": round(before["wall"], 1),
            "summed_s": round(sum(tests_b.values()), 1),
        },
        "after": {
            "tests": len(after["tests"]),
            "wall_s": round(after["wall"], 1),
            "summed_s": round(sum(tests_a.values()), 1),
        },
        "files": rows(files_b, files_a, "file"),
        "slowest": rows(tests_b, tests_a, "id"),
    }


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _table(title: str, rows: list[dict[str, Any]], line: Any) -> None:
    print(f"\n{title}")
    for row in rows:
        print(line(row))


def print_tables(report: dict[str, Any], comparison: dict[str, Any] | None) -> None:
    print(
        f"{report['tests']} tests {report['outcomes']}; pytest wall {report['wall_s']:.0f} s, "
        f"test seconds summed {report['summed_s']:.0f} s ({report['busy_workers']} workers busy on average)"
    )
    if comparison is None:
        _table("files (seconds, tests)", report["files"], lambda r: f"{r['seconds']:9.1f} {r['tests']:5d}  {r['file']}")
        _table("slowest tests (seconds)", report["slowest"], lambda r: f"{r['seconds']:9.2f}  {r['id']}")
    else:
        b, a = comparison["before"], comparison["after"]
        print(
            f"before: {b['tests']} tests, wall {b['wall_s']:.0f} s, summed {b['summed_s']:.0f} s; "
            f"after: {a['tests']} tests, wall {a['wall_s']:.0f} s, summed {a['summed_s']:.0f} s"
        )
        for title, table, key in (("files", "files", "file"), ("slowest tests", "slowest", "id")):
            _table(
                f"{title} (before -> after, seconds)",
                comparison[table],
                lambda r, key=key: f"{_fmt(r['before_s']):>9} -> {_fmt(r['after_s']):>7}  {r[key]}",
            )
    cpu = report.get("cpu")
    if cpu:
        print(f"\nCPU seconds (a floor): {cpu['cpu_s']:.0f} s over {cpu['tests_measured']} tests")
        _table("files (CPU s, wall s)", cpu["files"], lambda r: f"{r['cpu_s']:9.1f} {r['seconds']:8.1f}  {r['file']}")
        _table(
            "tests that mostly wait (wall s, CPU s)",
            cpu["waiting"],
            lambda r: f"{r['seconds']:9.2f} {r['cpu_s']:8.2f}  {r['id']}",
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("junit", help="pytest's --junitxml output of the run")
    parser.add_argument("--before", help="an earlier run's JUnit XML: files and slowest tests side by side")
    parser.add_argument("--cpu", help="the suite_cpu plugin's folder (ENVGYM_SUITE_CPU_DIR) for the run")
    parser.add_argument("--top", type=int, default=20, help="rows per table (default 20)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    if args.top < 1:
        parser.error("--top must be >= 1")
    run = read_junit(args.junit)
    report = summarise(run, top=args.top, cpu=read_cpu(args.cpu) if args.cpu else None)
    comparison = compare(read_junit(args.before), run, top=args.top) if args.before else None
    if args.json:
        print(json.dumps({**report, "compare": comparison}, indent=1))
    else:
        print_tables(report, comparison)
    return 0


if __name__ == "__main__":
    sys.exit(main())
