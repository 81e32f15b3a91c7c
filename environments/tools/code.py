"""envgym/Tools-Code-v0: answer a math or data question with a Python interpreter in envgym's sandbox."""

from __future__ import annotations

import hashlib
import random
import tempfile
from collections.abc import Callable
from typing import Any, ClassVar

from envgym.environments.tools.codetasks import KINDS, CodeTask, answer_matches, draw_task
from envgym.environments.tools.toolenv import ToolTextEnv, call_text

from envgym.core import InvalidAction, Task, Transition
from envgym.errors import InvalidKwargsError, MissingDependencyError, NotAvailableError
from envgym.sandbox import Limits, Sandbox, sandbox_class
from envgym.tools import ToolCall, tool_result

__all__ = ["EFFICIENCY_MAX", "CodeEnv"]

#: Largest ``efficiency_reward``: a correct answer after at most one run of code.
EFFICIENCY_MAX = 0.2
#: Characters of a run's output shown (head and tail kept).
OUTPUT_CHARS = 4000
#: Longest code accepted (characters).
MAX_CODE = 20_000
#: Longest answer accepted (characters).
MAX_ANSWER = 500
#: The file a run's code is written to, in the workspace.
SCRIPT = "main.py"


def run_python(code: str) -> str:
    """Run Python 3 code in a fresh interpreter in the sandbox (working folder: the task's files,
    no network, time and memory limits); returns what it printed and its exit status.

    Args:
        code: a complete Python program; print what you want to see.
    """
    raise NotImplementedError  # pragma: no cover - a schema only


_ANSWER_SCHEMA = {
    "name": "answer",
    "description": "Give the final answer (a number or a word); ends the episode.",
    "parameters": {
        "type": "object",
        "properties": {"value": {"type": ["string", "number"], "description": 'the answer, e.g. 1234 or "West".'}},
        "required": ["value"],
        "additionalProperties": False,
    },
}


def _clip(text: str) -> str:
    if len(text) <= OUTPUT_CHARS:
        return text
    half = OUTPUT_CHARS // 2
    return f"{text[:half]}\n[... {len(text) - OUTPUT_CHARS} characters omitted ...]\n{text[-half:]}"


