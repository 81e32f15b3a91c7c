"""``envgym play`` on a driving id: the actions keep highway-env's numbers (v1), so a typed number
means one action all episode long, whichever actions the lane leaves available."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from envgym.cli import app

pytest.importorskip("highway_env", reason="the driving family needs `pip install 'envgym[driving]'`")

from envgym.environments.driving.scene import describe_actions, parse_meta_action

from envgym.core import InvalidAction

FIXED = {"LANE_LEFT": 0, "IDLE": 1, "LANE_RIGHT": 2, "FASTER": 3, "SLOWER": 4}


def test_fixed_numbers_name_one_action_whatever_is_available() -> None:
    edge = ["IDLE", "LANE_RIGHT", "FASTER", "SLOWER"]  # in the left lane: no LANE_LEFT
    middle = ["LANE_LEFT", "IDLE", "LANE_RIGHT", "FASTER", "SLOWER"]
    assert parse_meta_action("2", edge, tuple(FIXED), FIXED) == "LANE_RIGHT"
    assert parse_meta_action("2", middle, tuple(FIXED), FIXED) == "LANE_RIGHT"
    assert describe_actions(edge, FIXED).splitlines()[1:3] == [
        "1. IDLE - keep your lane and your target speed",
        "2. LANE_RIGHT - change to the lane on your right",
    ]
    with pytest.raises(InvalidAction, match=r"0 \(LANE_LEFT\) is not available now; available: 1 IDLE, 2 LANE_RIGHT"):
        parse_meta_action("0", edge, tuple(FIXED), FIXED)
    with pytest.raises(InvalidAction, match="there is no action number 9"):
        parse_meta_action("9", edge, tuple(FIXED), FIXED)
    # v0 numbers each turn's list from 1: "2" is LANE_RIGHT at the edge and IDLE in the middle.
    assert parse_meta_action("2", edge, tuple(FIXED)) == "LANE_RIGHT"
    assert parse_meta_action("2", middle, tuple(FIXED)) == "IDLE"


def test_play_sends_the_number_the_observation_shows() -> None:
    # Seed 0 starts in the left lane of three: "2" twice is LANE_RIGHT twice, to the right lane.
    result = CliRunner().invoke(app, ["play", "envgym/Drive-Highway-v1", "--seed", "0"], input="2\n2\n")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.count("You chose LANE_RIGHT.") == 2 and "[invalid action]" not in out
    assert re.search(r"You are in lane 3 of 3", out)
    # The middle lane's list shows every action with its fixed number; play's own menu is #N.
    assert "0. LANE_LEFT - " in out and "2. LANE_RIGHT - " in out and "5. " not in out
    assert "Actions: #1 LANE_LEFT  #2 IDLE  #3 LANE_RIGHT" in out
