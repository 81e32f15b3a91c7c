"""The one function-calling dialect of envgym (docs/tools.md): parse calls, validate arguments, build schemas.

A tool call is JSON text in the shape of OpenAI function calling::

    {"name": "execute_sql", "arguments": {"query": "SELECT 1"}}

and an env that allows several calls per turn takes a JSON array of them. An env lists its tools
as OpenAI function schemas in ``info["tools"]`` (:func:`tool_schemas`, :func:`function_schema`).
:func:`parse_tool_calls` turns the action text into :class:`ToolCall` values, or raises
:class:`ToolCallError` whose message is written for the model
(``Tool error (execute_sql): arguments: missing required argument(s) ['query'].``): an env turns it
into an invalid step whose observation is that message.

**Hostile text.** The action text is refused before it is parsed when it is longer than
:data:`MAX_CALL_CHARS` characters or nests arrays/objects deeper than :data:`MAX_DEPTH`; an array
holds at most :data:`MAX_CALLS` calls. JSON's non-standard ``NaN``/``Infinity`` and numbers that
overflow to infinity are refused, and so is an object with a duplicate key (which of two values a
model meant is a guess; the call is refused rather than guessed).

**The schema subset** :func:`validate_arguments` checks: ``type`` (a name or a list of names among
string, integer, number, boolean, array, object, null), ``properties``, ``required``,
``additionalProperties`` (``false``, ``true`` or a schema), ``enum``, ``items``,
``minimum``/``maximum``, ``minLength``/``maxLength``, ``minItems``/``maxItems`` (other keywords,
such as ``pattern`` or ``anyOf``, are passed on to the model but not checked). One deliberate
difference from JSON Schema: an object schema that lists ``properties`` refuses other keys unless
``additionalProperties`` says otherwise (tools are strict, as OpenAI's strict mode is; the schemas
envgym emits say ``"additionalProperties": false`` explicitly, so a JSON-Schema validator agrees).

**The old dialects** (``legacy=True``): ``{"tool": NAME, "arguments": {...}}`` and
``{"tool": NAME, ...fields}`` parse to the same :class:`ToolCall`, with :attr:`ToolCall.deprecation`
saying what to write instead (the env puts it in ``info["deprecation"]``).

Stdlib only (layer 2: it imports :mod:`envgym.errors` and nothing else of envgym).
"""

from __future__ import annotations

import inspect
import json
import math
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from envgym.errors import EnvgymError, InvalidKwargsError, suggest

__all__ = [
    "MAX_CALLS",
    "MAX_CALL_CHARS",
    "MAX_DEPTH",
    "ToolCall",
    "ToolCallError",
    "deprecation_note",
    "function_schema",
    "loads_strict",
    "looks_like_tool_call",
    "parse_tool_calls",
    "strict_parameters",
    "tool_calls_from",
    "tool_error",
    "tool_names",
    "tool_result",
    "tool_schemas",
    "tools_card",
    "validate_arguments",
]

#: Longest action text parsed as tool calls (characters); longer text is refused unread.
MAX_CALL_CHARS = 200_000
#: Deepest nesting of arrays and objects accepted in a call (the call array and object count).
MAX_DEPTH = 32
#: Most calls in one turn (a JSON array).
MAX_CALLS = 16
#: Longest tool name accepted (OpenAI's limit).
MAX_NAME_CHARS = 64

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list, tuple),
    "object": (dict,),
    "null": (type(None),),
}
#: Keys of a plain call besides name/arguments that are accepted and ignored (OpenAI's call id).
_CALL_EXTRAS = frozenset({"id", "type"})


