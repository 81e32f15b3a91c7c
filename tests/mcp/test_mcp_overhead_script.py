"""benchmarks/perf/mcp_overhead.py runs end to end (a few calls per row; no timing asserts)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "perf" / "mcp_overhead.py"


@pytest.mark.slow
def test_overhead_script_reports_every_row() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--calls", "3", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["calls"] == 3
    assert list(report["rows"]) == ["direct", "sdk stdio", "envgym stdio", "sdk http", "envgym http"]
    for name, row in report["rows"].items():
        assert 0 <= row["p50_ms"] <= row["p99_ms"], name
        assert row["overhead_p50_ms"] == pytest.approx(row["p50_ms"] - report["rows"]["direct"]["p50_ms"])
