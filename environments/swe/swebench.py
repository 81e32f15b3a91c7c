"""SWE-bench / SWE-Gym instances: load them, lay out a history-free workspace, grade a patch in a sandbox.

An instance (SWE-bench's schema, which SWE-Gym shares) names a repository, a base commit, a problem
statement, a ``test_patch`` (the tests that check the fix, applied only at grading time), the gold
``patch`` and the ``FAIL_TO_PASS`` / ``PASS_TO_PASS`` test ids (JSON lists, as strings or lists).

* :func:`load_instances` reads a JSON list, a JSON-lines file or rows already in memory.
* :func:`prepare` exports the base commit of a local clone with ``git archive`` (so the workspace
  has no ``.git``, no later commits, branches or reflogs to leak the fix) and computes what grading
  restores: every file the ``test_patch`` touches, as it reads after the patch.
* :func:`evaluate` opens a sandbox on that tree (``docker`` by default, the backend SWE-bench
  images target; ``bwrap`` works for pure-Python repositories), applies a model patch inside it as
  SWE-bench does (``git apply``, then ``patch --fuzz``), and grades with :mod:`.grading`'s rules.

Repositories are never cloned here (no network at run time): pass a local clone.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envgym.environments.swe.grading import score

from envgym.errors import ConfigError
from envgym.sandbox import sandbox_class

__all__ = ["SWEBenchInstance", "Workspace", "evaluate", "load_instances", "patch_paths", "prepare"]

_DIFF_HEADER = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.MULTILINE)


def _id_list(value: Any, field_name: str, instance: str) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except ValueError as err:
            raise ConfigError(f"instance {instance!r}: {field_name} is not a JSON list: {value[:80]!r}.") from err
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"instance {instance!r}: {field_name} must be a list of test ids, got {value!r:.80}.")
    return tuple(value)


@dataclass(frozen=True)
class SWEBenchInstance:
    """One SWE-bench / SWE-Gym task instance."""

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    test_patch: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    patch: str = ""
    version: str = ""
    hints_text: str = ""
    environment_setup_commit: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> SWEBenchInstance:
        missing = [k for k in ("instance_id", "repo", "base_commit", "problem_statement", "test_patch") if k not in row]
        if missing:
            raise ConfigError(f"a SWE-bench instance needs {', '.join(missing)}; got the keys {sorted(row)}.")
        iid = str(row["instance_id"])
        known = {
            "instance_id", "repo", "base_commit", "problem_statement", "test_patch", "patch", "version",
            "hints_text", "environment_setup_commit", "FAIL_TO_PASS", "PASS_TO_PASS",
        }  # fmt: skip
        return cls(
            instance_id=iid,
            repo=str(row["repo"]),
            base_commit=str(row["base_commit"]),
            problem_statement=str(row["problem_statement"]),
            test_patch=str(row["test_patch"]),
            fail_to_pass=_id_list(row.get("FAIL_TO_PASS", []), "FAIL_TO_PASS", iid),
            pass_to_pass=_id_list(row.get("PASS_TO_PASS", []), "PASS_TO_PASS", iid),
            patch=str(row.get("patch") or ""),
            version=str(row.get("version") or ""),
            hints_text=str(row.get("hints_text") or ""),
            environment_setup_commit=str(row.get("environment_setup_commit") or ""),
            extra={k: v for k, v in row.items() if k not in known},
        )


def load_instances(source: str | Path | Iterable[Mapping[str, Any]]) -> list[SWEBenchInstance]:
    """Instances from a ``.json`` list, a ``.jsonl`` file, or an iterable of rows."""
    if isinstance(source, (str, Path)):
        text = Path(source).read_text(encoding="utf-8")
        stripped = text.lstrip()
        if stripped.startswith("["):
            rows = json.loads(text)
        else:
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    else:
        rows = list(source)
    return [SWEBenchInstance.from_dict(row) for row in rows]


def patch_paths(patch: str) -> list[str]:
    """The files a unified git diff touches (their new names), in order."""
    return list(dict.fromkeys(b for _a, b in _DIFF_HEADER.findall(patch)))


@dataclass(frozen=True)
class Workspace:
    """A history-free tree at the base commit and what grading restores over it."""

    tree: Path
    restore: Mapping[str, bytes]
    instance: SWEBenchInstance


def _git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    try:
        proc = subprocess.run(
            ["git", "-C", str(repo), *args], input=stdin, capture_output=True, check=False, timeout=300
        )
    except FileNotFoundError as err:
        raise ConfigError("git is needed to read SWE-bench repositories: apt-get install git.") from err
    if proc.returncode != 0:
        raise ConfigError(f"git {' '.join(args[:2])} failed in {repo}: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout


def prepare(instance: SWEBenchInstance, repo: str | Path, dest: str | Path) -> Workspace:
    """Export ``instance.base_commit`` of the local clone ``repo`` into ``dest/tree`` (no ``.git``).

    The returned :class:`Workspace` restores, at grading, every file of the ``test_patch`` as it
    reads once that patch is applied to the base commit (the agent never sees those tests), and
    the base commit's ``conftest.py`` and pytest configuration files.
    """
    repo, dest = Path(repo), Path(dest)
    tree = dest / "tree"
    tree.mkdir(parents=True, exist_ok=False)
    archive = _git(repo, "archive", "--format=tar", instance.base_commit)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True, timeout=300)
    # conftest and pytest configuration as the base commit has them (grading deletes unlisted ones)
    restore: dict[str, bytes] = {p.relative_to(tree).as_posix(): p.read_bytes() for p in tree.rglob("conftest.py")}
    for name in ("pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml"):
        if (tree / name).is_file():
            restore[name] = (tree / name).read_bytes()
    if instance.test_patch.strip():
        scratch = Path(tempfile.mkdtemp(prefix="envgym-swebench-", dir=dest))
        try:
            shutil.copytree(tree, scratch / "t")
            proc = subprocess.run(
                ["git", "apply", "--whitespace=nowarn", "-"],
                cwd=scratch / "t",
                input=instance.test_patch.encode(),
                capture_output=True,
                check=False,
                timeout=120,
            )
            if proc.returncode != 0:
                raise ConfigError(
                    f"instance {instance.instance_id!r}: its test_patch does not apply to {instance.base_commit}: "
                    f"{proc.stderr.decode(errors='replace').strip()}"
                )
            for rel in patch_paths(instance.test_patch):
                path = scratch / "t" / rel
                if path.is_file():
                    restore[rel] = path.read_bytes()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    # grading drops any __init__.py of a test folder that it does not restore (one the agent
    # planted runs before the tests): the base commit's own ones are restored
    for rel in list(restore):
        name = rel.rsplit("/", 1)[-1]
        if "/" in rel and name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")):
            init = f"{rel.rsplit('/', 1)[0]}/__init__.py"
            if (tree / init).is_file():
                restore.setdefault(init, (tree / init).read_bytes())
    return Workspace(tree, restore, instance)


_APPLY = (
    "git apply --verbose .envgym_model.patch || git apply --verbose --reject .envgym_model.patch || "
    "patch --batch --forward --fuzz=5 -p1 -i .envgym_model.patch"
)


def evaluate(
    instance: SWEBenchInstance,
    repo: str | Path,
    model_patch: str | None,
    *,
    sandbox: str = "docker",
    image: str | None = None,
    pythonpath: Sequence[str] = ("",),
    timeout: float = 600.0,
) -> dict[str, Any]:
    """Grade ``model_patch`` on ``instance`` in a fresh sandbox, as SWE-bench's harness does.

    Returns :func:`envgym.environments.swe.grading.score`'s report plus ``patch_applied``
    (``None`` when there was no patch). A patch that does not apply is not resolved.
    """
    cls = sandbox_class(sandbox)
    with tempfile.TemporaryDirectory(prefix="envgym-swebench-") as tmp:
        ws = prepare(instance, repo, tmp)
        with cls(ws.tree, image=image) as box:
            applied: bool | None = None
            if model_patch:
                box.write_file(".envgym_model.patch", model_patch.encode())
                result = box.run(_APPLY, timeout=120)
                applied = result.exit_code == 0
                box.run("rm -f .envgym_model.patch")
            if applied is False:
                report: dict[str, Any] = {
                    "resolved": False,
                    "fail_to_pass": dict.fromkeys(instance.fail_to_pass, "missing"),
                    "f2p_fraction": 0.0,
                    "pass_to_pass_broken": sorted(instance.pass_to_pass),
                    "report_ok": False,
                    "exit_code": None,
                    "seconds": 0.0,
                }
            else:
                run = box.run_pytest(
                    [*instance.fail_to_pass, *instance.pass_to_pass],
                    restore=ws.restore,
                    pythonpath=pythonpath,
                    timeout=timeout,
                )
                report = score(run, instance.fail_to_pass, instance.pass_to_pass)
    report["patch_applied"] = applied
    report["instance_id"] = instance.instance_id
    return report
