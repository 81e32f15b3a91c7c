"""Tools: tool-use environments whose actions are function calls (docs/tools.md).

Only specs live here (string entry points): registering the family imports no environment code.
``envgym/Tools-SQL-v0`` asks text-to-SQL questions over generated SQLite databases (every
template); ``-Easy``/``-Medium``/``-Hard`` keep the templates of one difficulty.
``envgym/Tools-Search-v0`` asks multi-hop questions over a generated encyclopedia (2-4 hops;
``-Easy``/``-Medium``/``-Hard``: 2, 3, 4 hops). ``envgym/Tools-Code-v0`` asks math and data
questions to answer with a Python interpreter in envgym's sandbox.
"""

from __future__ import annotations

from envgym.registration import EnvSpec

FAMILY = "tools"
#: The family contract's data (envgym.families): its suite, perf script and waivers.
CONTRACT = {"suite": "tools-v1", "perf": "benchmarks/perf/tools.py"}

_SQL = "envgym.environments.tools.sql:SQLEnv"
_SQL_BASE = "envgym/Tools-SQL-v0"
_SQL_SUMMARY = "Answer a question with one SQL query over a generated SQLite database (execute_sql, submit)"
_SEARCH = "envgym.environments.tools.search:SearchEnv"
_SEARCH_BASE = "envgym/Tools-Search-v0"
_SEARCH_SUMMARY = "Answer a multi-hop question over a generated encyclopedia (search, open, answer; BM25 over FTS5)"
_CODE = "envgym.environments.tools.code:CodeEnv"

SPECS: list[EnvSpec] = [
    EnvSpec(id=_SQL_BASE, entry_point=_SQL, family=FAMILY, summary=_SQL_SUMMARY),
    *(
        EnvSpec(
            id=f"envgym/Tools-SQL-{level.capitalize()}-v0",
            entry_point=_SQL,
            family=FAMILY,
            summary=f"{_SQL_SUMMARY} ({level})",
            kwargs={"difficulty": level},
            variant_of=_SQL_BASE,
        )
        for level in ("easy", "medium", "hard")
    ),
    EnvSpec(id=_SEARCH_BASE, entry_point=_SEARCH, family=FAMILY, summary=f"{_SEARCH_SUMMARY}; 2-4 hops"),
    *(
        EnvSpec(
            id=f"envgym/Tools-Search-{level}-v0",
            entry_point=_SEARCH,
            family=FAMILY,
            summary=f"{_SEARCH_SUMMARY}; {hops} hops",
            kwargs={"hops": hops},
            variant_of=_SEARCH_BASE,
        )
        for level, hops in (("Easy", 2), ("Medium", 3), ("Hard", 4))
    ),
    EnvSpec(
        id="envgym/Tools-Code-v0",
        entry_point=_CODE,
        family=FAMILY,
        summary="Answer a math or data question with run_python in a bwrap sandbox (run_python, answer)",
    ),
]
