"""How much ``import envgym`` costs, and proof that it imports nothing heavy.

Every number comes from fresh interpreters (``sys.executable``), the median of ``--runs`` runs,
with the variants interleaved so that machine noise hits them alike. Three measurements:

1. **import envgym, wall time, no site** -- ``python -S -c "<paths>; import envgym"`` minus
   ``python -S -c "<paths>"``. ``-S`` skips ``site``, so the installed ``envgym.pth`` (which
   imports ``envgym._autoregister`` at every interpreter start) does not run and envgym really is
   imported by the statement; ``<paths>`` puts the project root and site-packages on
   ``sys.path`` by hand so both commands find the same modules. The difference is the cost of
   ``import envgym`` alone, interpreter start-up excluded. **Target: under 150 ms.**
2. **import envgym, -X importtime, normal start** -- ``python -X importtime -c "import envgym"``
   with ``site`` on, as users run it. Because of ``envgym.pth`` the import happens during
   ``site``; the script sums the cumulative time of the top-most ``envgym*`` entries of the
   import tree (whatever imported them), i.e. the start-up tax envgym puts on every interpreter
   of the environment. Also shown: the slowest modules by self time inside those subtrees, and
   the whole ``site`` time for scale.
3. **first use through Gymnasium** -- in a normal interpreter, measured in-process with
   ``perf_counter``: ``import gymnasium`` alone (the import hook is removed first), then envgym's
   ``register_envs()`` (what the hook adds to ``import gymnasium``), the first
   ``gymnasium.make(--make-id)`` (imports the environment's module) and its first reset.
   envgym's share (registration + make) is held to the same 150 ms target.

Heavy modules: after ``import envgym``, and after ``import envgym;
gymnasium.make(--make-id)``, none of torch, playwright, docker, ray, transformers (plus any
``--heavy`` names) may be in ``sys.modules``; the report lists any that are.

Usage::

    python benchmarks/perf/import_time.py            # table
    python benchmarks/perf/import_time.py --runs 31 --json

It measures and reports; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TARGET_MS = 150.0
HEAVY = ("torch", "playwright", "docker", "ray", "transformers")
_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( +)(\S+)\s*$")


def _run(args: Sequence[str], *, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, check=False)


def _timed(args: Sequence[str]) -> float:
    """Wall seconds of one fresh interpreter running ``args`` (raises if it fails)."""
    import time

    t0 = time.perf_counter()
    proc = _run(args)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)!r} failed with exit code {proc.returncode}:\n{proc.stderr[-2000:]}")
    return elapsed


def _bare_paths() -> list[str]:
    """Paths a ``-S`` interpreter needs to import envgym and its dependencies like a normal one."""
    import envgym

    root = str(Path(envgym.__file__).resolve().parent.parent)
    purelib = sysconfig.get_paths()["purelib"]
    platlib = sysconfig.get_paths()["platlib"]
    return list(dict.fromkeys([root, purelib, platlib]))


def measure_bare_import(runs: int) -> dict[str, Any]:
    """Measurement 1: wall time of ``import envgym`` in a ``-S`` interpreter, minus the baseline."""
    setup = f"import sys; sys.path[:0] = {_bare_paths()!r}"
    base, with_envgym = [], []
    _timed(["-S", "-c", setup + "; import envgym"])  # warm the file cache and the .pyc files
    for _ in range(runs):
        base.append(_timed(["-S", "-c", setup]))
        with_envgym.append(_timed(["-S", "-c", setup + "; import envgym"]))
    base_ms = 1e3 * statistics.median(base)
    envgym_ms = 1e3 * statistics.median(with_envgym)
    return {
        "baseline_ms": base_ms,
        "with_import_ms": envgym_ms,
        "import_envgym_ms": envgym_ms - base_ms,
        "runs": runs,
    }


def parse_importtime(stderr: str) -> list[tuple[int, int, int, str]]:
    """``-X importtime`` lines as ``(self_us, cumulative_us, level, module)`` in output order."""
    rows = []
    for line in stderr.splitlines():
        match = _LINE.match(line)
        if match:
            level = (len(match[3]) - 1) // 2
            rows.append((int(match[1]), int(match[2]), level, match[4]))
    return rows


def envgym_subtrees(rows: Sequence[tuple[int, int, int, str]]) -> tuple[int, list[tuple[str, int]], int]:
    """Sum of the cumulative time of the top-most ``envgym*`` entries, the modules inside them
    with their self time, and the cumulative time of ``site`` (0 when absent).

    ``-X importtime`` prints children before their parent; walking the lines backwards visits
    each parent before its children, so a stack of open ancestors tells whether an entry sits
    inside an envgym subtree.
    """
    total = 0
    inside: list[tuple[str, int]] = []
    site_us = 0
    stack: list[tuple[int, str]] = []
    for self_us, cumulative_us, level, module in reversed(rows):
        while stack and stack[-1][0] >= level:
            stack.pop()
        in_envgym = any(name == "envgym" or name.startswith("envgym.") for _, name in stack)
        is_envgym = module == "envgym" or module.startswith("envgym.")
        if is_envgym and not in_envgym:
            total += cumulative_us
        if is_envgym or in_envgym:
            inside.append((module, self_us))
        if module == "site" and level == 0:
            site_us = cumulative_us
        stack.append((level, module))
    return total, inside, site_us


def measure_importtime(runs: int) -> dict[str, Any]:
    """Measurement 2: ``python -X importtime -c "import envgym"`` with site on."""
    totals, sites = [], []
    self_times: dict[str, list[int]] = {}
    for _ in range(runs + 1):
        proc = _run(["-X", "importtime", "-c", "import envgym"])
        if proc.returncode != 0:
            raise RuntimeError(f"python -X importtime -c 'import envgym' failed:\n{proc.stderr[-2000:]}")
        total, inside, site_us = envgym_subtrees(parse_importtime(proc.stderr))
        totals.append(total)
        sites.append(site_us)
        for module, self_us in inside:
            self_times.setdefault(module, []).append(self_us)
    totals, sites = totals[1:], sites[1:]  # the first run compiles .pyc files: discard it
    slowest = sorted(((m, statistics.median(t)) for m, t in self_times.items()), key=lambda x: -x[1])[:8]
    return {
        "envgym_cumulative_ms": statistics.median(totals) / 1e3,
        "site_cumulative_ms": statistics.median(sites) / 1e3,
        "modules_in_envgym_subtrees": len(self_times),
        "slowest_self_ms": [{"module": m, "self_ms": us / 1e3} for m, us in slowest],
        "runs": runs,
    }


_FIRST_USE = """
import json, sys, time
t0 = time.perf_counter()
import envgym
t1 = time.perf_counter()
from envgym import _autoregister
_autoregister.uninstall()  # so that import gymnasium below times Gymnasium alone
import gymnasium
t2 = time.perf_counter()
from envgym.registration import register_envs
register_envs()
t3 = time.perf_counter()
env = gymnasium.make({make_id!r})
t4 = time.perf_counter()
env.reset(seed=0)
t5 = time.perf_counter()
print(json.dumps({{"import_envgym": t1 - t0, "import_gymnasium": t2 - t1, "register_envs": t3 - t2,
                  "make": t4 - t3, "reset": t5 - t4}}))
