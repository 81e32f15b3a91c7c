"""The SWE environment: fix an injected bug in a real library, in a sandbox, graded as SWE-bench grades."""

from __future__ import annotations

import functools
import inspect
import json
import random
import re
import shlex
from collections.abc import Sequence
from typing import Any, ClassVar

from envgym.environments.swe import images
from envgym.environments.swe.grading import score
from envgym.environments.swe.libraries import Library, SetupMissingError, by_name, source_files, source_tree, test_files
from envgym.environments.swe.patch import model_patch
from envgym.environments.swe.tasks import SWETask, select_tasks

from envgym.core import InvalidAction, Task, TextEnv, Transition
from envgym.errors import ConfigError, InvalidKwargsError, NotAvailableError, check_choice
from envgym.sandbox import Limits, sandbox_class
from envgym.tools import ToolCallError, parse_tool_calls, tool_error, tool_schemas, tools_card

__all__ = ["STRUCTURED_TOOLS", "SUBMIT_COMMANDS", "SWEEnv", "format_output", "grade", "restore_map"]

#: Commands that end the episode and grade the workspace (mini-swe-agent's marker works too).
SUBMIT_COMMANDS = ("submit", "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")
#: Longest command accepted (characters); longer ones are invalid steps.
MAX_COMMAND = 20_000
_FENCE = re.compile(r"```[ \t]*(?:bash|sh|shell|console|mswea_bash_command)?[ \t]*\n(.*?)```", re.DOTALL)
_TAG = re.compile(r"<\s*(action|command|mswea_bash_command)\s*>(.*?)(?:<\s*/\s*\1\s*>|$)", re.IGNORECASE | re.DOTALL)
TOOLS = ("bash", "structured")
_JSON_FENCE = re.compile(r"```[ \t]*json[ \t]*\n(.*?)```", re.DOTALL)
_PATH = {"type": "string", "description": "a path relative to /workspace"}
#: The tools of ``envgym/SWE-Tools-v0`` as OpenAI function schemas (``info["tools"]``; one shared
#: list: read it, do not mutate it).
STRUCTURED_TOOLS: list[dict[str, Any]] = tool_schemas(
    [
        {
            "name": "view",
            "description": "Show lines start..end of a file, numbered (100 lines from start when end is left out).",
            "parameters": {
                "properties": {
                    "path": _PATH,
                    "start": {"type": "integer", "minimum": 1, "description": "first line (default 1)"},
                    "end": {"type": "integer", "minimum": 1, "description": "last line"},
                },
                "required": ["path"],
            },
        },
        {
            "name": "replace",
            "description": "Replace the one occurrence of old by new in a file (old must occur exactly once).",
            "parameters": {
                "properties": {
                    "path": _PATH,
                    "old": {"type": "string", "minLength": 1, "description": "the exact text to replace"},
                    "new": {"type": "string", "description": "the replacement"},
                },
                "required": ["path", "old", "new"],
            },
        },
        {
            "name": "search",
            "description": "grep -rn a pattern (a basic regular expression) in the Python files under path.",
            "parameters": {
                "properties": {
                    "pattern": {"type": "string", "description": "what to look for"},
                    "path": {**_PATH, "description": "a file or folder relative to /workspace (default .)"},
                },
                "required": ["pattern"],
            },
        },
        {
            "name": "run_tests",
            "description": "Run pytest on test ids or files (all the tests when none are given).",
            "parameters": {
                "properties": {
                    "tests": {
                        "type": "array",
                        "items": {"type": "string", "minLength": 1},
                        "description": "test ids (tests/test_x.py::test_y) or files",
                    }
                },
            },
        },
        {
            "name": "submit",
            "description": "End the episode: the original tests are run on the workspace and graded.",
            "parameters": {"properties": {}},
        },
    ]
)
_PARAMETERS = {s["function"]["name"]: s["function"]["parameters"] for s in STRUCTURED_TOOLS}


_PYTEST_CLOCK = re.compile(
    r"\b((?:passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?|no tests ran)[^\n]*? in )"
    r"\d+(?:\.\d+)?s(?: \(\d+:\d\d:\d\d\))?"
)


