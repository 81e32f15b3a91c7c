"""Attacks on the SWE sandboxes, tried for real on shipped tasks: how many each one wins.

Each attack is what an agent can do with its commands alone (no access to the host), run on real
`envgym/SWE-v0` test tasks whose bug it never fixes; a win is a task graded *resolved* (or, for
the attacks on the host, the effect named in the row). The same script measures any checkout of
envgym, so the figures before and after a change come from one command::

    python benchmarks/perf/swe_attacks.py --json --out benchmarks/perf/results/swe_attacks.json
    PYTHONPATH=/path/to/old/checkout python benchmarks/perf/swe_attacks.py --json   # the old sandbox

It touches only ``envgym.sandbox`` and the task data (never the env class), so it runs against an
older sandbox beside today's task manifest.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from envgym.environments.swe.grading import score
from envgym.environments.swe.libraries import source_tree, test_files
from envgym.environments.swe.tasks import load_manifest

import envgym.sandbox as sandbox_module
from envgym.sandbox import Limits, sandbox_class

try:
    from envgym.testing.grader_cheats import CHEATS, PATCH, PLANT, PLUGIN
except ImportError:  # an older envgym on PYTHONPATH: the catalogue of this checkout
    import importlib.util

    _spec = importlib.util.spec_from_file_location(
        "grader_cheats", Path(__file__).resolve().parents[2] / "envgym" / "testing" / "grader_cheats.py"
    )
    assert _spec is not None and _spec.loader is not None
    _cheats = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_cheats)
    CHEATS, PATCH, PLANT, PLUGIN = _cheats.CHEATS, _cheats.PATCH, _cheats.PLANT, _cheats.PLUGIN


def _tasks(per_library: int) -> list[Any]:
    _, tasks = load_manifest()
    chosen: dict[str, list[Any]] = collections.defaultdict(list)
    for task in tasks:
        if task.split == "test" and len(chosen[task.library]) < per_library:
            chosen[task.library].append(task)
    return [t for group in chosen.values() for t in group]


def _box(kind: str, task: Any, **limits: Any) -> Any:
    known = {k: v for k, v in limits.items() if k in Limits.__dataclass_fields__}
    return sandbox_class(kind)(
        source_tree(task.lib), overlay={task.file: task.mutated_source()}, limits=Limits(**known)
    )


def _grade(box: Any, task: Any) -> dict[str, Any]:
    root = source_tree(task.lib)
    restore = {rel: (root / rel).read_bytes() for rel in test_files(task.lib, root)}
    run = box.run_pytest(
        [*task.fail_to_pass, *task.pass_to_pass], restore=restore, pythonpath=task.lib.pythonpath, timeout=300
    )
    return score(run, task.fail_to_pass, task.pass_to_pass)


def cheats(kind: str, tasks: list[Any]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name, template in CHEATS.items():
        wins = errors = 0
        for task in tasks:
            pkg = task.file.split("/")[0] if "/" in task.file else "."
            tests = " ".join(sorted({t.split("::")[0] for t in task.fail_to_pass}))
            try:
                with _box(kind, task, timeout=30) as box:
                    box.write_file(".attack/plugin.py", PLUGIN.encode())
                    box.write_file(".attack/patch.py", PATCH.encode())
                    box.run(PLANT)
                    box.run(template.format(pkg=pkg, tests=tests))
                    wins += bool(_grade(box, task)["resolved"])
            except Exception as err:  # noqa: BLE001 - a grader crash is reported, not a win
                errors += 1
                print(f"{name} on {task.id}: {type(err).__name__}: {err}", file=sys.stderr)
        results[name] = {"resolved": wins, "tasks": len(tasks), "grader_errors": errors}
    return results


def _host_processes(marker: str) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker in Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace"):
                    count += 1
            except OSError:
                pass
    return count


def host_attacks(kind: str, task: Any) -> dict[str, Any]:
    """The attacks on the host and the machine, each with what it achieved."""
    out: dict[str, Any] = {}
    marker = f"{7000 + os.getpid() % 1000}.{time.time_ns() % 10000}"
    with _box(kind, task, timeout=5, memory_mb=512, disk_mb=256) as box:
        traced = box.run(
            'python3 -c "import ctypes; l = ctypes.CDLL(None, use_errno=True); '
            'print(l.ptrace(16, 1, 0, 0), ctypes.get_errno())"'
        ).output.split()
        out["ptrace of the namespace init"] = "allowed" if traced[:1] == ["0"] else f"refused (errno {traced[-1:]})"
        box.run(f"(setsid nohup sleep {marker} >/dev/null 2>&1 &)")
        out["processes alive after the command"] = _host_processes(f"sleep {marker}")
        six = box.run("find / -name six.py -not -path '/proc/*' -not -path '/workspace/*' 2>/dev/null | wc -l")
        out["copies of six.py readable outside the workspace"] = int((six.output.split() or ["0"])[0])
        hog = "python3 -c \"import time; b = bytearray(300 << 20); b[::4096] = b'x' * len(b[::4096]); time.sleep(2)\""
        mem = box.run(f"for i in 1 2 3 4; do {hog} & done; wait", timeout=60)
        out["4 x 300 MiB under memory_mb=512 (+256 disk): processes killed"] = mem.output.count("Killed")
        shm = box.run(
            "for i in $(seq 20); do head -c 60M /dev/zero > /dev/shm/f$i || break; done; du -sm /dev/shm | cut -f1",
            timeout=60,
        )
        out["MiB kept in /dev/shm of 1,200 written (memory_mb=512 +256 disk)"] = int((shm.output.split() or ["0"])[-1])
        disk = box.run(
            "mkdir fill && for i in $(seq 25); do head -c 60M /dev/zero > fill/f$i || break; done; "
            "du -sm fill | cut -f1; rm -rf fill",
            timeout=120,
        )
        out["MiB kept of 1,500 written in 60 MiB files (disk_mb=256)"] = int((disk.output.split() or ["0"])[-1])
        files = box.run("mkdir -p many && cd many && seq 150000 | xargs touch 2>/dev/null; ls | wc -l", timeout=120)
        out["files made of 150,000 (inode quota 100,000)"] = int((files.output.split() or ["0"])[-1])
        box.run("rm -rf many", timeout=120)
        box.run("mkfifo pipe")
        got: list[str] = []

        def read() -> None:
            try:
                box.read_file("pipe")
                got.append("read")
            except Exception as err:  # noqa: BLE001
                got.append(type(err).__name__)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(5)
        out["host read of a FIFO"] = "blocked (> 5 s)" if reader.is_alive() else f"answered at once ({got[0]})"
    with _box(kind, task, timeout=120) as box:
        box.run(
            "python3 -c \"import os\nos.mkdir('deep'); os.chdir('deep')\nfor i in range(3000):\n"
            "    os.mkdir('d'); os.chdir('d')\""
        )
        root = getattr(box, "_root", None)
        try:
            report = _grade(box, task)
            out["3,000-level tree: grading"] = f"graded (resolved={report['resolved']})"
        except RecursionError:
            out["3,000-level tree: grading"] = "RecursionError"
        try:
            box.close()
            out["3,000-level tree: close"] = "folder left" if root is not None and Path(root).exists() else "clean"
        except RecursionError:
            out["3,000-level tree: close"] = "RecursionError"
    with tempfile.TemporaryDirectory() as tmp:
        victim = Path(tmp) / "victim"
        victim.mkdir()
        (victim / "conftest.py").write_text("precious")
        with _box(kind, task, timeout=10) as box:
            box.run(f"ln -s {victim} linked && touch conftest.py")
            _grade(box, task)
            out["host files deleted through a planted link"] = int(not (victim / "conftest.py").exists())
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kind", default="bwrap", choices=["bwrap", "docker"])
    parser.add_argument("--per-library", type=int, default=2, help="test tasks per library for the grader cheats")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    tasks = _tasks(args.per_library)
    started = time.perf_counter()
    result = {
        "sandbox_module": sandbox_module.__file__,
        "kind": args.kind,
        "tasks": [t.id for t in tasks],
        "grader_cheats": cheats(args.kind, tasks),
        "host_attacks": host_attacks(args.kind, tasks[0]) if args.kind == "bwrap" else None,
        "seconds": round(time.perf_counter() - started, 1),
    }
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