"""


def measure_first_use(runs: int, make_id: str) -> dict[str, Any]:
    """Measurement 3: import gymnasium, envgym's registration, the first make and reset, in-process.

    The import hook is uninstalled before ``import gymnasium`` and ``register_envs()`` is called
    right after, so Gymnasium's own import time and envgym's registration are reported apart
    (together they are what ``import gymnasium`` costs when envgym is installed).
    """
    samples: dict[str, list[float]] = {}
    for _ in range(runs):
        proc = _run(["-c", _FIRST_USE.format(make_id=make_id)])
        if proc.returncode != 0:
            raise RuntimeError(f"gymnasium.make({make_id!r}) failed:\n{proc.stderr[-2000:]}")
        for key, value in json.loads(proc.stdout.strip().splitlines()[-1]).items():
            samples.setdefault(key, []).append(value)
    medians = {f"{key}_ms": 1e3 * statistics.median(values) for key, values in samples.items()}
    medians["envgym_first_use_ms"] = medians["register_envs_ms"] + medians["make_ms"]
    return {"make_id": make_id, **medians, "runs": runs}


_HEAVY_CHECK = """
import json, sys
heavy = {heavy!r}
import envgym
after_import = sorted(m for m in heavy if m in sys.modules)
count_import = len(sys.modules)
import gymnasium
gymnasium.make({make_id!r}).reset(seed=0)
after_make = sorted(m for m in heavy if m in sys.modules)
print(json.dumps({{"after_import": after_import, "after_make": after_make,
                  "modules_after_import": count_import, "modules_after_make": len(sys.modules)}}))