def format_output(output: str, exit_code: int | None, limit: int, note: str = "") -> str:
    """mini-swe-agent's observation: return code and output, cut to head and tail past ``limit`` characters.

    pytest's wall time in its summary line (``3 passed in 0.12s``) reads ``in <time>``: the one
    clock reading that common commands print, removed so that episodes replay exactly.
    """
    output = _PYTEST_CLOCK.sub(r"\1<time>", output)
    if len(output) > limit:
        half = limit // 2
        elided = len(output) - 2 * half
        output = (
            f"{output[:half]}\n[... {elided} characters elided: the output was longer than {limit} characters; "
            f"narrow the command (head, tail, grep, sed -n) to see the middle ...]\n{output[-half:]}"
        )
    code = "none" if exit_code is None else str(exit_code)
    text = f"<returncode>{code}</returncode>\n<output>\n{output}</output>"
    return f"{text}\n<note>{note}</note>" if note else text


@functools.lru_cache(maxsize=32)
def _restore(key: str) -> tuple[tuple[str, bytes], ...]:
    lib = by_name(key.split("@", 1)[0])
    root = source_tree(lib)
    return tuple((rel, (root / rel).read_bytes()) for rel in test_files(lib, root))


def restore_map(lib: Library) -> dict[str, bytes]:
    """What grading writes back before it runs the tests: every test file, conftest and config (pristine)."""
    return dict(_restore(f"{lib.name}@{lib.version}"))


def grade(box: Any, task: SWETask, *, timeout: float = 300.0, per_test_timeout: float | None = 30.0) -> dict[str, Any]:
    """Grade the sandbox's workspace for ``task`` as SWE-bench grades (see :mod:`.grading`).

    The original test files (and conftest/config files) are restored and FAIL_TO_PASS +
    PASS_TO_PASS run in a fresh pytest process inside the sandbox; outcomes come from its JUnit
    XML (never from printed text) and pytest's exit code.
    """
    lib = task.lib
    run = box.run_pytest(
        [*task.fail_to_pass, *task.pass_to_pass],
        restore=restore_map(lib),
        pythonpath=lib.pythonpath,
        timeout=timeout,
        per_test_timeout=per_test_timeout,
    )
    return score(run, task.fail_to_pass, task.pass_to_pass)


def _libraries_kwarg(libraries: str | Sequence[str] | None) -> tuple[str, ...] | None:
    if libraries is None:
        return None
    names = [libraries] if isinstance(libraries, str) else list(libraries)
    if not names or not all(isinstance(n, str) for n in names):
        raise InvalidKwargsError(f"libraries must be None, a library name or a list of names, got {libraries!r}.")
    return tuple(by_name(n).name for n in names)