class ToolCallError(EnvgymError, ValueError):
    """A tool call that cannot run: not JSON, an unknown tool, arguments that break the schema.

    ``str(err)`` is the message for the model: ``Tool error (NAME): DETAIL`` (``Tool error: DETAIL``
    when no tool is named). ``tool`` is the tool's name (``None`` when unknown) and ``detail`` the
    message without the prefix (``arguments.query: expected string, got int 3.``).
    """

    def __init__(self, detail: str, *, tool: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.tool = tool

    def __str__(self) -> str:
        return tool_error(self.tool, self.detail)

    def __reduce__(self) -> tuple[Any, ...]:  # keep the tool across processes (worker pools pickle errors)
        return (_rebuild_error, (self.detail, self.tool))


def _rebuild_error(detail: str, tool: str | None) -> ToolCallError:
    return ToolCallError(detail, tool=tool)


@dataclass(frozen=True)
class ToolCall:
    """One call of a tool: its name and its arguments (a JSON object).

    ``deprecation`` is set when the call was written in an old dialect (what to write instead); it
    takes no part in equality, so an old-dialect call equals the same call in the new one.
    """

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    deprecation: str | None = field(default=None, compare=False)

    def as_dict(self) -> dict[str, Any]:
        """The call in the dialect: ``{"name": ..., "arguments": {...}}``."""
        return {"name": self.name, "arguments": dict(self.arguments)}

    def to_json(self) -> str:
        """The call as action text."""
        return json.dumps(self.as_dict(), ensure_ascii=False)


# ---------------------------------------------------------------------------------------- messages
def tool_error(name: str | None, detail: str) -> str:
    """The error of a call as the model reads it: ``Tool error (NAME): DETAIL``."""
    return f"Tool error ({name}): {detail}" if name else f"Tool error: {detail}"


def tool_result(name: str, content: Any) -> str:
    """The result of a call as the model reads it: ``Tool result (NAME): CONTENT`` (JSON unless text)."""
    if not isinstance(content, str):
        content = json.dumps(content, sort_keys=True, ensure_ascii=False)
    return f"Tool result ({name}): {content}"


def deprecation_note(call: ToolCall) -> str:
    """What to write instead of an old-dialect call (the argument names, not their values)."""
    keys = ", ".join(f'"{k}": ...' for k in call.arguments)
    return (
        '{"tool": ...} calls are deprecated and will be refused in the next release; write '
        f'{{"name": "{call.name}", "arguments": {{{keys}}}}} instead (docs/tools.md).'
    )


# ---------------------------------------------------------------------------------------- JSON
def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed: numbers must be finite")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:20]} is out of range")
    return value


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key[:40]!r} in an object")
        out[key] = value
    return out


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


def _depth(text: str) -> int:
    """Deepest nesting of ``[``/``{`` in JSON text (brackets inside strings ignored)."""
    depth = deepest = 0
    for match in _BRACKET.finditer(_STRING.sub("", text)):
        if match.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


_DECODER = json.JSONDecoder(
    parse_constant=_refuse_constant, parse_float=_finite_float, object_pairs_hook=_no_duplicates
)


