"""Native tool calls of chat agents: the ``<tool_call>`` markup, OpenAI tool messages, tool templates.

An env whose actions are tool calls (docs/tools.md) lists its tools in ``info["tools"]`` as
OpenAI function schemas, and takes an action ``{"name": ..., "arguments": {...}}`` (a JSON array
of them where ``info["parallel_tool_calls"]`` is true). Chat models call tools in their own way;
this module turns that into the env's action and back, the same for every agent:

* **The reply.** A model whose chat template knows tools writes each call as
  ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (the Hermes/Qwen format, which
  TRL's Qwen3 template teaches). An OpenAI-compatible server parses that itself and returns
  ``message.tool_calls``; the ``openai`` agent writes them back into its reply text in the same
  markup (with the call's ``id`` in the JSON), so one parser (:func:`find_tool_calls`, used by
  :meth:`~envgym.rollout.prompting.Conversation.parse`) reads both, and the reply text alone
  carries the whole call.
* **The history.** The prompting layer keeps plain user/assistant turns. For a server or a
  template that takes tool messages, :func:`tool_messages` rewrites them: an assistant turn that
  called tools gets ``tool_calls`` and the observation that answered it becomes ``role: "tool"``
  messages with the ``tool_call_id`` (:func:`tool_results`, which is also what a turn records).
* **The template.** :func:`tool_chat_template` is the chat template a tokenizer renders tools
  with: its own when it shows them, else TRL's Qwen3 template (SmolLM2, the bundled model, has
  none; it shares Qwen's ``<|im_start|>`` turns).

Nothing here imports torch or transformers.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "TOOL_CALL_CLOSE",
    "TOOL_CALL_OPEN",
    "ToolCall",
    "find_tool_calls",
    "render_tool_calls",
    "tool_action",
    "tool_chat_template",
    "tool_messages",
    "tool_results",
    "tools_of",
]

logger = logging.getLogger(__name__)

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
#: What a tool message says when an env answered several calls with one observation (it goes
#: with the first call); every call still needs its own tool message.
SHARED_RESULT = "(the result of this call is in the first tool message of this turn)"

#: ``{"id": str, "name": str, "arguments": dict}``: one call as records keep it.
ToolCall = dict[str, Any]

_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def tools_of(info: Any) -> list[dict[str, Any]]:
    """The env's tool schemas from ``info["tools"]`` (docs/tools.md), or ``[]`` when it has none
    (or something that is not a list of mappings)."""
    tools = info.get("tools") if isinstance(info, Mapping) else None
    if not isinstance(tools, list | tuple) or not all(isinstance(t, Mapping) for t in tools):
        return []
    return [dict(t) for t in tools]


def _call(data: Any) -> ToolCall | None:
    """``data`` as a call (``name`` a non-empty string, ``arguments`` an object or a JSON string of
    one, ``id`` kept when it is a string), or ``None``."""
    if not isinstance(data, Mapping):
        return None
    name = data.get("name")
    if not isinstance(name, str) or not name:
        return None
    arguments = data.get("arguments", {})
    if isinstance(arguments, str):  # OpenAI's wire form: the arguments as a JSON string
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return None
    if not isinstance(arguments, Mapping):
        return None
    call: ToolCall = {"id": data["id"] if isinstance(data.get("id"), str) else None}
    call.update(name=name, arguments=dict(arguments))
    return call


def find_tool_calls(text: str) -> tuple[list[ToolCall], list[str]]:
    """The calls written as ``<tool_call>JSON</tool_call>`` blocks in ``text``, in order.

    Returns:
        ``(calls, broken)``: each readable block as ``{"id", "name", "arguments"}`` (``id`` is
        ``None`` unless the JSON carries one), and the inner text of the blocks that are not a
        call (not JSON, no name, arguments not an object), stripped.
    """
    calls: list[ToolCall] = []
    broken: list[str] = []
    if TOOL_CALL_OPEN not in text:
        return calls, broken
    for block in _BLOCK.findall(text):
        inner = block.strip()
        try:
            call = _call(json.loads(inner))
        except ValueError:
            call = None
        if call is None:
            broken.append(inner)
        else:
            calls.append(call)
    return calls, broken


def render_tool_calls(calls: Sequence[Mapping[str, Any]]) -> str:
    """``calls`` in the ``<tool_call>`` markup, one block per call (the ``id`` kept in the JSON
    when there is one), joined by newlines."""
    blocks = []
    for call in calls:
        data: dict[str, Any] = {"name": call["name"], "arguments": call.get("arguments") or {}}
        if call.get("id"):
            data["id"] = call["id"]
        blocks.append(f"{TOOL_CALL_OPEN}\n{json.dumps(data, ensure_ascii=False)}\n{TOOL_CALL_CLOSE}")
    return "\n".join(blocks)


def tool_action(calls: Sequence[Mapping[str, Any]], *, parallel: bool) -> tuple[str, int]:
    """The env action for ``calls`` (docs/tools.md) and how many calls were left out.

    One call is one JSON object; several are a JSON array when the env runs several per turn
    (``parallel``), else the first alone (the others are left out and counted).
    """
    objects = [{"name": c["name"], "arguments": dict(c.get("arguments") or {})} for c in calls]
    if len(objects) == 1 or not parallel:
        return json.dumps(objects[0], ensure_ascii=False), len(objects) - 1
    return json.dumps(objects, ensure_ascii=False), 0


def tool_results(calls: Sequence[Mapping[str, Any]], observation: str, *, ok: bool = True) -> list[dict[str, Any]]:
    """The results of one turn's ``calls``: ``{"tool_call_id", "name", "content", "is_error"}`` each.

    An env answers a turn with one observation: it is the first call's content; the other calls
    of the turn point to it (:data:`SHARED_RESULT`). ``ok`` is ``info["action_valid"]``: an
    invalid call's observation is the tool's error.
    """
    return [
        {
            "tool_call_id": call.get("id"),
            "name": call["name"],
            "content": str(observation) if k == 0 else SHARED_RESULT,
            "is_error": not ok,
        }
        for k, call in enumerate(calls)
    ]


def tool_messages(messages: Sequence[Mapping[str, Any]], *, structured_calls: bool = True) -> list[dict[str, Any]]:
    """``messages`` (plain user/assistant turns from the prompting layer) with tool calls and their
    results as OpenAI tool messages.

    An assistant message whose text holds ``<tool_call>`` blocks is a turn that called tools: the
    user message after it (the env's answer) becomes one ``{"role": "tool", "tool_call_id", "content"}``
    message per call. With ``structured_calls`` (what an API server wants) the assistant message
    also gets ``tool_calls`` (``[{"id", "type": "function", "function": {"name", "arguments"}}]``,
    arguments as a JSON string) and its content loses the markup (``None`` when nothing else is
    left); without it (a local model: its own reply stays word for word) the content is kept as
    written. Calls without an ``id`` get ``call_<message index>_<k>``.
    """
    out: list[dict[str, Any]] = []
    pending: list[ToolCall] = []
    for index, message in enumerate(messages):
        message = dict(message)
        role = message.get("role")
        if role == "user" and pending:
            out.extend(
                {"role": "tool", "tool_call_id": result["tool_call_id"], "content": result["content"]}
                for result in tool_results(pending, str(message.get("content", "")))
            )
            pending = []
            continue
        pending = []
        if role == "assistant":
            calls, _ = find_tool_calls(str(message.get("content") or ""))
            for k, call in enumerate(calls):
                call["id"] = call["id"] or f"call_{index}_{k}"
            if calls and structured_calls:
                text = _BLOCK.sub("", str(message["content"])).strip()
                message["content"] = text or None
                message["tool_calls"] = [
                    {
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])},
                    }
                    for call in calls
                ]
            pending = calls
        out.append(message)
    return out


# -- chat templates -----------------------------------------------------------------------------

_TEMPLATES: weakref.WeakKeyDictionary[Any, tuple[str | None, str | None]] = weakref.WeakKeyDictionary()
_templates_lock = threading.Lock()
_PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "probe_tool_5e1c",
        "description": "probe",
        "parameters": {"type": "object", "properties": {}},
    },
}


def renders_tools(tokenizer: Any, template: str | None = None) -> bool:
    """Whether ``template`` (default: the tokenizer's own) shows the tools it is given and tool
    results: a conversation with a tool result rendered with and without a tool must differ, show
    the tool's name, and show the result (some templates drop ``role: "tool"`` messages)."""
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "calling"},
        {"role": "tool", "tool_call_id": "call_0", "content": "probe_result_9b2d"},
    ]
    try:
        with_tools = tokenizer.apply_chat_template(
            messages, tools=[_PROBE_TOOL], chat_template=template, add_generation_prompt=True, tokenize=False
        )
        without = tokenizer.apply_chat_template(
            messages, chat_template=template, add_generation_prompt=True, tokenize=False
        )
    except Exception as err:  # noqa: BLE001 - a template failing on tools (any jinja error) renders none
        logger.debug("the chat template fails with tools: %s", err)
        return False
    return with_tools != without and "probe_tool_5e1c" in with_tools and "probe_result_9b2d" in with_tools


