"""What every agent running a language model's tokenizer shares: prompt ids, stop tokens and strings, seeds.

The ``hf`` agent (:class:`envgym.agents.hf.HFAgent`) and the trainer's vLLM agent
(:class:`envgym.trainer.vllm_generation.VLLMAgent`) must feed a model the same prompt ids, end
replies on the same tokens and strings, and seed each turn from the same parts; this module is
the one place those rules live, so the two cannot drift apart:

* :func:`chat_prompt_ids`: a turn's messages through the tokenizer's chat template, assistant
  turn opened (or plain paragraphs for a model without a template); :func:`chat_system_text`:
  the system turn alone, rendered the same way (the prefix a KV cache may keep);
* :func:`stop_token_ids`: the EOS ids of the generation config and tokenizer plus the chat
  end-of-turn tokens (:data:`CHAT_STOP_TOKENS`) the vocabulary has;
* :func:`stop_strings`: an input's ``stop`` strings, checked, empty ones dropped;
* :func:`mix_seed` and :func:`turn_seed`: a 63-bit seed per (agent seed, episode seed, group
  member, turn), stable across processes and Python versions.

Nothing here imports torch or transformers: the tokenizer and model come from the caller.
"""

from __future__ import annotations

import hashlib
import zlib
from typing import Any

from envgym.errors import ConfigError
from envgym.rollout.agent import AgentInput
from envgym.rollout.toolcalls import tool_chat_template, tool_messages, tools_of

__all__ = [
    "CHAT_STOP_TOKENS",
    "chat_prompt_ids",
    "chat_prompt_text",
    "chat_system_text",
    "mix_seed",
    "stop_strings",
    "stop_token_ids",
    "turn_seed",
]

#: Chat end-of-turn tokens that end a reply when the vocabulary has them.
CHAT_STOP_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>")


def chat_prompt_text(tokenizer: Any, item: AgentInput) -> str | None:
    """The prompt text of ``item`` through the tokenizer's chat template, assistant turn opened, or
    ``None`` for a tokenizer without a template.

    When the env has tools (``info["tools"]``) they are rendered too, with the template that shows
    them (:func:`envgym.rollout.toolcalls.tool_chat_template`: the tokenizer's own, else TRL's
    Qwen3 template), and the turns that called tools are rendered as tool calls and tool results
    (:func:`envgym.rollout.toolcalls.tool_messages`; the model's replies stay word for word).
    """
    messages = [dict(m) for m in item.messages] or [{"role": "user", "content": item.observation}]
    return _render(tokenizer, messages, item.info, opened=True)


def chat_system_text(tokenizer: Any, item: AgentInput) -> str | None:
    """The system turn of ``item`` alone, rendered as :func:`chat_prompt_text` renders the whole
    prompt (the same template, the env's tools too), or ``None`` where the first message is not a
    system message or the tokenizer has no template. Agents that cache a prompt's KV by its system
    turn use it: with tools, the template writes them into that turn, so the system message rendered
    without them would not spell the start of the prompt."""
    messages = [dict(m) for m in item.messages]
    if len(messages) < 2 or messages[0].get("role") != "system":
        return None
    return _render(tokenizer, messages[:1], item.info, opened=False)


def _render(tokenizer: Any, messages: list[dict[str, Any]], info: Any, *, opened: bool) -> str | None:
    """``messages`` through the chat template, with the env's tools where ``info`` has some (the
    template that shows them, tool turns as calls and results); the assistant turn ``opened`` or not."""
    tools = tools_of(info)
    template = tool_chat_template(tokenizer) if tools else None
    if template is not None:
        return tokenizer.apply_chat_template(
            tool_messages(messages, structured_calls=False),
            tools=tools,
            chat_template=template,
            add_generation_prompt=opened,
            tokenize=False,
        )
    if not getattr(tokenizer, "chat_template", None):
        return None
    return tokenizer.apply_chat_template(messages, add_generation_prompt=opened, tokenize=False)


def chat_prompt_ids(tokenizer: Any, item: AgentInput) -> list[int]:
    """The prompt token ids for ``item``: its messages (or its observation as one user message)
    through the tokenizer's chat template, with the assistant turn opened (tools rendered too
    where the env has them: :func:`chat_prompt_text`)."""
    messages = [dict(m) for m in item.messages] or [{"role": "user", "content": item.observation}]
    text = chat_prompt_text(tokenizer, item)
    if text is not None:
        # The template already writes every special token (BOS included where it wants one).
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    # A model without a chat template (a base model): plain text, one message per paragraph.
    text = "\n\n".join(m["content"] for m in messages) + "\n\n"
    return list(tokenizer(text)["input_ids"])


def stop_token_ids(model: Any, tokenizer: Any) -> set[int]:
    """EOS ids of ``model``'s generation config and of ``tokenizer``, plus the chat end-of-turn
    tokens of :data:`CHAT_STOP_TOKENS` that the vocabulary has."""
    ids: set[int] = set()
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for value in eos if isinstance(eos, list | tuple) else [eos]:
        if isinstance(value, int):
            ids.add(value)
    if isinstance(tokenizer.eos_token_id, int):
        ids.add(tokenizer.eos_token_id)
    # Each token looked up alone (its id, and the id's token the same string: the vocabulary has
    # it), not through ``get_vocab()``, which builds a 49k-entry dict (~60 ms) for every agent.
    for token in CHAT_STOP_TOKENS:
        try:
            found = tokenizer.convert_tokens_to_ids(token)
        except (KeyError, ValueError):
            continue
        if isinstance(found, int) and found >= 0 and tokenizer.convert_ids_to_tokens(found) == token:
            ids.add(found)
    return ids


def stop_strings(item: AgentInput) -> tuple[str, ...]:
    """``item.stop`` checked: a tuple of strings (empty ones dropped).

    Raises:
        ConfigError: ``stop`` is not a tuple or list of strings.
    """
    stop = item.stop
    if isinstance(stop, str) or not isinstance(stop, tuple | list) or not all(isinstance(s, str) for s in stop):
        raise ConfigError(
            f"AgentInput.stop must be a tuple of strings such as ('</action>',), got {stop!r} "
            f"(episode {item.episode_id!r})."
        )
    return tuple(s for s in stop if s)


def mix_seed(*parts: object) -> int:
    """A 63-bit seed from ``parts`` (stable across processes and Python versions, unlike ``hash``)."""
    digest = hashlib.blake2b(repr(parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def turn_seed(agent_seed: int, item: AgentInput, episode: tuple[int | None, int] | None) -> int:
    """The seed of ``item``'s turn: same agent seed, episode seed, group member and turn -> same seed.

    Args:
        agent_seed: the agent's own seed.
        item: the turn's input (its ``episode_id`` and ``turn``).
        episode: ``(episode seed, group member)`` from ``start_episode``; ``None`` (never
            started) or a ``None`` seed keys the episode by its id, so it is still reproducible.
    """
    seed, member = episode if episode is not None else (None, 0)
    episode_key: object = seed if seed is not None else ("id", zlib.crc32(item.episode_id.encode("utf-8")))
    return mix_seed(agent_seed, episode_key, member, item.turn)
