"""Tools: tool-use environments whose actions are function calls (docs/tools.md).

Only specs live here (string entry points): registering the family imports no environment code.
``envgym/Tools-SQL-v0`` asks text-to-SQL questions over generated SQLite databases (every
template); ``-Easy``/``-Medium``/``-Hard`` keep the templates of one difficulty.
"""

from __future__ import annotations

from envgym.registration import EnvSpec

FAMILY = "tools"
#: The family contract's data (envgym.families): its suite, perf script and waivers.
CONTRACT = {"suite": "tools-v1", "perf": "benchmarks/perf/tools.py"}

_SQL = "envgym.environments.tools.sql:SQLEnv"
_SQL_BASE = "envgym/Tools-SQL-v0"
_SQL_SUMMARY = "Answer a question with one SQL query over a generated SQLite database (execute_sql, submit)"

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
]