class SWEEnv(TextEnv):
    """Fix a bug injected into a real Python library, in a sandbox; graded as SWE-bench grades.

    **Description.** Each episode is one task of the shipped manifest (``environments/swe/data``): a small
    bug (a flipped comparison, an off-by-one, a wrong operator or constant, a dropped branch or
    return, swapped arguments, a wrong default) injected into one of eight pinned PyPI libraries
    (toolz, inflection, six, cachetools, boltons, tabulate, isodate, webcolors) so that some of the
    library's own tests fail. The problem statement names the failing tests and their assertion
    messages, never the fix. The workspace ``/workspace`` holds the library's tree with the bug and
    nothing else: no git history, no copy of the original file.

    **Observation.** At reset: the problem statement and how to act. After each command, as
    mini-swe-agent shows it: ``<returncode>N</returncode><output>...</output>``, the output cut
    to its head and tail past ``output_limit`` characters with a note saying so (pytest's run
    time in its summary line reads ``in <time>`` so that episodes replay exactly).

    **Actions.** ``tools="bash"`` (``envgym/SWE-v0``): one bash command per action (the content of
    a fenced ```` ```bash ```` block or of ``<action>...</action>`` if present, else the whole
    text), run in a fresh shell in ``/workspace`` (no network, resource limits, a
    ``command_timeout``). ``submit`` (or mini-swe-agent's ``echo
    COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``) ends the episode and grades the workspace.
    ``tools="structured"`` (``envgym/SWE-Tools-v0``): one tool call per action in the dialect
    of docs/tools.md, ``{"name": "view", "arguments": {"path": P, "start": 1, "end": 40}}``
    (a ```` ```json ```` fenced block is read too); the tools (``view``, ``replace``, ``search``,
    ``run_tests``, ``submit``) are in ``info["tools"]`` as OpenAI function schemas at reset and
    on every step (``info["parallel_tool_calls"]`` is false: one call per turn) and listed in
    the card of ``envgym/SWE-Tools-v0``. The old form ``{"tool": "view", "path": P, ...}`` is
    still accepted in this release, with ``info["deprecation"]`` saying what to write instead.
    Empty, oversized or NUL-holding commands and malformed tool calls (an unknown tool, arguments
    that break its schema: the observation is the error, ``Tool error (view): ...``) are invalid
    steps.

    **Reward components.** ``resolved_reward`` (1 when resolved), ``f2p_fraction_reward`` (the
    fraction of FAIL_TO_PASS tests passing), ``p2p_broken_reward`` (minus the number of
    PASS_TO_PASS tests broken), plus ``invalid_action_reward`` and ``step_cost_reward``. The
    default reward is ``resolved_reward`` (the other two weigh 0; pass ``reward=`` to change it).
    Grading restores the original test files and runs FAIL_TO_PASS and PASS_TO_PASS in a fresh
    pytest process inside the sandbox, decided from pytest's JUnit XML written out of the agent's
    reach and its exit code. ``info["grading"]`` holds the per-test outcomes after submit.

    **Reward basis.** ``resolved_reward``, ``invalid_action_reward``, ``step_cost_reward``: the
    reward is their sum. Diagnostic (weight 0 unless ``reward=`` weighs them):
    ``f2p_fraction_reward``, ``p2p_broken_reward``.

    **Episode end.** ``submit`` (terminated; success when resolved), ``max_turns`` (default 50,
    truncated), ``invalid_limit``.

    **Arguments.** ``sandbox``: ``"bwrap"`` (default) or ``"docker"`` (needs ``envgym[swe]`` and a
    running engine; uses the per-library image when it is built); ``libraries``: a name or list of
    names to draw tasks from (default all); ``tools``; ``output_limit`` (characters, default
    10,000); ``command_timeout`` (seconds per command, default 30); ``manifest``: another task
    manifest's path; ``reset(options={"task_id": ...})`` picks a task; the common ``TextEnv``
    arguments (``split``: train/test, disjoint by library file).

    **Final diff.** The last step's ``info["model_patch"]`` (SWE-bench's name) is the workspace's
    change as a git patch against the task's start (the pristine tree with the bug), whatever ended
    the episode: ``git apply`` on that start rebuilds the workspace (byte-code caches left out).
    Taken before grading, so edits to test files show too.

    **Version history.** v0: first release (manifest format 1); the structured tools in the
    dialect of docs/tools.md (``{"name", "arguments"}``), the ``{"tool": ...}`` form deprecated.
    """

    name: ClassVar[str] = "swe"
    metadata: ClassVar[dict[str, Any]] = {**TextEnv.metadata, "picklable": False}
    reward_components: ClassVar[tuple[str, ...]] = (
        "resolved_reward",
        "f2p_fraction_reward",
        "p2p_broken_reward",
        "invalid_action_reward",
        "step_cost_reward",
    )
    reward_basis: ClassVar[tuple[str, ...]] = ("resolved_reward", "invalid_action_reward", "step_cost_reward")
    default_max_turns: ClassVar[int] = 50

    @classmethod
    def env_card(cls, kwargs: dict[str, Any] | None = None) -> str:
        """The card; for ``tools="structured"`` (``envgym/SWE-Tools-v0``) its tools too."""
        card = inspect.getdoc(cls) or cls.__name__
        if (kwargs or {}).get("tools") == "structured":
            card = f"{card}\n\n{tools_card(STRUCTURED_TOOLS)}"
        return card

    def __init__(
        self,
        *,
        sandbox: str = "bwrap",
        libraries: str | Sequence[str] | None = None,
        tools: str = "bash",
        output_limit: int = 10_000,
        command_timeout: float = 30.0,
        manifest: str | None = None,
        max_turns: int | None = None,
        invalid_limit: int | None = None,
        invalid_penalty: float = 0.0,
        step_cost: float = 0.0,
        reward: Any = None,
        split: str = "train",
        render_mode: str | None = None,
    ) -> None:
        if reward is None:
            reward = {"f2p_fraction_reward": 0.0, "p2p_broken_reward": 0.0}
        super().__init__(
            max_turns=max_turns,
            invalid_limit=invalid_limit,
            invalid_penalty=invalid_penalty,
            step_cost=step_cost,
            reward=reward,
            split=split,
            render_mode=render_mode,
        )
        self.sandbox_kind = check_choice("sandbox", sandbox, ("bwrap", "docker"))
        self._sandbox_class = sandbox_class(sandbox)
        reason = self._sandbox_class.unavailable_reason()
        if reason is not None:
            if self.sandbox_kind == "bwrap":
                raise SetupMissingError(f"The SWE environments' bwrap sandbox is not usable here: {reason}")
            raise NotAvailableError(f"The SWE environments' docker sandbox is not usable here: {reason}")
        self.tools = check_choice("tools", tools, TOOLS)
        if not isinstance(output_limit, int) or isinstance(output_limit, bool) or output_limit < 200:
            raise InvalidKwargsError(f"output_limit must be an integer >= 200, got {output_limit!r}.")
        if (
            not isinstance(command_timeout, (int, float))
            or isinstance(command_timeout, bool)
            or not 0.5 <= command_timeout <= 3600
        ):
            raise InvalidKwargsError(
                f"command_timeout must be a number of seconds in [0.5, 3600], got {command_timeout!r}."
            )
        self.output_limit = output_limit
        self.command_timeout = float(command_timeout)
        self.libraries = _libraries_kwarg(libraries)
        self.manifest = manifest
        try:
            self.tasks = select_tasks(split, self.libraries, manifest)
        except (OSError, ValueError, KeyError) as err:
            raise InvalidKwargsError(f"cannot read the SWE task manifest {manifest or 'shipped'!r}: {err!r}") from err
        if not self.tasks:
            raise InvalidKwargsError(f"no SWE task in split {split!r} for libraries {self.libraries!r}.")
        for name in sorted({t.library for t in self.tasks}):
            source_tree(by_name(name))  # fail at make() when the install step did not fetch the sources
        self.current: SWETask | None = None
        self.box: Any = None
        self.grading: dict[str, Any] | None = None
        self.patch: str | None = None
        self._last = ""
        self._raw = ""
        self._files: tuple[str, ...] = ()
        self._deprecation: str | None = None

    # ------------------------------------------------------------------ sandbox
    def _open(self, task: SWETask) -> None:
        self._close_box()
        lib = task.lib
        image = None
        if self.sandbox_kind == "docker":
            name = images.library_image(lib)
            image = name if images.image_exists(name) else None
        limits = Limits(timeout=self.command_timeout, max_output_bytes=max(4 * self.output_limit, 1 << 16))
        self.box = self._sandbox_class(
            source_tree(lib), overlay={task.file: task.mutated_source()}, image=image, limits=limits
        )

    def _close_box(self) -> None:
        if self.box is not None:
            box, self.box = self.box, None
            box.close()

    def close(self) -> None:
        super().close()
        self._close_box()

    # ------------------------------------------------------------------ TextEnv hooks
    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        wanted = (options or {}).get("task_id")
        if wanted is not None:
            matches = [t for t in self.tasks if t.id == wanted]
            if not matches:
                raise InvalidKwargsError(
                    f"task_id {wanted!r} is not a {self.split!r} task of this environment's libraries."
                )
            task = matches[0]
        else:
            task = self.tasks[rng.randrange(len(self.tasks))]
        self.current = task
        self.grading = None
        self.patch = None
        self._last = "(no command run yet)"
        self._files = tuple(source_files(task.lib))
        self._open(task)
        return Task(
            id=task.id,
            goal=task.problem_statement,
            split=self.split,
            difficulty=task.library,
            extra={
                "library": task.library,
                "version": task.version,
                "fail_to_pass": list(task.fail_to_pass),
                "tools": self.tools,
                "sandbox": self.sandbox_kind,
                **({"manifest": str(self.manifest)} if self.manifest else {}),
            },
        )

    def _intro(self) -> str:
        assert self.current is not None
        task = self.current
        head = (
            f"You are in the repository of the Python library {task.library} {task.version} at /workspace "
            "(no git history). Tests run with Debian's python3 and pytest: `python3 -m pytest <test id>`.\n\n"
            f"{task.problem_statement}\n\n"
        )
        if self.tools == "bash":
            return head + (
                "Each action is ONE bash command, run in a fresh shell in /workspace (cd and variables do not "
                f"persist; no network; {self.command_timeout:g} s per command). Write it in a ```bash fenced block "
                "or <action>...</action>. Long output is cut in the middle. When the bug is fixed, send the "
                "command `submit`: the episode ends and the original tests are run on your code."
            )
        return head + (
            'Each action is ONE JSON tool call {"name": ..., "arguments": {...}}:\n'
            '  {"name": "view", "arguments": {"path": "pkg/mod.py", "start": 1, "end": 60}}\n'
            '  {"name": "replace", "arguments": {"path": "pkg/mod.py", "old": "exact text", "new": "replacement"}}\n'
            '  {"name": "search", "arguments": {"pattern": "def name", "path": "."}}\n'
            '  {"name": "run_tests", "arguments": {"tests": ["tests/test_x.py::test_y"]}}\n'
            '  {"name": "submit", "arguments": {}}   (ends the episode; the original tests are run on your code)'
        )

    def _observe(self) -> str:
        return self._last

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if isinstance(action, str):
            self._raw = action
        elif isinstance(action, (bytes, bytearray)):
            self._raw = bytes(action).decode("utf-8", errors="replace")
        else:
            self._raw = ""
        return super().step(action)

    def _command(self) -> str:
        """The command in the raw action text (fenced block, tag, or the text), whitespace kept."""
        text = self._raw
        if self.tools == "structured":
            json_fences = _JSON_FENCE.findall(text)
            if json_fences:
                return json_fences[-1].strip()
        fences = _FENCE.findall(text)
        if fences:
            command = fences[-1]
        else:
            tags = _TAG.findall(text)
            command = tags[-1][1] if tags else text
        return command.strip()

    def _parse(self, text: str) -> Any:
        command = self._command()
        if not command:
            raise InvalidAction(
                "expected one bash command (or `submit`), got nothing."
                if self.tools == "bash"
                else "expected a JSON tool call."
            )
        if len(command) > MAX_COMMAND:
            raise InvalidAction(f"the command is {len(command)} characters long; at most {MAX_COMMAND} are accepted.")
        if "\x00" in command:
            raise InvalidAction("commands cannot contain NUL bytes.")
        if self.tools == "bash":
            first = command.splitlines()[0].strip()
            if command in SUBMIT_COMMANDS or first in SUBMIT_COMMANDS[1:]:
                return ("submit", {})
            return ("bash", {"command": command})
        return self._parse_tool(command)

    def _parse_tool(self, command: str) -> tuple[str, dict[str, Any]]:
        if command.strip() == "submit":
            return ("submit", {})
        try:
            (call,) = parse_tool_calls(command, _PARAMETERS, legacy=True)
        except ToolCallError as err:
            raise InvalidAction(str(err)) from None
        self._deprecation = call.deprecation
        arguments = dict(call.arguments)
        if call.name == "run_tests" and any(t.startswith("-") for t in arguments.get("tests", ())):
            raise InvalidAction(tool_error("run_tests", "arguments.tests: test ids or files, not options."))
        if call.name == "search" and str(arguments.get("path", ".")).startswith("-"):
            raise InvalidAction(tool_error("search", "arguments.path: a relative path, not an option."))
        return (call.name, arguments)

    def _apply(self, action: tuple[str, dict[str, Any]]) -> Transition:
        tool, args = action
        if tool == "submit":
            return self._submit()
        if tool == "bash":
            result = self.box.run(args["command"])
            self._last = format_output(result.output, result.exit_code, self.output_limit, result.note)
        elif tool == "view":
            self._last = self._view(args["path"], args.get("start", 1), args.get("end"))
        elif tool == "replace":
            self._last = self._replace(args["path"], args["old"], args["new"])
        elif tool == "search":
            path = args.get("path", ".")
            result = self.box.run(f"grep -rn --include='*.py' -e {shlex.quote(args['pattern'])} -- {shlex.quote(path)}")
            self._last = format_output(result.output, result.exit_code, self.output_limit, result.note)
        else:  # run_tests
            targets = " ".join(shlex.quote(t) for t in args.get("tests", []))
            result = self.box.run(f"python3 -m pytest -q -p no:cacheprovider {targets}")
            self._last = format_output(result.output, result.exit_code, self.output_limit, result.note)
        return Transition(self._last)

    def _view(self, path: str, start: int, end: int | None) -> str:
        data = self._read(path)
        lines = data.decode("utf-8", errors="replace").splitlines()
        stop = min(len(lines), end if end is not None else start + 99)
        if start > max(len(lines), 1):
            raise InvalidAction(f"{path} has {len(lines)} lines; start {start} is past the end.")
        body = "\n".join(f"{n:6d}\t{lines[n - 1]}" for n in range(start, stop + 1))
        return format_output(body + ("\n" if body else ""), 0, self.output_limit, f"{path}: {len(lines)} lines")

    def _read(self, path: str) -> bytes:
        try:
            return self.box.read_file(path)
        except (FileNotFoundError, IsADirectoryError):
            raise InvalidAction(f"no file {path!r} in the workspace.") from None
        except (PermissionError, ConfigError, ValueError, OSError) as err:
            raise InvalidAction(f"cannot read {path!r}: {err}") from None

    def _replace(self, path: str, old: str, new: str) -> str:
        text = self._read(path).decode("utf-8", errors="surrogateescape")
        count = text.count(old)
        if count != 1:
            raise InvalidAction(f"the old string occurs {count} times in {path}; it must occur exactly once.")
        try:
            self.box.write_file(path, text.replace(old, new, 1).encode("utf-8", errors="surrogateescape"))
        except (PermissionError, ConfigError, ValueError, OSError) as err:
            raise InvalidAction(f"cannot write {path!r}: {err}") from None
        line = text[: text.index(old)].count("\n") + 1
        return format_output(f"replaced 1 occurrence in {path} at line {line}\n", 0, self.output_limit)

    def _final_patch(self) -> str:
        """The workspace's diff against the task's start (SWE-bench's ``model_patch``), taken once per episode."""
        if self.patch is None:
            assert self.current is not None and self.box is not None
            task = self.current
            self.patch = model_patch(self.box, source_tree(task.lib), {task.file: task.mutated_source()})
        return self.patch

    def _submit(self) -> Transition:
        assert self.current is not None
        self._final_patch()  # before grading, which writes the original tests back
        grading = grade(self.box, self.current)
        self.grading = {k: v for k, v in grading.items() if k != "seconds"}  # no clock in info: replays compare it
        task = self.current
        f2p_ok = sum(o == "passed" for o in grading["fail_to_pass"].values())
        verdict = "RESOLVED" if grading["resolved"] else "NOT RESOLVED"
        lines = [
            f"Submitted. {verdict}.",
            (
                f"FAIL_TO_PASS: {f2p_ok}/{len(task.fail_to_pass)} passing; "
                f"PASS_TO_PASS: {len(grading['pass_to_pass_broken'])}/{len(task.pass_to_pass)} broken."
            ),
        ]
        if not grading["report_ok"]:
            lines.append("The test run produced no report (it crashed or timed out).")
        self._last = "\n".join(lines)
        self._close_box()
        components = {
            "resolved_reward": 1.0 if grading["resolved"] else 0.0,
            "f2p_fraction_reward": float(grading["f2p_fraction"]),
            "p2p_broken_reward": -float(len(grading["pass_to_pass_broken"])),
        }
        return Transition(self._last, components, terminated=True, success=bool(grading["resolved"]))

    def _info(self, components: dict[str, float], valid: bool, success: bool, reason: Any) -> dict[str, Any]:
        info = super()._info(components, valid, success, reason)
        if self.tools == "structured":
            info["tools"] = STRUCTURED_TOOLS
            info["parallel_tool_calls"] = False
            if self._deprecation is not None:
                info["deprecation"], self._deprecation = self._deprecation, None
        if reason is not None and self.current is not None:
            info["model_patch"] = self._final_patch()
        if self.grading is not None and reason is not None:
            info["grading"] = json.loads(json.dumps(self.grading))
        return info

    # ------------------------------------------------------------------ random agent
    def sample_action(self, rng: random.Random) -> str:
        """A plausible exploring action (read-only commands), or ``submit`` about one time in six."""
        if rng.random() < 1 / 6:
            return "submit" if self.tools == "bash" else '{"name": "submit", "arguments": {}}'
        files = self._files or ("README.rst",)
        path = rng.choice(files)
        if self.tools == "structured":
            start = rng.randint(1, 60)
            if rng.random() < 0.5:
                return json.dumps({"name": "view", "arguments": {"path": path, "start": start, "end": start + 20}})
            word = rng.choice(["def ", "return", "if ", "raise", "class "])
            return json.dumps({"name": "search", "arguments": {"pattern": word, "path": path}})
        quoted = shlex.quote(path)
        choices = [
            "ls",
            "ls -R | head -40",
            f"head -n 30 {quoted}",
            f"sed -n '{rng.randint(1, 80)},+15p' {quoted}",
            f"grep -n 'def ' {quoted} | head -20",
            f"wc -l {quoted}",
            "pwd",
            "python3 -c 'import sys; print(sys.version_info[:2])'",
        ]
        return rng.choice(choices)
