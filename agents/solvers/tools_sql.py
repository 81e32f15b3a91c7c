"""Oracle solver for ``envgym/Tools-SQL-*``: parses the question, looks up the schema, writes the SQL.

It sees what any agent sees: the question in the observation and the tools' results. It knows
the question language (the sentence patterns below, in which tables and columns are named as
they are in the database) and learns the join columns from ``describe_table``. Before it
submits it runs its query once with ``execute_sql`` (an agent checking its work, which is what
``exploration_reward`` measures), so it uses one or two tool calls per question.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from envgym.rollout import Policy

__all__ = ["Solver", "build_query"]

_QUESTION = re.compile(r"^Question: (.+)$", re.MULTILINE)
_REFERENCE = re.compile(r"^\s+(\w+) \w+ REFERENCES (\w+)\(id\)", re.MULTILINE)
_V = r"'([^']*)'"

#: Sentence pattern -> (tables whose foreign keys are needed, query builder given the groups and
#: a foreign-key look-up ``fk(from_table, to_table)``).
_PATTERNS: list[tuple[re.Pattern[str], Callable[..., str]]] = []


def _pattern(regex: str) -> Callable[[Callable[..., str]], Callable[..., str]]:
    def register(build: Callable[..., str]) -> Callable[..., str]:
        _PATTERNS.append((re.compile(f"^{regex}$"), build))
        return build

    return register


@_pattern(rf"How many (\w+) have (\w+) {_V}\?")
def _count(fk: Any, t: str, c: str, v: str) -> str:
    return f"SELECT count(*) FROM {t} WHERE {c} = '{v}'"


@_pattern(rf"What is the highest (\w+) among (\w+) with (\w+) {_V}\?")
def _highest(fk: Any, a: str, t: str, c: str, v: str) -> str:
    return f"SELECT max({a}) FROM {t} WHERE {c} = '{v}'"


@_pattern(rf"List the name of the (\w+) with (\w+) {_V} and (\w+) (\d+), sorted by name\.")
def _names(fk: Any, t: str, c: str, v: str, c2: str, n: str) -> str:
    return f"SELECT name FROM {t} WHERE {c} = '{v}' AND {c2} = {n} ORDER BY name"


@_pattern(r"For each (\w+) of (\w+), how many \2 are there\? Give \1 and count\.")
def _per_group(fk: Any, c: str, t: str) -> str:
    return f"SELECT {c}, count(*) FROM {t} GROUP BY {c}"


@_pattern(rf"How many (\w+) with (\w+) {_V} belong to (\w+) with (\w+) {_V}\?")
def _join_count(fk: Any, e: str, c: str, v: str, p: str, c2: str, v2: str) -> str:
    return f"SELECT count(*) FROM {e} JOIN {p} ON {e}.{fk(e, p)} = {p}.id WHERE {e}.{c} = '{v}' AND {p}.{c2} = '{v2}'"


@_pattern(rf"What is the total (\w+) of (\w+) in (\w+) (\d+) for (\w+) with (\w+) {_V}\?")
def _join_sum(fk: Any, q: str, e: str, y: str, n: str, t: str, c: str, v: str) -> str:
    return f"SELECT sum({e}.{q}) FROM {e} JOIN {t} ON {e}.{fk(e, t)} = {t}.id WHERE {e}.{y} = {n} AND {t}.{c} = '{v}'"


@_pattern(
    rf"Which (\d+) (\w+) have the most (\w+) with (\w+) {_V}\? Give name and count, highest count first, ties by name\."
)
def _top(fk: Any, k: str, p: str, e: str, c: str, v: str) -> str:
    return (
        f"SELECT {p}.name, count(*) AS n FROM {e} JOIN {p} ON {e}.{fk(e, p)} = {p}.id WHERE {e}.{c} = '{v}' "
        f"GROUP BY {p}.id ORDER BY n DESC, {p}.name LIMIT {k}"
    )


@_pattern(rf"How many (\w+) with (\w+) {_V} have (\w+) above the average \4 of all \1\?")
def _above(fk: Any, t: str, c: str, v: str, a: str) -> str:
    return f"SELECT count(*) FROM {t} WHERE {c} = '{v}' AND {a} > (SELECT avg({a}) FROM {t})"


@_pattern(rf"How many (\w+) with (\w+) {_V} have no (\w+) in (\w+) (\d+)\?")
def _without(fk: Any, p: str, c: str, v: str, e: str, y: str, n: str) -> str:
    return f"SELECT count(*) FROM {p} WHERE {c} = '{v}' AND id NOT IN (SELECT {fk(e, p)} FROM {e} WHERE {y} = {n})"


def build_query(question: str, references: dict[str, dict[str, str]]) -> str | None:
    """The SQL for ``question``; ``references[table][to_table]`` is the column of ``table``
    referencing ``to_table``. Raises KeyError naming the table whose references are missing;
    returns None for a question outside the language."""

    def fk(table: str, to: str) -> str:
        return references[table][to]

    for pattern, build in _PATTERNS:
        match = pattern.match(question)
        if match:
            return build(fk, *match.groups())
    return None


def _call(name: str, **arguments: str) -> str:
    return json.dumps({"name": name, "arguments": arguments})


class Solver(Policy):
    """Describe the table whose join column is needed (if any), run the query, submit it."""

    def __init__(self, env_id: str, seed: int | None) -> None:
        self.env_id = env_id
        self.question: str | None = None
        self.references: dict[str, dict[str, str]] = {}
        self.asked: str | None = None
        self.checked: str | None = None

    def act(self, observation: str, info: dict[str, Any]) -> str:
        if self.question is None:
            found = _QUESTION.findall(observation)
            self.question = found[-1].strip() if found else ""
        if self.asked is not None and self.asked not in self.references:
            self.references[self.asked] = {to: column for column, to in _REFERENCE.findall(observation)}
        try:
            query = build_query(self.question, self.references)
        except KeyError as missing:
            self.asked = str(missing.args[0])
            return _call("describe_table", table=self.asked)
        if query is None:
            return _call("list_tables")  # a question outside the language: nothing better to do
        if self.checked != query:
            self.checked = query
            return _call("execute_sql", query=query)
        return _call("submit", query=query)
