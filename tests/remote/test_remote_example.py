"""examples/remote_rollouts.py --smoke: a server started as a subprocess, oracle episodes played
remotely, the same records as in process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # starts `envgym serve` in a subprocess (a few seconds of imports)
def test_example_smoke_runs() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "remote_rollouts.py"), "--smoke"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["episodes"] == 4 and result["infra_errors"] == {}
    assert result["records_match_inproc"] is True
    assert result["success_rate"] == 1.0  # the oracle solves every board, through the server too
    assert result["url"].startswith("http://127.0.0.1:")
    assert set(result["by_hand"]["reward_components"]) == {
        "success_reward",
        "box_on_target_reward",
        "invalid_action_reward",
        "step_cost_reward",
    }
