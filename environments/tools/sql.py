"""Multi-turn text-to-SQL over generated SQLite databases (see :class:`SQLEnv`)."""

from __future__ import annotations

import json
import math
import random
import re
import sqlite3
import time
import zlib
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

from envgym.environments.tools import sqldata
from envgym.environments.tools.sqldata import SCHEMAS, SIZES, SqlTask

from envgym.core import InvalidAction, Task, TextEnv, Transition
from envgym.errors import ConfigError, InvalidKwargsError, check_choice, suggest
from envgym.tools import ToolCallError, looks_like_tool_call, parse_tool_calls, tool_error, tool_result

__all__ = ["DIFFICULTIES", "TOOLS", "SQLEnv", "results_match"]

DIFFICULTIES = ("easy", "medium", "hard")
#: Longest action text accepted (characters), before any parsing.
MAX_ACTION_CHARS = 4_000
#: Longest SQL text accepted (SQLite's own SQLITE_LIMIT_SQL_LENGTH is set to it too).
MAX_QUERY_CHARS = 2_000
#: Longest string or blob a query may build (SQLITE_LIMIT_LENGTH): ``zeroblob(1e9)`` fails at once.
MAX_VALUE_BYTES = 100_000
#: Bytes of text and blobs a query's result may hold (read in chunks; the query fails past it).
MAX_RESULT_BYTES = 2_000_000
#: Characters of one cell shown in a result.
CELL_CHARS = 60
#: Rows of a submitted query's result read at most (gold answers are far smaller).
SUBMIT_ROWS = 10_000
#: SQLite virtual-machine instructions between two calls of the progress handler.
PROGRESS_EVERY = 1_000
#: Largest ``efficiency_reward`` (a correct submit with no other tool call).
EFFICIENCY_MAX = 0.2
#: ``exploration_reward`` for a correct submit after queries that touched every table the gold
#: query reads.
EXPLORATION_BONUS = 0.1

#: Most candidate queries ``candidates=`` may offer.
MAX_CANDIDATES = 10
#: Draws tried for distractor queries before an episode offers fewer candidates.
DISTRACTOR_DRAWS = 60

#: Gold results kept per process (keyed by database file and query), at most.
GOLD_CACHE_SIZE = 4_096
_GOLD: dict[tuple[Any, str], list[tuple[Any, ...]]] = {}

# The authoriser's whitelist: reading and calling functions. Everything else (writes, schema
# changes, PRAGMA, ATTACH, transactions) is refused while the statement is prepared, before it runs.
_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
_REFUSED_FUNCTIONS = {"load_extension", "randomblob", "zeroblob", "random"}


def _schema(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": sorted(properties),
                "additionalProperties": False,
            },
        },
    }


_TAG = re.compile(r"<\s*action\s*>(.*?)(?:<\s*/\s*action\s*>|$)", re.IGNORECASE | re.DOTALL)
_QUERY = {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS}
#: The env's tools as OpenAI function schemas (``info["tools"]``).
TOOLS: list[dict[str, Any]] = [
    _schema("list_tables", "List the tables of the database.", {}),
    _schema(
        "describe_table",
        "Show a table's columns, their types and the tables they reference.",
        {"table": {"type": "string", "minLength": 1, "maxLength": 64}},
    ),
    _schema("execute_sql", "Run one read-only SQL query (SQLite); returns up to `row_cap` rows.", {"query": _QUERY}),
    _schema(
        "submit",
        "Submit the final SQL query; its result is compared with the answer. Ends the episode.",
        {"query": _QUERY},
    ),
]
_TOOL_NAMES = tuple(t["function"]["name"] for t in TOOLS)