class CodeEnv(ToolTextEnv):
    """Tools-Code: answer a math or data question, computing with a Python interpreter in a sandbox.

    **Description.** Each episode draws one generated question with a single verifiable answer
    (:mod:`envgym.environments.tools.codetasks`): sums of series, combinatorial counts (binomial
    coefficients, digit sums, lattice paths), statistics over a generated CSV file (a total, a
    mean to 2 decimals, an arg-max) and string puzzles (overlapping occurrences, the most frequent
    letter, distinct palindromic substrings). The numbers are large enough that computing them by
    hand is error-prone: the intended path is to write a short program. Code runs in envgym's
    sandbox (:mod:`envgym.sandbox`, bubblewrap by default): a fresh workspace per episode holding
    the task's files (``data.csv`` for the data questions), no network, its own PID space, limits
    on wall time, CPU, memory, processes, file size, disk and output. Each ``run_python`` starts a
    fresh ``python3`` (``PYTHONHASHSEED=0``); files it writes stay in the workspace for the rest of
    the episode (a pickled copy of the env starts from a fresh workspace with the task's files).

    **Observation.** At reset: the instructions, the tools and the question (for data questions
    also the CSV's header and first rows). After a ``run_python``: ``Tool result (run_python):``,
    the exit status, what the limits cut short (``killed at the 10 s timeout``, ``output
    truncated``, ...) and the output (stdout and stderr, at most 4,000 characters, head and tail).
    After ``answer``: whether it was right and the gold answer.

    **Actions.** One tool call per turn in envgym's dialect (docs/tools.md); ``info["tools"]``
    holds the schemas: ``run_python(code)`` (a whole program, at most 20,000 characters) and
    ``answer(value)`` (a number or a string; ends the episode). A malformed call is an invalid
    step whose observation is the tool error. ``admissible_actions`` is ``None``;
    :meth:`sample_action` proposes random valid calls.

    **Reward components.**
    ``correct_reward``: 1.0 when the answer is right: whole numbers exactly (``"1,234"``,
    ``1234`` and ``1234.0`` are the same), numbers asked to 2 decimals within 0.005, words ignoring
    case and surrounding space.
    ``efficiency_reward``: OTC-style tool-efficiency bonus, only for a right answer:
    ``0.2 * min(1, 1 / runs)``, ``runs`` the ``run_python`` calls made (one run is optimal).
    ``invalid_action_reward``: ``invalid_penalty`` (default -0.1) on an invalid step.
    ``step_cost_reward``: ``step_cost`` (default 0) on every step.

    **Reward basis.** The reward is the sum of every component (``correct_reward``,
    ``efficiency_reward``, ``invalid_action_reward``, ``step_cost_reward``): none is diagnostic.

    **Episode end.** Terminated by ``answer`` (success when right); truncated after
    ``max_turns`` (default 10) steps.

    **Splits.** A task is in ``test`` when a CRC-32 of its kind and parameters is 0 modulo 5,
    else in ``train``: the splits share no task.

    **Arguments.** ``kinds``: the task kinds drawn (default all: ``multiples``, ``arithmetic``,
    ``choose``, ``digit_sum``, ``lattice``, ``csv_total``, ``csv_mean``, ``csv_top``,
    ``overlaps``, ``top_letter``, ``palindromes``); ``sandbox``: ``"bwrap"`` (default) or
    ``"docker"``; ``timeout`` (seconds per run, 0.5 to 60, default 10) and ``memory_mb`` (64 to
    4096, default 512); plus the common :class:`envgym.core.TextEnv` arguments.

    **Version history.** v0: first release.
    """

    name: ClassVar[str] = "tools_code"
    reward_components: ClassVar[tuple[str, ...]] = (
        "correct_reward",
        "efficiency_reward",
        "invalid_action_reward",
        "step_cost_reward",
    )
    reward_basis = reward_components  # their sum: none is diagnostic
    default_max_turns: ClassVar[int] = 10

    @classmethod
    def tool_functions(cls) -> list[Callable[..., Any]]:
        return [run_python, _ANSWER_SCHEMA]  # type: ignore[list-item]

    def __init__(
        self,
        *,
        kinds: tuple[str, ...] | list[str] | None = None,
        sandbox: str = "bwrap",
        timeout: float = 10.0,
        memory_mb: int = 512,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        chosen = tuple(kinds) if kinds is not None else KINDS
        unknown = [k for k in chosen if k not in KINDS]
        if not chosen or unknown or isinstance(kinds, str):
            raise InvalidKwargsError(f"kinds must be a non-empty list of {', '.join(KINDS)}; got {kinds!r}.")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0.5 <= timeout <= 60:
            raise InvalidKwargsError(f"timeout must be a number of seconds from 0.5 to 60, got {timeout!r}.")
        if isinstance(memory_mb, bool) or not isinstance(memory_mb, int) or not 64 <= memory_mb <= 4096:
            raise InvalidKwargsError(f"memory_mb must be an integer from 64 to 4096, got {memory_mb!r}.")
        self._sandbox_class = sandbox_class(sandbox)
        reason = self._sandbox_class.unavailable_reason()
        if reason is not None:
            err = MissingDependencyError("bubblewrap" if sandbox == "bwrap" else "docker", "swe", "Tools-Code")
            NotAvailableError.__init__(err, f"Tools-Code's {sandbox} sandbox is not usable here: {reason}")
            raise err
        self.kinds = chosen
        self.sandbox = sandbox
        self.limits = Limits(
            timeout=float(timeout),
            cpu_seconds=max(1, int(timeout) + 1),
            memory_mb=memory_mb,
            processes=64,
            file_size_mb=16,
            disk_mb=64,
            inodes=2000,
            max_output_bytes=1 << 16,
        )
        self.current: CodeTask | None = None
        self.box: Sandbox | None = None
        self._runs = 0
        self._last = ""

    # ------------------------------------------------------------------ the sandbox: one per episode, made at the first run
    def _sandbox(self) -> Sandbox:
        if self.box is None:
            assert self.current is not None
            with tempfile.TemporaryDirectory(prefix="envgym-tools-code-") as empty:
                self.box = self._sandbox_class(
                    empty,
                    overlay={name: text.encode() for name, text in self.current.files.items()},
                    limits=self.limits,
                    env={"PYTHONHASHSEED": "0"},
                )
        return self.box

    def _close_box(self) -> None:
        if self.box is not None:
            box, self.box = self.box, None
            box.close()

    def close(self) -> None:
        super().close()
        self._close_box()

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["box"] = None  # a copy makes its own sandbox from the task's files
        return state

    # ------------------------------------------------------------------ TextEnv hooks
    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        self._close_box()
        task = self.current = draw_task(rng, split=self.split, kinds=self.kinds)
        self._runs = 0
        text = f"Question: {task.question}"
        if "data.csv" in task.files:
            head = "\n".join(task.files["data.csv"].splitlines()[:4])
            text += f"\n\nThe first lines of data.csv (in your working folder):\n{head}"
        self._last = text
        return Task(
            id=f"tools-code/{task.kind}/{hashlib.sha256(task.key.encode()).hexdigest()[:12]}",
            goal=task.question,
            split=self.split,
            difficulty=task.kind,
            extra={"question": task.question, "kind": task.kind, "files": sorted(task.files)},
        )

    def _intro(self) -> str:
        return (
            "Answer the question. You may compute with Python. Each action is ONE tool call as JSON:\n"
            '  {"name": "run_python", "arguments": {"code": "print(2 ** 10)"}}   runs a program, shows its output\n'
            '  {"name": "answer", "arguments": {"value": 1024}}                 your final answer; ends the episode\n'
            f"Each run is a fresh python3 in a sandbox (no network, {self.limits.timeout:g} s, "
            f"{self.limits.memory_mb} MiB). Fewer runs earn a bonus when the answer is right."
        )

    def _observe(self) -> str:
        return self._last

    def _apply(self, call: ToolCall) -> Transition:
        assert self.current is not None
        if call.name == "run_python":
            code = call.arguments["code"]
            if len(code) > MAX_CODE:
                raise InvalidAction(f"Tool error (run_python): the code is {len(code)} characters; at most {MAX_CODE}.")
            if "\x00" in code:
                raise InvalidAction("Tool error (run_python): the code contains a NUL character.")
            self._runs += 1
            box = self._sandbox()
            box.write_file(SCRIPT, code.encode("utf-8", errors="surrogatepass"))
            result = box.run(f"python3 {SCRIPT}")
            status = "killed" if result.exit_code is None else f"exit code {result.exit_code}"
            note = f" ({result.note})" if result.note else ""
            self._last = tool_result("run_python", f"{status}{note}\n{_clip(result.output)}")
            return Transition(self._last)
        value = call.arguments["value"]
        if isinstance(value, str) and len(value) > MAX_ANSWER:
            raise InvalidAction(f"Tool error (answer): the answer is {len(value)} characters; at most {MAX_ANSWER}.")
        right = answer_matches(value, self.current)
        efficiency = EFFICIENCY_MAX * min(1.0, 1 / max(self._runs, 1)) if right else 0.0
        self._last = tool_result(
            "answer",
            f"{'Correct' if right else 'Incorrect'}. The answer is {self.current.answer}; {self._runs} run(s) of code.",
        )
        self._close_box()
        return Transition(
            self._last,
            {"correct_reward": float(right), "efficiency_reward": efficiency},
            terminated=True,
            success=right,
        )

    def sample_action(self, rng: random.Random) -> str:
        """A random valid call: a small program (arithmetic on the question's numbers, a look at
        data.csv) or, one time in three, an answer (a number of the question or a guess)."""
        assert self.current is not None
        numbers = [w.strip("?.,()'") for w in self.current.question.split()]
        numbers = [w for w in numbers if w.lstrip("-").isdigit()] or ["7"]
        if rng.random() < 1 / 3:
            return call_text("answer", value=int(rng.choice(numbers)) + rng.randint(-2, 2))
        a, b = rng.choice(numbers), rng.choice(numbers)
        programs = [
            f"print({a} + {b})",
            f"print({a} * {b})",
            f"import math\nprint(math.gcd({a}, {b}))",
            "import os\nprint(sorted(os.listdir('.')))",
            "print(open('data.csv').read()[:200] if __import__('os').path.exists('data.csv') else 'no data')",
        ]
        return call_text("run_python", code=rng.choice(programs))