def tool_chat_template(tokenizer: Any, *, force: bool = False) -> str | None:
    """The chat template ``tokenizer`` renders tools with.

    Its own template when that shows the tools it is given (rendered with and without them, see
    :func:`renders_tools`), unless ``force``; else TRL's Qwen3 template (read from the installed
    ``trl`` package: ``<|im_start|>`` turns, tools in the system turn, calls as
    ``<tool_call>`` blocks, results as ``<tool_response>`` blocks). ``None`` when the tokenizer has
    no template of its own and ``trl`` is not installed, or when neither renders tools. The answer
    is kept per tokenizer object (not for ``force``).
    """
    own = getattr(tokenizer, "chat_template", None)
    if not force:
        with _templates_lock:
            cached = _TEMPLATES.get(tokenizer)
        if cached is not None and cached[0] == own:
            return cached[1]
    found: str | None = own if own and not force and renders_tools(tokenizer) else None
    if found is None:
        try:
            from trl import chat_template_utils  # optional: only for tokenizers without tool support
        except ImportError:
            logger.warning(
                "envgym: the chat template of this tokenizer shows no tools and trl is not installed for its "
                "tool template (pip install 'envgym[integrations]', or trl alone); tools go unrendered."
            )
            chat_template_utils = None
        if chat_template_utils is not None and renders_tools(tokenizer, chat_template_utils.qwen3_chat_template):
            found = chat_template_utils.qwen3_chat_template
    if not force:
        try:
            with _templates_lock:
                _TEMPLATES[tokenizer] = (own, found)
        except TypeError:  # a tokenizer that cannot be weakly referenced: not cached
            pass
    return found
