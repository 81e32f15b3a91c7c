"""envgym.tools: the one function-calling dialect (docs/tools.md): parsing, validation, schemas, hostile text."""

from __future__ import annotations

import json
from typing import Any, Literal, Optional

import jsonschema
import pytest

from envgym.errors import InvalidKwargsError
from envgym.tools import (
    MAX_CALL_CHARS,
    MAX_CALLS,
    MAX_DEPTH,
    ToolCall,
    ToolCallError,
    function_schema,
    loads_strict,
    looks_like_tool_call,
    parse_tool_calls,
    strict_parameters,
    tool_error,
    tool_names,
    tool_result,
    tool_schemas,
    validate_arguments,
)


def execute_sql(query: str, limit: int = 50) -> str:
    """Run one read-only SQL query on the database.

    Returns up to ``limit`` rows.

    Args:
        query: the SQL text, one statement
            (SELECT or WITH).
        limit (int): most rows returned.

    Returns:
        The rows as text.
    """
    return query


def search(
    query: str,
    field: Literal["title", "body"] = "body",
    tags: list[str] | None = None,
    weights: Optional[dict[str, float]] = None,  # noqa: UP045 - Optional[X] is a supported spelling
    exact: bool = False,
    threshold: float = 0.5,
) -> list[str]:
    """Search the encyclopedia.

    Args:
        query: words to look for.
        field: where to look.
    """
    return []


TOOLS = tool_schemas([execute_sql, search])


def _error(text: str, **kwargs: Any) -> ToolCallError:
    with pytest.raises(ToolCallError) as caught:
        parse_tool_calls(text, TOOLS, **kwargs)
    return caught.value


# --------------------------------------------------------------------------- schemas
def test_function_schema_reads_the_types_defaults_and_the_google_docstring() -> None:
    schema = function_schema(execute_sql)
    assert schema == {
        "type": "function",
        "function": {
            "name": "execute_sql",
            "description": "Run one read-only SQL query on the database.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "the SQL text, one statement (SELECT or WITH)."},
                    "limit": {"type": "integer", "description": "most rows returned.", "default": 50},
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        },
    }


def test_function_schema_maps_literal_optional_list_and_dict() -> None:
    props = function_schema(search)["function"]["parameters"]["properties"]
    assert props["field"] == {
        "type": "string",
        "enum": ["title", "body"],
        "description": "where to look.",
        "default": "body",
    }
    assert props["tags"] == {"type": ["array", "null"], "items": {"type": "string"}}
    assert props["weights"] == {"type": ["object", "null"], "additionalProperties": {"type": "number"}}
    assert props["exact"] == {"type": "boolean", "default": False}
    assert props["threshold"] == {"type": "number", "default": 0.5}
    assert function_schema(search)["function"]["parameters"]["required"] == ["query"]


def test_every_emitted_schema_is_valid_json_schema_and_agrees_with_the_validator() -> None:
    for schema in TOOLS:
        params = schema["function"]["parameters"]
        jsonschema.Draft202012Validator.check_schema(params)
        validator = jsonschema.Draft202012Validator(params)
        good = {"query": "x"}
        assert validator.is_valid(good) and validate_arguments(params, good) == good
        for bad in ({}, {"query": 3}, {"query": "x", "extra": 1}):
            assert not validator.is_valid(bad)
            with pytest.raises(ToolCallError):
                validate_arguments(params, bad)


def _untyped(x):  # type: ignore[no-untyped-def]
    pass


def _a_set(x: set[int]) -> None:
    pass


def _a_union(x: int | str) -> None:
    pass


def _star(*x: int) -> None:
    pass


def _mixed_literal(x: Literal["a", 1]) -> None:
    pass


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (_untyped, "needs a type hint"),
        (_a_set, "has no JSON schema"),
        (_a_union, "unions other than Optional"),
        (_star, r"\*args and \*\*kwargs"),
        (_mixed_literal, "Literal values"),
    ],
)
def test_function_schema_refuses_what_json_schema_cannot_say(fn: Any, message: str) -> None:
    with pytest.raises(InvalidKwargsError, match=message) as caught:
        function_schema(fn)
    assert f"{fn.__name__}(x)" in str(caught.value)