def loads_strict(text: str, *, max_chars: int = MAX_CALL_CHARS, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` for text from strangers: size and depth checked first; NaN, infinities and
    duplicate keys refused. Raises :class:`ToolCallError` (no tool named) on any problem."""
    if len(text) > max_chars:
        raise ToolCallError(f"the call is {len(text)} characters long; at most {max_chars} are accepted.")
    # Fewer opening brackets than the limit cannot nest deeper: the scan is for the rare rest.
    if text.count("[") + text.count("{") > max_depth and _depth(text) > max_depth:
        raise ToolCallError(f"the call nests arrays/objects more than {max_depth} deep.")
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError as err:
        raise ToolCallError(f"not valid JSON ({err.msg} at character {err.pos}).") from None
    except (ValueError, RecursionError) as err:
        raise ToolCallError(f"not valid JSON ({err}).") from None


def looks_like_tool_call(text: str) -> bool:
    """Text that an env reads as tool calls: it starts with ``{`` or ``[`` (after whitespace)."""
    return text.lstrip()[:1] in ("{", "[")


# ---------------------------------------------------------------------------------------- validation
def _kinds(schema: Mapping[str, Any]) -> tuple[str, ...]:
    kind = schema.get("type")
    if kind is None:
        return ()
    return (kind,) if isinstance(kind, str) else tuple(kind)


def _type_ok(value: Any, kind: str) -> bool:
    if isinstance(value, bool) and kind in ("integer", "number"):
        return False
    return isinstance(value, _TYPES[kind])


def _check_value(value: Any, schema: Mapping[str, Any], where: str) -> None:
    kinds = _kinds(schema)
    if kinds and not any(_type_ok(value, k) for k in kinds):
        expected = " or ".join(kinds)
        if isinstance(value, bool) and ("integer" in kinds or "number" in kinds):
            raise ToolCallError(f"{where}: expected {expected}, got a boolean {value!r}.")
        raise ToolCallError(f"{where}: expected {expected}, got {type(value).__name__} {value!r:.60}.")
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolCallError(f"{where}: expected a finite number, got {value!r}.")
    if "enum" in schema and value not in schema["enum"]:
        choices = ", ".join(repr(c) for c in schema["enum"])
        raise ToolCallError(f"{where}: expected one of {choices}, got {value!r:.60}.")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            raise ToolCallError(f"{where}: expected at least {schema['minimum']}, got {value!r}.")
        if "maximum" in schema and value > schema["maximum"]:
            raise ToolCallError(f"{where}: expected at most {schema['maximum']}, got {value!r}.")
    elif isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            raise ToolCallError(f"{where}: expected at least {schema['minLength']} character(s), got {len(value)}.")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            raise ToolCallError(f"{where}: expected at most {schema['maxLength']} characters, got {len(value)}.")
    elif isinstance(value, (list, tuple)):
        if "minItems" in schema and len(value) < schema["minItems"]:
            raise ToolCallError(f"{where}: expected at least {schema['minItems']} item(s), got {len(value)}.")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            raise ToolCallError(f"{where}: expected at most {schema['maxItems']} items, got {len(value)}.")
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                _check_value(item, items, f"{where}[{i}]")
    elif isinstance(value, Mapping) and any(k in schema for k in ("properties", "required", "additionalProperties")):
        _check_object(schema, value, where)


def _check_object(schema: Mapping[str, Any], arguments: Mapping[str, Any], where: str) -> None:
    properties: Mapping[str, Any] = schema.get("properties", {})
    extra = schema.get("additionalProperties", False)
    if extra is False:
        unknown = sorted(set(arguments) - set(properties))
        if unknown:
            hint = suggest(unknown[0], properties) if len(unknown) == 1 else ""
            raise ToolCallError(
                f"{where}: unknown argument(s) {unknown}; expected {sorted(properties) or 'none'}.{hint}"
            )
    missing = [name for name in schema.get("required", ()) if name not in arguments]
    if missing:
        raise ToolCallError(f"{where}: missing required argument(s) {missing}.")
    for name, value in arguments.items():
        sub = properties.get(name)
        if sub is None:
            sub = extra if isinstance(extra, Mapping) else {}
        _check_value(value, sub, f"{where}.{name}")


def validate_arguments(schema: Mapping[str, Any], arguments: Any, *, where: str = "arguments") -> dict[str, Any]:
    """Check ``arguments`` against an ``object`` JSON schema (the subset in the module docstring).

    Returns a copy of ``arguments`` as a dict; raises :class:`ToolCallError` (no tool named; its
    ``detail`` starts with ``where``) at the first problem.
    """
    if not isinstance(arguments, Mapping):
        raise ToolCallError(f"{where}: expected a JSON object, got {type(arguments).__name__} {arguments!r:.60}.")
    _check_object(schema, arguments, where)
    return dict(arguments)


# ---------------------------------------------------------------------------------------- schemas
def strict_parameters(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a parameters schema with ``"additionalProperties": false`` on every object that
    lists ``properties`` and does not say (what :func:`validate_arguments` enforces anyway)."""

    def walk(node: Any) -> Any:  # schema positions only: a property named "properties" is not a keyword
        if not isinstance(node, Mapping):
            return node
        out = dict(node)
        if isinstance(out.get("properties"), Mapping):
            out["properties"] = {k: walk(v) for k, v in out["properties"].items()}
            out.setdefault("additionalProperties", False)
        for key in ("items", "additionalProperties"):
            if isinstance(out.get(key), Mapping):
                out[key] = walk(out[key])
        for key in ("anyOf", "oneOf", "allOf"):
            if isinstance(out.get(key), list):
                out[key] = [walk(v) for v in out[key]]
        return out

    out = walk(dict(schema))
    out.setdefault("type", "object")
    out.setdefault("properties", {})
    if "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def _as_function(entry: Any) -> dict[str, Any]:
    if callable(entry) and not isinstance(entry, Mapping):
        return function_schema(entry)
    if not isinstance(entry, Mapping):
        raise InvalidKwargsError(f"a tool is a function or an OpenAI function schema, got {entry!r:.80}.")
    spec = entry.get("function", entry) if entry.get("type", "function") == "function" else None
    if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str):
        raise InvalidKwargsError(
            'a tool schema is {"type": "function", "function": {"name": ..., "description": ..., '
            f'"parameters": {{...}}}}, got {entry!r:.120}.'
        )
    name = spec["name"]
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
        raise InvalidKwargsError(f"a tool name is 1-64 letters, digits, '_' or '-', got {name!r}.")
    params = spec.get("parameters") or {"type": "object", "properties": {}}
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": str(spec.get("description", "")),
            "parameters": strict_parameters(params),
        },
    }


def tool_schemas(tools: Iterable[Any]) -> list[dict[str, Any]]:
    """OpenAI function schemas of ``tools``: typed functions (see :func:`function_schema`), OpenAI
    function schemas, or bare ``{"name", "description", "parameters"}`` dicts; names must be unique.

    Build it once per env and hand out the same list in every ``info["tools"]`` (do not mutate it).
    """
    out = [_as_function(t) for t in tools]
    names = [s["function"]["name"] for s in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InvalidKwargsError(f"tool names must be unique, got {dupes} more than once.")
    return out


def _type_text(schema: Mapping[str, Any]) -> str:
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    kinds = list(_kinds(schema)) or ["any"]
    if "items" in schema and isinstance(schema["items"], Mapping):
        kinds = [f"array[{_type_text(schema['items'])}]" if k == "array" else k for k in kinds]
    return " | ".join(kinds)


def tools_card(tools: Iterable[Mapping[str, Any]], *, title: str = "Tools") -> str:
    """An env card section listing function schemas: ``**Tools.**`` then one bullet per tool with
    its signature (``?`` marks an optional argument) and description."""
    lines = [f'**{title}.** In ``info["tools"]`` as OpenAI function schemas (docs/tools.md):', ""]
    for schema in tools:
        spec = schema.get("function", schema)
        params = spec.get("parameters") or {}
        required = set(params.get("required", ()))
        args = ", ".join(
            f"{name}{'' if name in required else '?'}: {_type_text(sub)}"
            for name, sub in (params.get("properties") or {}).items()
        )
        description = " ".join(str(spec.get("description", "")).split())
        lines.append(f"* ``{spec['name']}({args})``: {description}".rstrip(": "))
    return "\n".join(lines)


def tool_names(tools: Iterable[Mapping[str, Any]]) -> list[str]:
    """The names of OpenAI function schemas, in order."""
    return [s["function"]["name"] if "function" in s else s["name"] for s in tools]


def _index(tools: Any) -> Mapping[str, Mapping[str, Any]]:
    """``name -> parameters schema`` from a mapping of that (used as is: the fast path for an env
    that builds it once), or a list of function schemas."""
    if isinstance(tools, Mapping):
        return tools
    out: dict[str, Mapping[str, Any]] = {}
    for schema in tools:
        spec = schema.get("function", schema)
        out[spec["name"]] = spec.get("parameters") or {"type": "object", "properties": {}}
    return out


_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")
_SECTIONS = ("args:", "arguments:", "parameters:", "returns:", "return:", "raises:", "yields:", "examples:", "example:")


def _docstring(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """(description, {argument: description}) from a Google-style docstring."""
    doc = inspect.getdoc(fn) or ""
    lines = doc.splitlines()
    description: list[str] = []
    args: dict[str, str] = {}
    section = None
    current: str | None = None
    base_indent = 0
    for line in lines:
        stripped = line.strip()
        if stripped.lower() in _SECTIONS:
            section = stripped.lower().rstrip(":")
            current = None
            continue
        if section is None:
            if not stripped and description:
                section = "body"  # the first paragraph is the description
            elif stripped:
                description.append(stripped)
            continue
        if section in ("args", "arguments", "parameters"):
            if not stripped:
                continue
            indent = len(line) - len(line.lstrip())
            match = _ARG_LINE.match(stripped)
            if match and (current is None or indent <= base_indent):
                current, base_indent = match.group(1).lstrip("*"), indent
                args[current] = match.group(3).strip()
            elif current is not None:
                args[current] = f"{args[current]} {stripped}".strip()
    return " ".join(description), args


def _type_schema(hint: Any, where: str) -> tuple[dict[str, Any], bool]:
    """(JSON schema of a type hint, whether it admits None)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        nullable = len(members) < len(typing.get_args(hint))
        if len(members) != 1:
            raise InvalidKwargsError(f"{where}: unions other than Optional[X] are not supported, got {hint!r}.")
        schema, _ = _type_schema(members[0], where)
        if nullable:
            kind = schema.get("type")
            if isinstance(kind, str):
                schema["type"] = [kind, "null"]
            if "enum" in schema:
                schema["enum"] = [*schema["enum"], None]
        return schema, nullable
    if origin is Literal:
        values = list(typing.get_args(hint))
        kinds = sorted({_LITERAL_KIND[type(v)] for v in values if type(v) in _LITERAL_KIND})
        if len(kinds) != 1 or not all(type(v) in _LITERAL_KIND for v in values):
            raise InvalidKwargsError(f"{where}: Literal values must all be str, int, float or bool, got {hint!r}.")
        return {"type": kinds[0], "enum": values}, False
    if hint in _SIMPLE:
        return {"type": _SIMPLE[hint]}, False
    if origin in (list, Sequence, tuple) or hint in (list, tuple):
        args = typing.get_args(hint)
        schema: dict[str, Any] = {"type": "array"}
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            raise InvalidKwargsError(f"{where}: use list[X] or tuple[X, ...], got {hint!r}.")
        if args:
            schema["items"], _ = _type_schema(args[0], where + "[]")
        return schema, False
    if hint is dict or origin in (dict, Mapping):
        args = typing.get_args(hint)
        if args and args[0] is not str:
            raise InvalidKwargsError(f"{where}: JSON object keys are strings, got {hint!r}.")
        schema = {"type": "object"}
        if len(args) == 2 and args[1] is not Any:
            schema["additionalProperties"], _ = _type_schema(args[1], where + "{}")
        return schema, False
    raise InvalidKwargsError(
        f"{where}: the type {hint!r} has no JSON schema here; use str, int, float, bool, list[X], dict, "
        "Literal[...] or Optional[X]."
    )


_SIMPLE: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
_LITERAL_KIND: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def function_schema(
    fn: Callable[..., Any], *, name: str | None = None, description: str | None = None
) -> dict[str, Any]:
    """The OpenAI function schema of a typed Python function with a Google-style docstring.

    The first paragraph of the docstring is the description and its ``Args:`` section describes
    the parameters; every parameter needs a type hint (str, int, float, bool, list[X], dict,
    Literal[...], Optional[X]); parameters without a default are required. ``name`` and
    ``description`` override the function's.

    >>> def execute_sql(query: str, limit: int = 50) -> str:
    ...     '''Run one read-only SQL query.
    ...
    ...     Args:
    ...         query: the SQL text.
    ...         limit: most rows returned.
    ...     '''
    >>> function_schema(execute_sql)["function"]["parameters"]["required"]
    ['query']
    """
    label = name or getattr(fn, "__name__", "tool")
    try:
        hints = typing.get_type_hints(fn)
    except Exception as err:
        raise InvalidKwargsError(f"cannot read the type hints of {label!r}: {err}") from err
    summary, docs = _docstring(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in inspect.signature(fn).parameters.values():
        if param.name in ("self", "cls"):
            continue
        where = f"{label}({param.name})"
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise InvalidKwargsError(f"{where}: *args and **kwargs cannot be described by a schema.")
        if param.name not in hints:
            raise InvalidKwargsError(f"{where}: the parameter needs a type hint.")
        schema, _ = _type_schema(hints[param.name], where)
        if docs.get(param.name):
            schema["description"] = docs[param.name]
        if param.default is param.empty:
            required.append(param.name)
        elif param.default is not None and isinstance(param.default, (str, int, float, bool)):
            schema["default"] = param.default
        properties[param.name] = schema
    parameters = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    return _as_function({"name": label, "description": description or summary, "parameters": parameters})


# ---------------------------------------------------------------------------------------- parsing
def _one_call(item: Any, index: Mapping[str, Mapping[str, Any]], *, legacy: bool, where: str) -> ToolCall:
    if not isinstance(item, dict):
        raise ToolCallError(
            f'{where}: expected a JSON object {{"name": ..., "arguments": {{...}}}}, got {type(item).__name__}.'
        )
    deprecation = False
    if "function" in item and "name" not in item and isinstance(item["function"], dict):
        # OpenAI's tool_calls entry: {"id": ..., "type": "function", "function": {"name", "arguments"}}
        extra = sorted(set(item) - _CALL_EXTRAS - {"function"})
        if extra:
            raise ToolCallError(f"{where}: a tool call has keys name and arguments, got also {extra}.")
        item = item["function"]
    if "name" in item:
        name, arguments = item["name"], item.get("arguments", {})
        extra = sorted(set(item) - _CALL_EXTRAS - {"name", "arguments"})
        if extra:
            raise ToolCallError(f"{where}: a tool call has keys name and arguments, got also {extra}.")
    elif legacy and "tool" in item:
        deprecation = True
        name = item["tool"]
        if set(item) <= {"tool", "arguments"}:
            arguments = item.get("arguments", {})
        else:
            arguments = {k: v for k, v in item.items() if k != "tool"}
    else:
        raise ToolCallError(f'{where}: a tool call is {{"name": ..., "arguments": {{...}}}}; "name" is missing.')
    if not isinstance(name, str) or not name or len(name) > MAX_NAME_CHARS:
        raise ToolCallError(f"{where}.name: expected a tool name, got {name!r:.60}.")
    if name not in index:
        tools = ", ".join(sorted(index)) or "none"
        raise ToolCallError(f"unknown tool {name!r}; tools: {tools}.{suggest(name, index)}")
    if isinstance(arguments, str):  # OpenAI's API sends arguments as a JSON string
        try:
            arguments = loads_strict(arguments) if arguments.strip() else {}
        except ToolCallError as err:
            raise ToolCallError(f"arguments: {err.detail}", tool=name) from None
    try:
        arguments = validate_arguments(index[name], arguments, where="arguments")
    except ToolCallError as err:
        raise ToolCallError(err.detail, tool=name) from None
    call = ToolCall(name, arguments)
    if deprecation:
        call = ToolCall(name, arguments, deprecation_note(call))
    return call


def parse_tool_calls(
    text: str,
    tools: Mapping[str, Mapping[str, Any]] | Sequence[Mapping[str, Any]],
    *,
    parallel: bool = False,
    legacy: bool = False,
) -> list[ToolCall]:
    """The tool calls written in ``text`` (one, or several where ``parallel``), validated.

    Args:
        text: the action: ``{"name": ..., "arguments": {...}}`` or, when ``parallel``, a JSON array
            of such objects (OpenAI's ``{"type": "function", "function": {...}}`` entries and
            arguments given as a JSON string are read too).
        tools: ``info["tools"]`` (OpenAI function schemas) or ``{name: parameters schema}``.
        parallel: accept a JSON array of up to :data:`MAX_CALLS` calls.
        legacy: accept the old ``{"tool": ...}`` dialects (the calls carry a ``deprecation`` note).

    Raises:
        ToolCallError: the text is not a valid call of these tools; nothing of it should run (one
            bad call in an array refuses the whole turn).
    """
    if not isinstance(text, str):
        raise ToolCallError(f"expected the tool call as JSON text, got {type(text).__name__}.")
    return tool_calls_from(loads_strict(text.strip()), tools, parallel=parallel, legacy=legacy)


def tool_calls_from(
    data: Any,
    tools: Mapping[str, Mapping[str, Any]] | Sequence[Mapping[str, Any]],
    *,
    parallel: bool = False,
    legacy: bool = False,
) -> list[ToolCall]:
    """:func:`parse_tool_calls` on JSON already decoded (by :func:`loads_strict`: the bounds are its)."""
    index = _index(tools)
    if isinstance(data, list):
        if not parallel:
            raise ToolCallError(
                'this environment takes one tool call per turn: send one {"name": ..., "arguments": {...}} object.'
            )
        if not data:
            raise ToolCallError("the array of tool calls is empty.")
        if len(data) > MAX_CALLS:
            raise ToolCallError(f"{len(data)} tool calls in one turn; at most {MAX_CALLS} are accepted.")
        return [_one_call(item, index, legacy=legacy, where=f"call {i}") for i, item in enumerate(data)]
    return [_one_call(data, index, legacy=legacy, where="the call")]
