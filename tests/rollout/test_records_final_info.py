"""What an episode record keeps of the last step's info (records.keep_final_info): SWE's model_patch."""

from __future__ import annotations

import json

import numpy as np

from envgym.rollout.records import FINAL_INFO_KEYS, Trajectory, episode_record, keep_final_info


def _trajectory() -> Trajectory:
    return Trajectory(episode_id="000000", index=0, env_id="envgym/SWE-v0", seed=0, agent="oracle")


def test_the_final_info_keys_are_kept_and_nothing_else() -> None:
    traj = _trajectory()
    keep_final_info(traj, {"model_patch": "diff --git a/x b/x\n", "grading": {"resolved": True}, "turn": np.int64(3)})
    assert "model_patch" in FINAL_INFO_KEYS
    assert traj.extra == {"model_patch": "diff --git a/x b/x\n"}
    back = Trajectory.from_dict(json.loads(json.dumps(traj.to_dict())))
    assert back.extra["model_patch"] == "diff --git a/x b/x\n"
    keep_final_info(traj, None)  # an env without an info dict leaves the record as it was
    assert traj.extra == {"model_patch": "diff --git a/x b/x\n"}


def test_the_episode_record_shows_the_patch_cut_like_the_other_texts() -> None:
    traj = _trajectory()
    assert "model_patch" not in episode_record(traj)  # records of other envs are unchanged
    keep_final_info(traj, {"model_patch": "+" * 50})
    assert episode_record(traj)["model_patch"] == "+" * 50
    assert episode_record(traj, text_cap=10)["model_patch"] == "+" * 10 + "\u2026 [40 more characters cut]"