def test_tool_schemas_takes_function_schemas_and_bare_dicts_and_refuses_duplicates() -> None:
    bare = {"name": "submit", "description": "Submit.", "parameters": {"type": "object", "properties": {"x": {}}}}
    [out] = tool_schemas([bare])
    assert out["type"] == "function"
    assert out["function"]["parameters"]["additionalProperties"] is False
    assert tool_schemas([out]) == [out]
    assert tool_names(tool_schemas([execute_sql, bare])) == ["execute_sql", "submit"]
    with pytest.raises(InvalidKwargsError, match=r"unique, got \['execute_sql'\]"):
        tool_schemas([execute_sql, execute_sql])
    with pytest.raises(InvalidKwargsError, match="tool name is 1-64"):
        tool_schemas([{"name": "bad name!", "parameters": {}}])


def test_strict_parameters_closes_every_object_that_lists_properties() -> None:
    params = {"properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}}}}
    strict = strict_parameters(params)
    assert strict["type"] == "object" and strict["additionalProperties"] is False
    assert strict["properties"]["a"]["additionalProperties"] is False
    assert "additionalProperties" not in params["properties"]["a"]  # a copy
    # a parameter named like a keyword stays a parameter
    named = strict_parameters({"properties": {"properties": {"type": "string"}, "items": {"type": "integer"}}})
    assert named["properties"] == {"properties": {"type": "string"}, "items": {"type": "integer"}}
    nested = strict_parameters({"properties": {"xs": {"type": "array", "items": {"properties": {"k": {}}}}}})
    assert nested["properties"]["xs"]["items"]["additionalProperties"] is False


# --------------------------------------------------------------------------- parsing
def test_a_call_in_the_dialect_parses_to_a_toolcall() -> None:
    calls = parse_tool_calls('  {"name": "execute_sql", "arguments": {"query": "SELECT 1"}}\n', TOOLS)
    assert calls == [ToolCall("execute_sql", {"query": "SELECT 1"})]
    assert calls[0].deprecation is None
    assert json.loads(calls[0].to_json()) == {"name": "execute_sql", "arguments": {"query": "SELECT 1"}}
    assert parse_tool_calls('{"name": "search", "arguments": {"query": "a", "tags": null}}', TOOLS)[0].arguments == {
        "query": "a",
        "tags": None,
    }


def test_openai_shapes_are_read_too() -> None:
    wire = {"id": "call_1", "type": "function", "function": {"name": "execute_sql", "arguments": '{"query": "q"}'}}
    assert parse_tool_calls(json.dumps(wire), TOOLS) == [ToolCall("execute_sql", {"query": "q"})]
    assert parse_tool_calls('{"name": "search", "arguments": ""}', {"search": {"type": "object"}}) == [
        ToolCall("search", {})
    ]
    error = _error('{"name": "execute_sql", "arguments": "{not json"}')
    assert error.tool == "execute_sql" and str(error).startswith("Tool error (execute_sql): arguments: not valid JSON")


def test_arguments_that_break_the_schema_are_errors_phrased_for_the_model() -> None:
    assert str(_error('{"name": "execute_sql", "arguments": {}}')) == (
        "Tool error (execute_sql): arguments: missing required argument(s) ['query']."
    )
    assert str(_error('{"name": "execute_sql", "arguments": {"query": 3}}')) == (
        "Tool error (execute_sql): arguments.query: expected string, got int 3."
    )
    assert str(_error('{"name": "execute_sql", "arguments": {"query": "q", "limit": true}}')) == (
        "Tool error (execute_sql): arguments.limit: expected integer, got a boolean True."
    )
    assert str(_error('{"name": "search", "arguments": {"query": "q", "field": "titel"}}')) == (
        "Tool error (search): arguments.field: expected one of 'title', 'body', got 'titel'."
    )
    assert str(_error('{"name": "search", "arguments": {"query": "q", "tags": ["a", 2]}}')) == (
        "Tool error (search): arguments.tags[1]: expected string, got int 2."
    )
    error = _error('{"name": "execute_sql", "arguments": {"query": "q", "limt": 1}}')
    assert error.detail == "arguments: unknown argument(s) ['limt']; expected ['limit', 'query']. Did you mean 'limit'?"
    assert str(_error('{"name": "execute_sql", "arguments": [1]}')) == (
        "Tool error (execute_sql): arguments: expected a JSON object, got list [1]."
    )


def test_the_error_pickles_with_its_tool() -> None:
    import pickle

    error = pickle.loads(pickle.dumps(_error('{"name": "execute_sql", "arguments": {}}')))
    assert error.tool == "execute_sql" and str(error).startswith("Tool error (execute_sql): arguments: missing")


def test_an_unknown_tool_gets_did_you_mean() -> None:
    error = _error('{"name": "exec_sql", "arguments": {"query": "q"}}')
    assert error.tool is None
    assert str(error) == "Tool error: unknown tool 'exec_sql'; tools: execute_sql, search. Did you mean 'execute_sql'?"


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ("not json", "not valid JSON"),
        ('{"arguments": {}}', '"name" is missing'),
        ('{"name": 3}', "the call.name: expected a tool name, got 3"),
        ('{"name": "search", "arguments": {"query": "q"}, "extra": 1}', "got also ['extra']"),
        ('"a string"', "expected a JSON object"),
        ('{"tool": "search", "query": "q"}', '"name" is missing'),  # old dialect, not allowed here
    ],
)
def test_malformed_calls_are_errors_not_crashes(text: str, detail: str) -> None:
    assert detail in _error(text).detail


