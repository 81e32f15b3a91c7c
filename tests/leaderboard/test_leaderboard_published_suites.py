"""The published baselines of the family suites (``leaderboards/<suite>/`` other than core-v1,
which ``test_leaderboard_published`` covers with its site): each suite publishes its oracle and
random bundles (``ENVGYM_SUITE=<suite> bash scripts/publish_baselines.sh``), each verifies by replay
against the installed suite (a replayed reward that differs from the recorded one rejects the
bundle), and the oracle outscores random.

The suite replays a spot check: the first episodes of every entry of every bundle (every check
that reads a bundle still covers all of it; an environment whose episodes drift fails on its first
seed as well as on its tenth). ``ENVGYM_TEST_FULL_REPLAY=1`` replays every episode, as the
leaderboard and ``scripts/publish_baselines.sh`` do (about 5 CPU minutes for these suites)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy")

ROOT = Path(__file__).resolve().parents[2]
SUITES = sorted(p.name for p in (ROOT / "leaderboards").iterdir() if p.is_dir() and p.name not in ("core-v1", "site"))

#: Suites whose episodes end at a horizon, never by success (coopetition's mixed-motive games:
#: every agent's success is false): the oracle is told apart from random by its mean reward.
NO_SUCCESS = {"coopetition-v1"}

#: Episodes replayed per entry (the first ones of each): enough for the oracle to outscore random
#: on every suite (gui-v1 has 62 entries of 2 seeds; coopetition-v1 350 episodes per entry).
SPOT_CHECK = {"gui-v1": 1}
SPOT_CHECK_DEFAULT = 3

VERIFY = """
import json, sys
from envgym.leaderboard.verify import VerifyConfig, verify_bundle
per_entry = json.loads(sys.argv[1])
out = {}
for path in sys.argv[2:]:
    verified = verify_bundle(path, VerifyConfig(episodes_per_entry=per_entry))
    out[path] = {"agent": verified.bundle.manifest["agent"]["spec"], "scores": verified.scores.to_dict()}
print(json.dumps(out))
"""


def test_the_family_suites_with_an_oracle_publish_their_baselines() -> None:
    assert "webshop-v1" in SUITES
    assert "driving-v1" in SUITES
    assert "coopetition-v1" in SUITES
    assert "swe-v1" in SUITES
    assert "service-v1" in SUITES
    assert "gui-v1" in SUITES


@pytest.mark.slow
@pytest.mark.parametrize("suite_id", SUITES)
def test_a_suites_published_bundles_verify_by_replay(suite_id: str) -> None:
    from envgym.bench.suite import load_suite
    from envgym.leaderboard.bundle import read_bundle

    bundles = sorted((ROOT / "leaderboards" / suite_id).glob("*.envgym.jsonl.gz"))
    suite = load_suite(suite_id, check_envs=False)
    agents = set()
    for path in bundles:
        manifest = read_bundle(path).manifest
        agents.add(manifest["agent"]["spec"])
        assert manifest["suite"]["sha256"] == suite.sha256  # made with the suite as installed
        assert path.name.endswith(f"_{manifest['agent']['spec'].replace(':', '-')}.envgym.jsonl.gz")
    assert {"oracle", "random"} <= agents
    env = {k: v for k, v in os.environ.items() if k != "ENVGYM_BENCHMARKS"}  # the installed suites decide
    full = os.environ.get("ENVGYM_TEST_FULL_REPLAY", "") not in ("", "0")
    per_entry = None if full else SPOT_CHECK.get(suite_id, SPOT_CHECK_DEFAULT)
    done = subprocess.run(
        [sys.executable, "-c", VERIFY, json.dumps(per_entry), *map(str, bundles)],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    replayed = {r["agent"]: r["scores"] for r in json.loads(done.stdout).values()}
    if suite_id in NO_SUCCESS:
        assert replayed["oracle"]["success_rate"] == replayed["random"]["success_rate"] == 0.0
    else:
        assert replayed["oracle"]["success_rate"] > replayed["random"]["success_rate"]
    assert replayed["oracle"]["mean_reward"] > replayed["random"]["mean_reward"]
