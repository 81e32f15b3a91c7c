"""Privileged oracle for envgym/SWE-*: reverses the injected mutation through the agent's own interface.

Unlike the other solvers this one is *privileged*: it looks the episode's task up in the
package's task manifest by ``info["task"]["id"]`` (the sandbox never shows the manifest) and
learns the line edit that injected the bug. It then acts as any agent acts:

* ``envgym/SWE-v0`` (bash): one command that runs a short Python program inside the sandbox,
  which checks that the buggy lines are where the manifest says and writes the original lines
  back; then ``submit``.
* ``envgym/SWE-Tools-v0``: one ``replace`` tool call (the buggy lines, widened with the lines
  before them until they are unique in the file, become the original ones); then ``submit``.

It proves every task solvable through the interface and that grading accepts the fix (100 %
resolved), and gives the leaderboard its oracle bundles.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from envgym.environments.swe.libraries import source_tree
from envgym.environments.swe.mutations import split_lines
from envgym.environments.swe.tasks import task_by_id

from envgym.rollout import Policy

__all__ = ["Solver", "fix_command", "fix_tool_call"]

_PROGRAM = r"""import json, pathlib, re, sys
edit = json.loads({payload!r})
path = pathlib.Path(edit["file"])
split = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$").findall
lines = split(path.read_bytes().decode("utf-8"))
start = edit["line"] - 1
count = len(split(edit["mutated"]))
if "".join(lines[start:start + count]) != edit["mutated"]:
    sys.exit("the buggy lines are not where expected")
lines[start:start + count] = [edit["original"]]
path.write_bytes("".join(lines).encode("utf-8"))
print("restored", edit["file"], "line", edit["line"])
"""


def _load_task(info: dict[str, Any]) -> Any:
    task = info.get("task", {})
    return task_by_id(task["id"], task.get("manifest"))


def fix_command(task: Any) -> str:
    """One bash command (a single line) that writes the original lines of ``task`` back."""
    payload = json.dumps({"file": task.file, "line": task.line, "original": task.original, "mutated": task.mutated})
    program = _PROGRAM.format(payload=payload)
    encoded = base64.b64encode(program.encode("utf-8")).decode("ascii")
    return f"python3 -c \"import base64; exec(base64.b64decode('{encoded}'))\""


def fix_tool_call(task: Any) -> str:
    """A ``replace`` tool call whose ``old`` text is unique in the buggy file."""
    pristine = (source_tree(task.lib) / task.file).read_bytes().decode("utf-8")
    buggy = task.mutated_source().decode("utf-8")
    before = split_lines(pristine)[: task.line - 1]
    old, new = task.mutated, task.original
    while buggy.count(old) != 1 and before:
        context = before.pop()
        old, new = context + old, context + new
    return json.dumps({"name": "replace", "arguments": {"path": task.file, "old": old, "new": new}})


class Solver(Policy):
    """Fix the bug with the manifest's line edit, then submit."""

    def __init__(self, env_id: str, seed: int | None = None) -> None:
        self.env_id = env_id
        self.seed = seed
        self._fixed_task: str | None = None

    def act(self, observation: str, info: dict[str, Any]) -> str:
        task_id = info.get("task", {}).get("id")
        structured = info.get("task", {}).get("tools") == "structured"
        if self._fixed_task == task_id:
            return '{"name": "submit", "arguments": {}}' if structured else "submit"
        self._fixed_task = task_id
        task = _load_task(info)
        return fix_tool_call(task) if structured else fix_command(task)