def test_several_calls_per_turn_only_where_allowed_and_all_or_nothing() -> None:
    two = '[{"name": "execute_sql", "arguments": {"query": "a"}}, {"name": "search", "arguments": {"query": "b"}}]'
    assert [c.name for c in parse_tool_calls(two, TOOLS, parallel=True)] == ["execute_sql", "search"]
    assert "one tool call per turn" in _error(two).detail
    bad_second = '[{"name": "execute_sql", "arguments": {"query": "a"}}, {"name": "search", "arguments": {}}]'
    assert str(_error(bad_second, parallel=True)).startswith("Tool error (search): arguments: missing")
    assert "empty" in _error("[]", parallel=True).detail
    many = json.dumps([{"name": "search", "arguments": {"query": "q"}}] * (MAX_CALLS + 1))
    assert f"at most {MAX_CALLS}" in _error(many, parallel=True).detail
    assert _error("[1]", parallel=True).detail.startswith("call 0: expected a JSON object")


def test_old_dialects_parse_to_the_same_call_with_a_deprecation_note() -> None:
    new = parse_tool_calls('{"name": "search", "arguments": {"query": "q", "field": "title"}}', TOOLS)
    fields = parse_tool_calls('{"tool": "search", "query": "q", "field": "title"}', TOOLS, legacy=True)
    nested = parse_tool_calls('{"tool": "search", "arguments": {"query": "q", "field": "title"}}', TOOLS, legacy=True)
    assert new == fields == nested
    note = fields[0].deprecation
    assert note is not None and note == nested[0].deprecation
    assert '{"name": "search", "arguments": {"query": ..., "field": ...}}' in note and "next release" in note
    # The new dialect wins when both keys are there, so a legacy env still reads new calls plainly.
    assert (
        parse_tool_calls('{"name": "search", "arguments": {"query": "q"}}', TOOLS, legacy=True)[0].deprecation is None
    )