"""


def check_heavy(heavy: Sequence[str], make_id: str) -> dict[str, Any]:
    """Which heavy modules are loaded after ``import envgym`` and after the first make."""
    proc = _run(["-c", _HEAVY_CHECK.format(heavy=tuple(heavy), make_id=make_id)])
    if proc.returncode != 0:
        raise RuntimeError(f"heavy-module check failed:\n{proc.stderr[-2000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    installed = {}
    for name in heavy:
        probe = _run(["-c", f"import importlib.util, sys; sys.exit(importlib.util.find_spec({name!r}) is None)"])
        installed[name] = probe.returncode == 0
    return {"checked": list(heavy), "installed": installed, **result}


def run(runs: int, make_id: str, heavy: Sequence[str]) -> dict[str, Any]:
    """Every measurement, as one JSON-ready report. A failing part is reported, not raised."""
    import envgym

    report: dict[str, Any] = {
        "benchmark": "import_time",
        "envgym_version": envgym.__version__,
        "python": platform.python_version(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "target_ms": TARGET_MS,
    }
    parts = {
        "bare_import": lambda: measure_bare_import(runs),
        "importtime": lambda: measure_importtime(runs),
        "first_use": lambda: measure_first_use(runs, make_id),
        "heavy_modules": lambda: check_heavy(heavy, make_id),
    }
    for name, measure in parts.items():
        print(f"measuring {name} ...", file=sys.stderr, flush=True)
        try:
            report[name] = measure()
        except Exception as err:  # noqa: BLE001 - report what failed, keep measuring the rest
            report[name] = {"error": f"{type(err).__name__}: {err}"}
    return report


def print_table(report: dict[str, Any]) -> None:
    """Print the report as text on stdout."""
    target = report["target_ms"]

    def verdict(ms: float) -> str:
        return "ok" if ms < target else "OVER TARGET"

    print(f"envgym {report['envgym_version']} | Python {report['python']} | {report['platform']}")
    bare = report["bare_import"]
    if "error" in bare:
        print(f"import envgym (python -S, wall): ERROR {bare['error']}")
    else:
        print(
            f"import envgym (python -S, wall, median of {bare['runs']}): {bare['import_envgym_ms']:.1f} ms "
            f"[{bare['with_import_ms']:.1f} ms - baseline {bare['baseline_ms']:.1f} ms]  "
            f"target < {target:.0f} ms: {verdict(bare['import_envgym_ms'])}"
        )
    imp = report["importtime"]
    if "error" in imp:
        print(f"-X importtime: ERROR {imp['error']}")
    else:
        print(
            f"-X importtime, envgym subtrees at start-up (via envgym.pth): {imp['envgym_cumulative_ms']:.2f} ms "
            f"({imp['modules_in_envgym_subtrees']} modules; all of site: {imp['site_cumulative_ms']:.2f} ms)"
        )
        slow = ", ".join(f"{s['module']} {s['self_ms']:.2f}" for s in imp["slowest_self_ms"])
        print(f"  slowest self times (ms): {slow}")
    first = report["first_use"]
    if "error" in first:
        print(f"first use: ERROR {first['error']}")
    else:
        print(
            f"first use (median of {first['runs']}): import gymnasium itself {first['import_gymnasium_ms']:.1f} ms; "
            f"envgym register_envs {first['register_envs_ms']:.1f} ms + first gymnasium.make({first['make_id']}) "
            f"{first['make_ms']:.1f} ms = {first['envgym_first_use_ms']:.1f} ms "
            f"(target < {target:.0f} ms: {verdict(first['envgym_first_use_ms'])}); "
            f"first reset {first['reset_ms']:.2f} ms"
        )
    heavy = report["heavy_modules"]
    if "error" in heavy:
        print(f"heavy modules: ERROR {heavy['error']}")
    else:
        installed = [m for m, ok in heavy["installed"].items() if ok]
        print(
            f"heavy modules checked: {', '.join(heavy['checked'])} (installed here: {', '.join(installed) or 'none'})"
        )
        print(
            f"  after import envgym: {', '.join(heavy['after_import']) or 'none loaded'} "
            f"({heavy['modules_after_import']} modules in sys.modules)"
        )
        print(
            f"  after gymnasium.make: {', '.join(heavy['after_make']) or 'none loaded'} "
            f"({heavy['modules_after_make']} modules in sys.modules)"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="Fresh interpreters per measurement (default 15).")
    parser.add_argument("--make-id", default="envgym/Sokoban-v0", help="Id for the first-use measurement.")
    parser.add_argument("--heavy", nargs="*", default=[], metavar="MODULE", help="More modules that must not load.")
    parser.add_argument("--json", action="store_true", help="Print the report as JSON instead of text.")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}.")
    os.environ.pop("PYTHONPROFILEIMPORTTIME", None)
    report = run(args.runs, args.make_id, [*HEAVY, *args.heavy])
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
