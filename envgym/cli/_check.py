"""``envgym check``: run the contract checkers over one id or every registered id."""

from __future__ import annotations

import time
import warnings
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from envgym.cli._common import (
    EXIT_FAILED,
    EXIT_USAGE,
    KIND_LABELS,
    echo_json,
    err_console,
    fail,
    handle_errors,
    out_console,
    progress_bar,
    resolve_kind,
    specs_for,
)
from envgym.cli._options import FamilyOption, JsonOption, KindOption, VariantsOption
from envgym.errors import suggest
from envgym.registration import list_envs

__all__ = ["check_command", "check_spec"]


def check_spec(spec: Any) -> dict[str, Any]:
    """Run the checker that fits ``spec.kind`` on ``spec.id``; never raises.

    Returns a JSON-ready record: id, kind, passed, checks (names that passed), steps, seconds,
    error (``"ExceptionType: message"`` or ``None``) and the warnings raised during the check.
    """
    # imported here: the checkers import PettingZoo's test module, which imports pytest (a quarter
    # of a second, and more on a busy machine, that every other command would pay at start)
    from envgym.testing import check_aec_env, check_env, check_parallel_env

    checker = {"gymnasium": check_env, "aec": check_aec_env, "parallel": check_parallel_env}[spec.kind]
    started = time.perf_counter()
    record: dict[str, Any] = {
        "id": spec.id,
        "kind": KIND_LABELS.get(spec.kind, spec.kind),
        "family": spec.family,
        "passed": False,
        "checks": [],
        "steps": 0,
        "seconds": 0.0,
        "error": None,
        "warnings": [],
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            report = checker(spec.id)
        except Exception as err:  # noqa: BLE001 - every failure becomes a row of the report
            record["error"] = f"{type(err).__name__}: {err}"
        else:
            record["passed"] = True
            record["checks"] = list(report.checks)
            record["steps"] = int(report.steps)
    record["seconds"] = round(time.perf_counter() - started, 4)
    record["warnings"] = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
    return record


@handle_errors
def check_command(
    target: Annotated[str, typer.Argument(metavar="ID|all", help="An environment id, or 'all' for every id.")],
    family: FamilyOption = None,
    kind: KindOption = None,
    variants: VariantsOption = True,
    as_json: JsonOption = False,
) -> None:
    """Run envgym's contract checker (check_env / check_aec_env) and print a pass/fail table.

    --family and --variants apply with 'all'. Exits 1 when any environment fails.
    """
    registry_kind = resolve_kind(kind)
    if target == "all":
        everything = list_envs()
        families = sorted({s.family for s in everything})
        if family is not None and family not in families:
            fail(f"unknown family {family!r}.{suggest(family, families)} Families: {', '.join(families)}.", EXIT_USAGE)
        specs = list_envs(family=family, kind=registry_kind, variants=variants)  # type: ignore[arg-type]
    else:
        specs = [s for s in specs_for(target) if registry_kind is None or s.kind == registry_kind]
        if not specs:
            fail(f"{target!r} is not registered as {kind!r}.", EXIT_USAGE)
    records = []
    console = err_console()
    with progress_bar(console) as progress:
        task = progress.add_task("checking", total=len(specs))
        for spec in specs:
            progress.update(task, description=f"checking {spec.id}")
            records.append(check_spec(spec))
            progress.advance(task)
    failed = [r for r in records if not r["passed"]]
    if as_json:
        echo_json({"passed": len(records) - len(failed), "failed": len(failed), "results": records})
    else:
        table = Table(title="envgym check", title_justify="left", title_style="bold")
        table.add_column("id", no_wrap=True, style="cyan")
        table.add_column("kind", no_wrap=True)
        table.add_column("result", no_wrap=True)
        table.add_column("checks", justify="right")
        table.add_column("steps", justify="right")
        table.add_column("seconds", justify="right")
        table.add_column("error", overflow="fold")
        for r in records:
            result = Text("PASS", style="bold green") if r["passed"] else Text("FAIL", style="bold red")
            error = (r["error"] or "").splitlines()[0][:300] if r["error"] else ""
            table.add_row(
                r["id"], r["kind"], result, str(len(r["checks"])), str(r["steps"]), f"{r['seconds']:.2f}", Text(error)
            )
        out = out_console()
        out.print(table)
        out.print(f"{len(records) - len(failed)} passed, {len(failed)} failed.")
    if failed:
        raise typer.Exit(EXIT_FAILED)