def _normalise(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        number = float(value)
        return round(number, 4) if math.isfinite(number) else repr(number)
    if isinstance(value, bytes):
        return value.hex()
    return value


def results_match(got: list[tuple[Any, ...]], gold: list[tuple[Any, ...]], *, ordered: bool) -> bool:
    """Execution match: the same rows (numbers compared to 4 decimals, ``1 == 1.0``); in the same
    order when ``ordered``, else as multisets."""
    a = [tuple(_normalise(v) for v in row) for row in got]
    b = [tuple(_normalise(v) for v in row) for row in gold]
    if ordered:
        return a == b
    return Counter(map(repr, a)) == Counter(map(repr, b))


class _QueryBudget:
    """The progress handler: counts SQLite VM instructions (deterministic) and wall time (a backstop)."""

    __slots__ = ("deadline", "left")

    def __init__(self, steps: int, seconds: float) -> None:
        self.left = steps // PROGRESS_EVERY
        self.deadline = time.monotonic() + seconds

    def __call__(self) -> int:
        self.left -= 1
        return 1 if self.left < 0 or time.monotonic() > self.deadline else 0


def _authorise(action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None) -> int:
    if action not in _ALLOWED:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _REFUSED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


class SQLEnv(TextEnv):
    """Multi-turn text-to-SQL with execution feedback on a generated SQLite database.

    **Description.** Each episode opens one of three generated databases (``shop``: customers,
    products, orders; ``library``: members, books, loans; ``flights``: passengers, routes,
    bookings), each in four seeded instances, and asks one question drawn from nine templates:
    filters, aggregates, joins, group-by, order and limit, nested queries (``IN``/``NOT IN``,
    scalar subqueries). The agent explores the schema and the data with tools and submits one
    SQL query; the reward compares its result with the gold query's (execution match). The
    ``train`` and ``test`` splits are disjoint by (template, schema, instance): a fixed CRC-32
    partition puts about one in four in ``test``. Databases are generated offline from their
    seed and cached as files (``<envgym cache>/tools-sql/``); every episode opens its file
    read-only.

    **Observation.** At reset: the rules, the tools, the question. After each step: the tool's
    result (a table of at most ``row_cap`` rows, cells cut at 60 characters) or its error, then
    the question and the tool calls used.

    **Actions.** One tool call per turn in the dialect of ``docs/tools.md``:
    ``{"name": "execute_sql", "arguments": {"query": "SELECT ..."}}``. Tools (``info["tools"]``
    holds their JSON schemas): ``list_tables()``, ``describe_table(table)``,
    ``execute_sql(query)`` and ``submit(query)``. Queries are read-only and bounded before and
    while they run: the file is opened with ``mode=ro`` and ``PRAGMA query_only``; an
    authoriser refuses, while the statement is prepared, anything but reading (writes, schema
    changes, ``PRAGMA``, ``ATTACH``, transactions, ``load_extension``, ``randomblob``,
    ``zeroblob``, ``random``); SQLite's limits cap the SQL text (2,000 characters), built
    values (100 kB) and attached databases (none); a progress handler stops a query after
    ``query_steps`` virtual-machine instructions (deterministic) or ``query_seconds`` of wall
    time (a backstop); a result is read in chunks and fails past 2 MB of text; one statement
    per call. A SQL error is a valid call whose result is the error. Invalid steps (state
    unchanged): text that is not a tool call, an unknown tool, arguments that fail the tool's
    schema, an unknown table.

    **Reward components.**
    ``execution_match_reward``: 1.0 when the submitted query's result equals the gold result
    (a multiset of rows; in order when the question asks for an order).
    ``efficiency_reward`` (OTC-style): on a correct submit only,
    ``0.2 * max(0, 1 - calls / call_budget)`` where ``calls`` counts the tool calls before the
    submit: fewer calls, more reward, never for a wrong answer.
    ``exploration_reward`` (ReEx-style): on a correct submit only, 0.1 when earlier
    ``execute_sql`` calls that ran without error read every table the gold query reads.
    ``invalid_action_reward``: ``invalid_penalty`` (default -0.1) on an invalid call.
    ``step_cost_reward``: ``step_cost`` (default 0) on every step.

    **Reward basis.** ``execution_match_reward``, ``efficiency_reward``,
    ``invalid_action_reward`` and ``step_cost_reward`` make the reward (their sum);
    ``exploration_reward`` is diagnostic (weight 0): it measures whether the agent checked its
    query against the data, and weighting it in would pay for calls that ``efficiency_reward``
    charges for (pass ``reward={"exploration_reward": 1.0}`` to train with it).

    **Episode end.** Terminated by ``submit`` (success when the result matches); truncated at
    ``max_turns`` (default 12). ``info["progress"]``: 1.0 after a correct submit, else 0.5 once
    a query has run without error on every table the question needs, else 0.

    **Arguments.** ``difficulty``: ``None`` (every template, the default), ``"easy"``
    (filters and aggregates on one table), ``"medium"`` (group-by, joins) or ``"hard"``
    (top-k with order and limit, scalar and ``NOT IN`` subqueries). ``schemas``: the schemas
    drawn from (default all three). ``size``: ``"small"`` (2,000 events), ``"default"``
    (20,000 events, 2,000 people, 500 things), ``"large"`` (100,000) or ``"perf"``
    (1,000,000). ``row_cap`` (1-500, default 50): rows shown per query. ``call_budget``
    (default 6): the calls ``efficiency_reward`` counts down from. ``query_steps`` (default 100
    per event row, at least 10 million: about a second on one core) and ``query_seconds``
    (default 10.0, a backstop above it): per-query limits. ``cache_dir``: where the
    databases are cached. ``reset(options={"schema": ..., "instance": ..., "template": ...})``
    plays a chosen task (the split check is skipped). ``candidates`` (``None``, the default, or
    2-10): a multiple-choice variant for small models and for RL from scratch. Each episode
    also lists that many candidate queries in its observation, the gold one and distractors drawn
    from the same database (alternately the same template with other values and the other
    templates of the difficulty), none with the gold result; ``admissible_actions`` are the ``submit``
    calls of the candidates, in a seeded order (any other call stays valid). A distractor is
    drawn after the gold task, so a seed asks the same question with or without candidates.
    Plus the common :class:`envgym.core.TextEnv` arguments.

    **Version history.** v0: first release (generator version 1).
    """

    name: ClassVar[str] = "tools_sql"
    reward_components: ClassVar[tuple[str, ...]] = (
        "execution_match_reward",
        "efficiency_reward",
        "exploration_reward",
        "invalid_action_reward",
        "step_cost_reward",
    )
    reward_basis: ClassVar[tuple[str, ...]] = (
        "execution_match_reward",
        "efficiency_reward",
        "invalid_action_reward",
        "step_cost_reward",
    )
    default_max_turns: ClassVar[int] = 12

    def __init__(
        self,
        *,
        difficulty: str | None = None,
        schemas: tuple[str, ...] | list[str] | None = None,
        size: str = "default",
        row_cap: int = 50,
        call_budget: int = 6,
        query_steps: int | None = None,
        query_seconds: float = 10.0,
        cache_dir: str | None = None,
        candidates: int | None = None,
        reward: Any = None,
        **kwargs: Any,
    ) -> None:
        if candidates is not None and (
            isinstance(candidates, bool) or not isinstance(candidates, int) or not 2 <= candidates <= MAX_CANDIDATES
        ):
            raise InvalidKwargsError(
                f"candidates must be None or an integer from 2 to {MAX_CANDIDATES}, got {candidates!r}."
            )
        if difficulty is not None:
            check_choice("difficulty", difficulty, DIFFICULTIES)
        chosen = tuple(schemas) if schemas is not None else tuple(SCHEMAS)
        if not chosen or isinstance(schemas, str):
            raise InvalidKwargsError(f"schemas must be a non-empty list of {sorted(SCHEMAS)}, got {schemas!r}.")
        for schema in chosen:
            check_choice("schemas", schema, SCHEMAS)
        check_choice("size", size, SIZES)
        if query_steps is None:
            query_steps = max(10_000_000, 100 * SIZES[size])
        for label, value, low, high in (
            ("row_cap", row_cap, 1, 500),
            ("call_budget", call_budget, 1, 100),
            ("query_steps", query_steps, PROGRESS_EVERY, 10**10),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise InvalidKwargsError(f"{label} must be an integer from {low} to {high}, got {value!r}.")
        if (
            isinstance(query_seconds, bool)
            or not isinstance(query_seconds, (int, float))
            or not 0 < query_seconds <= 600
        ):
            raise InvalidKwargsError(f"query_seconds must be a number in (0, 600], got {query_seconds!r}.")
        if reward is None:
            reward = {"exploration_reward": 0.0}
        super().__init__(reward=reward, **kwargs)
        self.difficulty = difficulty
        self.schemas = chosen
        self.size = size
        self.row_cap = row_cap
        self.call_budget = call_budget
        self.query_steps = query_steps
        self.query_seconds = float(query_seconds)
        self.cache_dir = cache_dir
        self.candidates = candidates
        self._candidate_queries: list[str] = []
        self._pairs = [
            (t.name, s, i)
            for t in sqldata.templates_for(difficulty)
            for s in chosen
            for i in range(sqldata.INSTANCES)
            if sqldata.in_split(t.name, s, i, self.split)
        ]
        if not self._pairs:
            raise InvalidKwargsError(
                f"no template of difficulty {difficulty!r} on schemas {list(chosen)} is in the {self.split!r} split; "
                "add schemas or choose another difficulty."
            )
        self._con: sqlite3.Connection | None = None
        self._path: Path | None = None
        self._db: tuple[str, int] | None = None
        self._sql_task: SqlTask | None = None
        self._gold: list[tuple[Any, ...]] = []
        self._calls = 0
        self._explored: set[str] = set()
        self._submitted = False
        self._correct = False
        self._raw: str | None = None

    # ------------------------------------------------------------------ database
    def _open(self, schema: str, instance: int) -> sqlite3.Connection:
        if self._con is not None and self._db == (schema, instance):
            return self._con
        self._close_db()
        path = sqldata.database_path(
            schema, instance, self.size, Path(self.cache_dir).expanduser() if self.cache_dir else None
        )
        self._path = path
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
        con.execute("PRAGMA query_only = 1")
        con.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        con.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, MAX_QUERY_CHARS)
        con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        con.set_authorizer(_authorise)
        self._con, self._db = con, (schema, instance)
        return con

    def _close_db(self) -> None:
        if self._con is not None:
            self._con.close()
        self._con = None

    def _run(self, query: str, limit: int) -> tuple[list[str], list[tuple[Any, ...]], bool]:
        """Columns, at most ``limit`` rows and whether there were more; raises sqlite3.Error."""
        con = self._con
        assert con is not None
        con.set_progress_handler(_QueryBudget(self.query_steps, self.query_seconds), PROGRESS_EVERY)
        try:
            cursor = con.execute(query)
            rows: list[tuple[Any, ...]] = []
            size = 0
            while len(rows) <= limit:  # in chunks, counting bytes: a result never outgrows its bound
                chunk = cursor.fetchmany(min(256, limit + 1 - len(rows)))
                if not chunk:
                    break
                size += sum(len(v) if isinstance(v, (str, bytes)) else 8 for row in chunk for v in row)
                if size > MAX_RESULT_BYTES:
                    raise sqlite3.DataError(f"the result is larger than {MAX_RESULT_BYTES:,} bytes: select less.")
                rows.extend(chunk)
            columns = [d[0] for d in cursor.description or ()]
            cursor.close()
        finally:
            con.set_progress_handler(None, PROGRESS_EVERY)
        return columns, rows[:limit], len(rows) > limit

    def _tables_read(self, query: str) -> set[str]:
        """Tables a query reads, as SQLite's authoriser reports them while preparing it."""
        seen: set[str] = set()
        con = self._con
        assert con is not None

        def spy(action: int, arg1: str | None, arg2: str | None, db: str | None, trigger: str | None) -> int:
            if action == sqlite3.SQLITE_READ and arg1:
                seen.add(arg1.lower())
            return _authorise(action, arg1, arg2, db, trigger)

        con.set_authorizer(spy)
        try:
            con.execute(f"EXPLAIN {query}").close()  # prepares (and lists) without reading rows
        except sqlite3.Error:
            return set()
        finally:
            con.set_authorizer(_authorise)
        return seen

    # ------------------------------------------------------------------ episode
    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        options = options or {}
        if any(k in options for k in ("schema", "instance", "template")):
            template = options.get("template", rng.choice(sorted(sqldata.TEMPLATES)))
            schema = options.get("schema", rng.choice(self.schemas))
            instance = options.get("instance", 0)
            for label, value, choices in (("template", template, sqldata.TEMPLATES), ("schema", schema, SCHEMAS)):
                if not isinstance(value, str) or value not in choices:
                    hint = suggest(value, choices) if isinstance(value, str) else ""
                    raise ConfigError(
                        f"options[{label!r}] must be one of {', '.join(sorted(choices))}, got {value!r}.{hint}"
                    )
            if isinstance(instance, bool) or not isinstance(instance, int) or not 0 <= instance < sqldata.INSTANCES:
                raise ConfigError(f"options['instance'] must be an integer from 0 to {sqldata.INSTANCES - 1}.")
        else:
            template, schema, instance = rng.choice(self._pairs)
        con = self._open(schema, instance)
        key = (schema, instance, self.size, str(self._path))
        task = sqldata.make_task(template, schema, rng, con, key=key)
        self._sql_task = task
        self._gold = self._result(key, task.sql)
        self._candidate_queries = self._draw_candidates(task, schema, rng, key) if self.candidates else []
        self._calls = 0
        self._explored = set()
        self._submitted = False
        self._correct = False
        return Task(
            id=f"tools-sql-{schema}{instance}-{template}-{zlib_key(task.question)}",
            goal=task.question,
            difficulty=task.difficulty,
            extra={
                "schema": schema,
                "instance": instance,
                "template": template,
                "ordered": task.ordered,
                **({"candidates": list(self._candidate_queries)} if self.candidates else {}),
            },
        )

    def _result(self, key: Any, sql: str) -> list[tuple[Any, ...]]:
        """The rows of a generated query (at most ``SUBMIT_ROWS``), kept per process in ``_GOLD``."""
        rows = _GOLD.get((key, sql))
        if rows is None:
            rows = self._run(sql, SUBMIT_ROWS)[1]
            if len(_GOLD) < GOLD_CACHE_SIZE:
                _GOLD[(key, sql)] = rows
        return rows

    def _draw_candidates(self, task: SqlTask, schema: str, rng: random.Random, key: Any) -> list[str]:
        """The gold query and up to ``candidates - 1`` distractors, shuffled: queries of the same
        database whose results differ from the gold one, drawn alternately from the same template
        (other values) and from the other templates of the difficulty, in turn. A distractor's
        rows are cut at ``SUBMIT_ROWS``, as a submit reads them: a longer result never matches."""
        assert self.candidates is not None
        others = [t.name for t in sqldata.templates_for(self.difficulty) if t.name != task.template]
        queries = [task.sql]
        for draw in range(DISTRACTOR_DRAWS):
            if len(queries) == self.candidates:
                break
            template = task.template if draw % 2 == 0 or not others else others[(draw // 2) % len(others)]
            distractor = sqldata.make_task(template, schema, rng, self._con, key=key)  # type: ignore[arg-type]
            if distractor.sql in queries:
                continue
            try:
                rows = self._result(key, distractor.sql)
            except sqlite3.Error:  # pragma: no cover - generated queries run
                continue
            if not results_match(rows, self._gold, ordered=task.ordered):
                queries.append(distractor.sql)
        rng.shuffle(queries)
        return queries

    def admissible_actions(self) -> list[str] | None:
        """The ``submit`` calls of the candidate queries (``candidates=``), else ``None``."""
        if not self.candidates:
            return None
        return [json.dumps({"name": "submit", "arguments": {"query": q}}) for q in self._candidate_queries]

    def _intro(self) -> str:
        tools = "\n".join(json.dumps(t["function"], sort_keys=True) for t in TOOLS)
        return (
            "Answer the question with one SQL query over a SQLite database. Explore it with tools, one call "
            'per turn, written as JSON, e.g. <action>{"name": "list_tables", "arguments": {}}</action>. '
            "Submitting ends the episode: "
            "the result of your query is compared with the answer (rows in order only when the question "
            f"asks for an order).\nTools:\n{tools}"
        )

    def _observe(self) -> str:
        assert self._sql_task is not None
        offered = ""
        if self._candidate_queries:
            offered = "Candidate queries (submit one):\n" + "\n".join(f"- {q}" for q in self._candidate_queries) + "\n"
        return (
            f"Question: {self._sql_task.question}\n{offered}"
            f"Tool calls used: {self._calls} (budget {self.call_budget}); at most {self.max_turns} turns."
        )

    def _info(self, components: dict[str, float], valid: bool, success: bool, reason: Any) -> dict[str, Any]:
        info = super()._info(components, valid, success, reason)
        info["tools"] = TOOLS
        info["parallel_tool_calls"] = False
        return info

    def progress(self) -> float | None:
        if self._sql_task is None:
            return None
        if self._correct:
            return 1.0
        return 0.5 if set(self._sql_task.tables) <= self._explored else 0.0

    # ------------------------------------------------------------------ actions
    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._raw = action if isinstance(action, str) else None
        return super().step(action)

    def _parse(self, text: str) -> tuple[str, dict[str, Any]]:
        # The base class squeezes whitespace runs; a query's string literals keep theirs, so the
        # call is read from the text as sent (inside its last <action> block, if any).
        raw = self._raw.strip() if isinstance(self._raw, str) else ""
        if raw.startswith("{") or "<" in raw:
            blocks = _TAG.findall(raw)
            text = (blocks[-1] if blocks else raw).strip()
        if len(text) > MAX_ACTION_CHARS:
            raise InvalidAction(f"the action is {len(text)} characters long; the limit is {MAX_ACTION_CHARS}.")
        if not looks_like_tool_call(text):
            raise InvalidAction(
                'expected one tool call as JSON, e.g. {"name": "list_tables", "arguments": {}}; '
                f"tools: {', '.join(_TOOL_NAMES)}."
            )
        try:
            (call,) = parse_tool_calls(text, TOOLS)
        except ToolCallError as err:
            raise InvalidAction(str(err)) from None
        name, arguments = call.name, dict(call.arguments)
        if name == "describe_table" and arguments["table"].lower() not in self._table_names():
            raise InvalidAction(
                f"Tool error (describe_table): no table {arguments['table']!r}; tables: {', '.join(self._table_names())}."
            )
        return name, arguments

    def _table_names(self) -> list[str]:
        assert self._sql_task is not None and self._db is not None
        s = SCHEMAS[self._db[0]]
        return sorted((s.people, s.things, s.events))

    def _apply(self, action: tuple[str, dict[str, Any]]) -> Transition:
        name, arguments = action
        if name == "submit":
            return self._submit(arguments["query"])
        self._calls += 1
        if name == "list_tables":
            result = tool_result(name, ", ".join(self._table_names()))
        elif name == "describe_table":
            result = tool_result(name, self._describe(arguments["table"].lower()))
        else:
            result = self._execute(arguments["query"])
        return Transition(f"{result}\n\n{self._observe()}")

    def _describe(self, table: str) -> str:
        con = self._con
        assert con is not None
        # PRAGMA is refused to agents; the env reads the schema with the authoriser lifted.
        con.set_authorizer(None)
        try:
            columns = con.execute(f"SELECT name, type, pk FROM pragma_table_info('{table}')").fetchall()
            keys = {
                row[3]: (row[2], row[4]) for row in con.execute(f"SELECT * FROM pragma_foreign_key_list('{table}')")
            }
            count = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        finally:
            con.set_authorizer(_authorise)
        lines = [f"\nTable {table} ({count} rows):"]
        for column, kind, pk in columns:
            note = " PRIMARY KEY" if pk else ""
            if column in keys:
                note += f" REFERENCES {keys[column][0]}({keys[column][1]})"
            lines.append(f"  {column} {kind}{note}")
        return "\n".join(lines)

    def _execute(self, query: str) -> str:
        try:
            columns, rows, more = self._run(query, self.row_cap)
        except (sqlite3.Error, sqlite3.Warning, ValueError, OverflowError, MemoryError) as err:
            return tool_error("execute_sql", _sql_error(err))
        self._explored |= self._tables_read(query)
        return tool_result("execute_sql", _format_table(columns, rows, more, self.row_cap))

    def _submit(self, query: str) -> Transition:
        assert self._sql_task is not None
        task = self._sql_task
        try:
            _, rows, more = self._run(query, SUBMIT_ROWS)
        except (sqlite3.Error, sqlite3.Warning, ValueError, OverflowError, MemoryError) as err:
            head = f"Your query failed: {_sql_error(err)}"
            correct = False
        else:
            correct = not more and results_match(rows, self._gold, ordered=task.ordered)
            head = (
                "Correct: the result matches the answer."
                if correct
                else (
                    f"Wrong: your query returned {len(rows)}{'+' if more else ''} row(s); the answer has "
                    f"{len(self._gold)} row(s)" + (" in a given order." if task.ordered else ".")
                )
            )
        self._submitted = True
        self._correct = correct
        rewards: dict[str, float] = {}
        if correct:
            rewards["execution_match_reward"] = 1.0
            rewards["efficiency_reward"] = EFFICIENCY_MAX * max(0.0, 1.0 - self._calls / self.call_budget)
            if set(task.tables) <= self._explored:
                rewards["exploration_reward"] = EXPLORATION_BONUS
        return Transition(f"{head}\n\n{self._observe()}", rewards, terminated=True, success=correct)

    def sample_action(self, rng: random.Random) -> str:
        """A random valid tool call: a schema look-up or a simple query, now and then a submit (with
        ``candidates``: the submit of a random candidate)."""
        offered = self.admissible_actions()
        if offered:
            return rng.choice(offered)
        tables = self._table_names()
        roll = rng.random()
        if roll < 0.2:
            return json.dumps({"name": "list_tables", "arguments": {}})
        if roll < 0.45:
            return json.dumps({"name": "describe_table", "arguments": {"table": rng.choice(tables)}})
        query = f"SELECT count(*) FROM {rng.choice(tables)}"
        if roll < 0.9:
            return json.dumps({"name": "execute_sql", "arguments": {"query": query}})
        return json.dumps({"name": "submit", "arguments": {"query": query}})

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        super().close()
        self._close_db()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_con"] = None  # reopened from the cached file on the next use
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self._db is not None:
            db, self._db = self._db, None
            self._open(*db)


def zlib_key(text: str) -> str:
    return f"{zlib.crc32(text.encode()):08x}"


def _sql_error(err: BaseException) -> str:
    message = str(err) or type(err).__name__
    if message == "interrupted":
        return "the query ran past its limit (too much work): add filters or simplify it."
    if "not authorized" in message:
        return "not authorized: only reading queries (SELECT) are allowed."
    return message


def _cell(value: Any) -> str:
    text = "NULL" if value is None else (value.hex() if isinstance(value, bytes) else str(value))
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 3] + "..."


def _format_table(columns: list[str], rows: list[tuple[Any, ...]], more: bool, cap: int) -> str:
    if not columns:
        return "The query returned no columns."
    lines = [" | ".join(_cell(c) for c in columns)]
    lines.extend(" | ".join(_cell(v) for v in row) for row in rows)
    tail = f"({len(rows)} row{'s' if len(rows) != 1 else ''})"
    if more:
        tail = f"(first {cap} rows shown; there are more)"
    return "\n".join([*lines, tail])