# --------------------------------------------------------------------------- hostile text
def test_size_and_depth_are_refused_before_parsing() -> None:
    long = '{"name": "execute_sql", "arguments": {"query": "' + "x" * MAX_CALL_CHARS + '"}}'
    assert f"at most {MAX_CALL_CHARS}" in _error(long).detail
    deep = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)
    assert f"more than {MAX_DEPTH} deep" in _error(deep, parallel=True).detail
    # 100k nested arrays would blow the parser's recursion: refused by the scan, cheaply
    assert "deep" in _error("[" * 100_000).detail
    # brackets inside strings do not count
    quoted = '{"name": "execute_sql", "arguments": {"query": "' + "[{" * 100 + '"}}'
    assert parse_tool_calls(quoted, TOOLS)[0].arguments["query"] == "[{" * 100


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "search", "arguments": {"query": "q", "threshold": NaN}}',
        '{"name": "search", "arguments": {"query": "q", "threshold": Infinity}}',
        '{"name": "search", "arguments": {"query": "q", "threshold": -Infinity}}',
        '{"name": "search", "arguments": {"query": "q", "threshold": 1e999}}',
        '{"name": "search", "arguments": {"query": "q", "query": "r"}}',
        '{"name": "search", "name": "execute_sql", "arguments": {"query": "q"}}',
        '{"name": "search", "arguments": {"query": "q", "threshold": ' + "9" * 5000 + "}}",
    ],
)
def test_non_finite_numbers_duplicate_keys_and_huge_ints_are_refused(text: str) -> None:
    assert _error(text).detail.startswith("not valid JSON")


def test_loads_strict_is_the_bounded_json_reader() -> None:
    assert loads_strict('{"a": [1, 2.5, null]}') == {"a": [1, 2.5, None]}
    with pytest.raises(ToolCallError, match="at most 10"):
        loads_strict("[" + "1," * 10 + "1]", max_chars=10)
    with pytest.raises(ToolCallError, match="deep"):
        loads_strict("[[[1]]]", max_depth=2)
    with pytest.raises(ToolCallError):
        parse_tool_calls(b'{"name": "search"}', TOOLS)  # type: ignore[arg-type]


def test_validator_keywords_beyond_types() -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 1, "maximum": 3},
            "s": {"type": "string", "minLength": 2, "maxLength": 3},
            "xs": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "number"}},
            "o": {"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]},
            "m": {"type": "object", "additionalProperties": {"type": "integer"}},
            "free": {"type": "object", "properties": {}, "additionalProperties": True},
        },
    }
    ok = {"n": 2, "s": "ab", "xs": [1.5], "o": {"k": "v"}, "m": {"a": 1}, "free": {"any": [1]}}
    assert validate_arguments(schema, ok) == ok
    cases = [
        ({"n": 0}, "arguments.n: expected at least 1, got 0."),
        ({"n": 4}, "arguments.n: expected at most 3, got 4."),
        ({"s": "a"}, "arguments.s: expected at least 2 character(s), got 1."),
        ({"s": "abcd"}, "arguments.s: expected at most 3 characters, got 4."),
        ({"xs": []}, "arguments.xs: expected at least 1 item(s), got 0."),
        ({"xs": [1, 2, 3]}, "arguments.xs: expected at most 2 items, got 3."),
        ({"o": {}}, "arguments.o: missing required argument(s) ['k']."),
        ({"o": {"k": "v", "z": 1}}, "arguments.o: unknown argument(s) ['z']; expected ['k']."),
        ({"m": {"a": "1"}}, "arguments.m.a: expected integer, got str '1'."),
        ({"n": 1.0}, "arguments.n: expected integer, got float 1.0."),
    ]
    for arguments, message in cases:
        with pytest.raises(ToolCallError) as caught:
            validate_arguments(schema, arguments)
        assert caught.value.detail == message
        assert str(caught.value) == f"Tool error: {message}"


def test_results_and_errors_read_as_the_tools_words() -> None:
    assert tool_result("execute_sql", [{"b": 1, "a": "é"}]) == 'Tool result (execute_sql): [{"a": "é", "b": 1}]'
    assert tool_result("view", "text") == "Tool result (view): text"
    assert tool_error("view", "no file") == "Tool error (view): no file"
    assert looks_like_tool_call('  {"name": "x"}') and looks_like_tool_call("[") and not looks_like_tool_call("hello {")
