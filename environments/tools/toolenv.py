"""What the tools family's text environments share: an action is one tool call in envgym's
function-calling dialect (docs/tools.md), read from the raw action text, and ``info["tools"]``
lists the tools on every reset and step.

:class:`ToolTextEnv` is a :class:`envgym.core.TextEnv` whose ``_parse`` reads the call with
:func:`envgym.tools.parse_tool_calls` from the action text *as sent* (the base class squeezes
whitespace, which would change code inside a call's arguments); a malformed call is an invalid
step whose message is the tool error (``Tool error (search): arguments: missing required
argument(s) ['query'].``). Subclasses list their tools in :meth:`ToolTextEnv.tool_functions`
(typed functions whose docstrings become the schemas) and run a parsed call in ``_apply``.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from envgym.core import InvalidAction, TextEnv
from envgym.tools import ToolCall, ToolCallError, parse_tool_calls, tool_schemas, tools_card

__all__ = ["ToolTextEnv", "call_text"]

_TAG = re.compile(r"<\s*action\s*>(.*?)(?:<\s*/\s*action\s*>|$)", re.IGNORECASE | re.DOTALL)
_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL)


def call_text(name: str, **arguments: Any) -> str:
    """The action text of one call: ``{"name": NAME, "arguments": {...}}``."""
    return ToolCall(name, arguments).to_json()


class ToolTextEnv(TextEnv):
    """A text env whose actions are tool calls (see the module docstring)."""

    _schemas: ClassVar[list[dict[str, Any]] | None] = None

    @classmethod
    def tool_functions(cls) -> list[Callable[..., Any]]:
        """Typed stand-ins of the tools, whose signatures and docstrings are the schemas."""
        raise NotImplementedError

    @classmethod
    def tools(cls) -> list[dict[str, Any]]:
        """The OpenAI function schemas of the env's tools (one list per class, shared: do not mutate)."""
        if cls.__dict__.get("_schemas") is None:
            cls._schemas = tool_schemas(cls.tool_functions())
        return cls._schemas  # type: ignore[return-value]

    @classmethod
    def env_card(cls, kwargs: Mapping[str, Any] | None = None) -> str:
        """The class docstring, then the tools as ``info["tools"]`` lists them."""
        return f"{inspect.getdoc(cls) or cls.__name__}\n\n{tools_card(cls.tools())}"

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if isinstance(action, str):
            self._raw = action
        elif isinstance(action, (bytes, bytearray)):
            self._raw = bytes(action).decode("utf-8", errors="replace")
        else:
            self._raw = ""
        return super().step(action)

    def _call_source(self) -> str:
        """The call as sent: the last ``<action>`` block or fenced block if any, else the whole text."""
        text = getattr(self, "_raw", "")
        tags = _TAG.findall(text)
        if tags:
            return tags[-1].strip()
        fences = _FENCE.findall(text)
        return (fences[-1] if fences else text).strip()

    def _parse(self, text: str) -> ToolCall:
        source = self._call_source()
        if not source:
            first = self.tools()[0]["function"]["name"]
            raise InvalidAction(f'expected one tool call as JSON, e.g. {{"name": "{first}", "arguments": {{...}}}}.')
        try:
            return parse_tool_calls(source, self.tools())[0]
        except ToolCallError as err:
            raise InvalidAction(str(err)) from None

    def _info(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        info = super()._info(*args, **kwargs)
        info["tools"] = self.tools()
        info["parallel_tool_calls"] = False
        return info

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_raw", None)
        return state
