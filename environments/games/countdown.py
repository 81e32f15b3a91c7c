"""Countdown numbers game: combine the given numbers with + - * / to hit the target exactly."""

from __future__ import annotations

import random
import re
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from envgym.core import InvalidAction, Task, TextEnv, Transition
from envgym.errors import ConfigError, InvalidKwargsError, check_choice

__all__ = [
    "DIFFICULTIES",
    "CountdownEnv",
    "ExpressionError",
    "Preset",
    "evaluate_expression",
    "in_split",
    "random_expression",
]

#: Longest action text accepted (characters), before any parsing.
MAX_EXPRESSION_CHARS = 200
#: Longest number literal accepted (digits).
MAX_NUMBER_DIGITS = 6
#: Deepest parenthesis nesting accepted.
MAX_DEPTH = 32
#: Largest ``closeness_reward`` (for a final best attempt 1 away from the target).
CLOSENESS_MAX = 0.2
#: Attempts this far (or farther) from the target earn no ``closeness_reward``.
CLOSENESS_RANGE = 10
#: One generated task in ``TEST_MODULUS`` (chosen by a CRC-32 of its sorted numbers and target)
#: belongs to the ``test`` split, the others to ``train``: the splits never share a task.
TEST_MODULUS = 5
#: Tasks drawn at most per reset while looking for one of the episode's split.
SPLIT_TRIES = 64
SMALL_NUMBERS = tuple(range(1, 11)) * 2
LARGE_NUMBERS = (25, 50, 75, 100)


@dataclass(frozen=True)
class Preset:
    """A difficulty preset: how many numbers, how many of them large, and the target range."""

    count: int
    max_large: int
    target_min: int
    target_max: int


DIFFICULTIES: dict[str, Preset] = {
    "easy": Preset(count=3, max_large=0, target_min=10, target_max=99),
    "medium": Preset(count=4, max_large=1, target_min=20, target_max=300),
    "hard": Preset(count=6, max_large=4, target_min=100, target_max=999),
}


class ExpressionError(ValueError):
    """The text is not a valid expression over the numbers; the message says why."""


# ---------------------------------------------------------------------------------------------
# Expression parsing and exact evaluation: a regex tokenizer plus a recursive-descent parser
# (recursion only for parentheses, bounded by MAX_DEPTH) that evaluates as it parses. User text
# is never evaluated by Python.
_TOKEN = re.compile(r"[0-9]+|\*\*|\S")
_OPS = {"+": "+", "-": "-", "−": "-", "*": "*", "×": "*", "x": "*", "X": "*", "·": "*", "/": "/", "÷": "/"}
_SYMBOLS = {**_OPS, "(": "(", ")": ")", "=": "="}


def _tokenize(text: str) -> list[str | int | None]:
    tokens: list[str | int | None] = []
    for token in _TOKEN.findall(text):
        if "0" <= token[0] <= "9":
            if len(token) > MAX_NUMBER_DIGITS:
                raise ExpressionError(f"the number {token[:12]}... is too long: use the numbers you were given.")
            tokens.append(int(token))
            continue
        symbol = _SYMBOLS.get(token)
        if symbol is None:
            if token in ("**", "^"):
                raise ExpressionError("powers are not allowed: use only + - * / and parentheses.")
            raise ExpressionError(f"unexpected character {token!r}: use numbers, + - * / and parentheses.")
        tokens.append(symbol)
    tokens.append(None)  # end marker
    return tokens


class _Evaluator:
    """Recursive-descent parser over tokens that computes the value as it goes.

    Leaves are collected so that the numbers can be checked before the arithmetic rules: the
    first broken arithmetic rule is remembered (the value becomes 1 so parsing can go on) and
    reported after the numbers.
    """

    __slots__ = ("leaves", "pos", "problem", "tokens")

    def __init__(self, tokens: list[str | int | None]) -> None:
        self.tokens = tokens
        self.pos = 0
        self.leaves: list[int] = []
        self.problem: str | None = None

    def expression(self, depth: int) -> int:
        value = self.term(depth)
        tokens = self.tokens
        while True:
            op = tokens[self.pos]
            if op == "+":
                self.pos += 1
                value += self.term(depth)
            elif op == "-":
                self.pos += 1
                right = self.term(depth)
                if value <= right:
                    self.fail(f"{value} - {right} = {value - right} is not a positive whole number.")
                    value = 1
                else:
                    value -= right
            else:
                return value

    def term(self, depth: int) -> int:
        value = self.factor(depth)
        tokens = self.tokens
        while True:
            op = tokens[self.pos]
            if op == "*":
                self.pos += 1
                value *= self.factor(depth)
            elif op == "/":
                self.pos += 1
                right = self.factor(depth)
                if right == 0:
                    self.fail(f"{value} / 0: division by zero.")
                    value = 1
                elif value % right:
                    self.fail(f"{value} / {right} is not a whole number.")
                    value = 1
                else:
                    value //= right
            else:
                return value

    def factor(self, depth: int) -> int:
        token = self.tokens[self.pos]
        if type(token) is int:
            self.pos += 1
            self.leaves.append(token)
            if token == 0:
                self.fail("0 is not a positive whole number.")
            return token
        if token == "(":
            if depth >= MAX_DEPTH:
                raise ExpressionError(f"parentheses are nested more than {MAX_DEPTH} deep.")
            self.pos += 1
            value = self.expression(depth + 1)
            if self.tokens[self.pos] != ")":
                raise ExpressionError("a '(' is never closed: check the parentheses.")
            self.pos += 1
            return value
        if token in ("+", "-"):
            raise ExpressionError(f"unary {token!r} is not allowed: every intermediate result must be positive.")
        if token is None or token == "=":
            raise ExpressionError("the expression ends too early: a number or '(' is missing.")
        raise ExpressionError(f"expected a number or '(' but found {token!r}.")

    def fail(self, message: str) -> None:
        if self.problem is None:
            self.problem = message


def evaluate_expression(text: str, numbers: Sequence[int]) -> tuple[int, int | None]:
    """Value of the expression ``text`` under the Countdown rules, plus the value claimed after ``=``.

    Rules: only integers, ``+ - * /`` (``×``, ``x``, ``÷`` accepted) and parentheses; each
    available number used at most once (a number given twice may be used twice); every
    intermediate result a positive whole number (no zero, no negatives, division only when
    exact). Raises :class:`ExpressionError` saying what is wrong: unknown characters, powers,
    unary signs, unbalanced parentheses, numbers longer than 6 digits, more than 200 characters,
    numbers not available or used too often, or the first broken arithmetic rule.
    """
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ExpressionError(f"the expression is {len(text)} characters long; the limit is {MAX_EXPRESSION_CHARS}.")
    tokens = _tokenize(text)
    claimed: int | None = None
    if "=" in tokens:
        at = tokens.index("=")
        tail = tokens[at + 1 : -1]
        if len(tail) != 1 or type(tail[0]) is not int:
            raise ExpressionError("after '=' write only the value, e.g. '(25 + 3) * 4 = 112'.")
        claimed = tail[0]  # type: ignore[assignment]
        tokens = [*tokens[:at], None]
    if tokens[0] is None:
        raise ExpressionError("the expression is empty: write e.g. '(25 + 3) * 4'.")
    parser = _Evaluator(tokens)
    value = parser.expression(0)
    extra = tokens[parser.pos]
    if extra is not None:
        if extra == ")":
            raise ExpressionError("there is a ')' without a matching '('.")
        raise ExpressionError(f"unexpected {extra!r} after a complete expression: is an operator missing?")
    available = Counter(numbers)
    for number, n in Counter(parser.leaves).items():
        have = available.get(number, 0)
        if not have:
            raise ExpressionError(f"{number} is not one of your numbers ({_listing(numbers)}).")
        if n > have:
            times = "once" if have == 1 else f"{have} times"
            raise ExpressionError(f"{number} is used {n} times but you have it only {times}.")
    if parser.problem is not None:
        raise ExpressionError(parser.problem)
    return value, claimed


def in_split(numbers: Sequence[int], target: int, split: str) -> bool:
    """Whether the task (numbers in any order, target) belongs to ``split``."""
    key = f"{','.join(map(str, sorted(numbers)))}:{target}".encode()
    return (zlib.crc32(key) % TEST_MODULUS == 0) == (split == "test")


def _listing(numbers: Sequence[int]) -> str:
    return " ".join(map(str, numbers))


# ---------------------------------------------------------------------------------------------
def _combine(a: int, b: int) -> list[tuple[int, str]]:
    """Every legal ``(value, op)`` for the pair, larger operand first."""
    if a < b:
        a, b = b, a
    options = [(a + b, "+"), (a * b, "*")]
    if a > b:
        options.append((a - b, "-"))
    if b > 1 and a % b == 0:
        options.append((a // b, "/"))
    return options


def random_expression(rng: random.Random, numbers: Sequence[int], count: int) -> tuple[int, str]:
    """A random legal expression over ``count`` of ``numbers``: ``(value, text)``."""
    items = [(n, str(n)) for n in rng.sample(list(numbers), count)]
    while len(items) > 1:
        i, j = rng.sample(range(len(items)), 2)
        (a, ta), (b, tb) = items[i], items[j]
        if a < b:
            (a, ta), (b, tb) = (b, tb), (a, ta)
        value, op = rng.choice(_combine(a, b))
        items = [x for k, x in enumerate(items) if k not in (i, j)]
        items.append((value, f"({ta} {op} {tb})"))
    value, text = items[0]
    if text.startswith("(") and text.endswith(")"):
        text = text[1:-1]
    return value, text


class CountdownEnv(TextEnv):
    """Countdown numbers round: reach the target exactly with + - * / over the given numbers.

    **Description.** A few numbers and a target are drawn; the target is the value of a random
    legal expression over some of the numbers, so every task is solvable. Numbers come from the
    classic pools: small numbers 1-10 (two of each) and large numbers 25, 50, 75, 100. Rules: each
    number may be used at most once (a number drawn twice may be used twice), not every number
    has to be used, only ``+ - * /`` and parentheses are allowed, and every intermediate result
    must be a positive whole number (no zero, no negative numbers, division only when exact).
    The ``train`` and ``test`` splits hold disjoint tasks: a fixed CRC-32 partition of the
    (sorted) numbers and the target puts about 1 task in 5 in ``test``.

    **Observation.** At reset: the rules and the action format. Then the numbers, the target,
    the attempts used and the best valid attempt so far; after each valid attempt, its value
    and its distance to the target.

    **Actions.** An arithmetic expression, e.g. ``(25 + 3) * 4``, optionally followed by the
    claimed value (``= 112``, ignored for scoring; a wrong claim is pointed out). ``×``, ``x``
    and ``÷`` are accepted as operators. Expressions are parsed by a small recursive-descent
    parser, never by Python's ``eval``. Invalid (state unchanged, no attempt used): syntax
    errors, unary minus, powers, numbers not available or used too often, a zero, negative or
    fractional intermediate result, more than 200 characters. ``admissible_actions`` is
    ``None``; :meth:`sample_action` builds a random legal expression over the numbers.

    **Reward components.**
    ``success_reward``: 1.0 when an expression equals the target.
    ``closeness_reward``: only on the step that uses the last attempt without hitting the
    target: ``0.2 * (1 - d / 10)`` for the best valid attempt at distance ``d < 10`` (else 0),
    so it cannot be farmed by repeating near misses.
    ``invalid_action_reward``: ``invalid_penalty`` (default -0.1) on an invalid step.
    ``step_cost_reward``: ``step_cost`` (default 0) on every step.

    **Reward basis.** The reward is the sum of every component (``success_reward``, ``closeness_reward``, ``invalid_action_reward``, ``step_cost_reward``): none is diagnostic.

    **Episode end.** Terminated with success when an expression equals the target; terminated
    with failure after ``max_attempts`` valid attempts miss it; truncated at ``max_turns``
    (default ``max(15, 3 * max_attempts)`` steps, invalid ones included). ``progress`` is 1 - (best distance / target),
    floored at 0 (0 before any valid attempt).

    **Arguments.**
    ``difficulty``: ``"easy"`` (3 small numbers, targets 10-99), ``"medium"`` (4 numbers, at
    most one large, targets 20-300) or ``"hard"`` (6 numbers, up to four large, targets
    100-999, as on television). ``max_attempts`` (1-50, default 5): valid attempts allowed.
    ``reset(options={"numbers": [...], "target": n})`` plays a given task (2-8 numbers from
    1 to 1000, target from 1 to 100000; it need not be solvable). Plus the common
    :class:`envgym.core.TextEnv` arguments.

    **Version history.** v0: initial version.
    """

    name: ClassVar[str] = "countdown"
    reward_components: ClassVar[tuple[str, ...]] = (
        "success_reward",
        "closeness_reward",
        "invalid_action_reward",
        "step_cost_reward",
    )
    reward_basis = reward_components  # their sum: none is diagnostic
    default_max_turns: ClassVar[int] = 15

    def __init__(self, *, difficulty: str = "easy", max_attempts: int = 5, **kwargs: Any) -> None:
        check_choice("difficulty", difficulty, DIFFICULTIES)
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or not 1 <= max_attempts <= 50:
            raise InvalidKwargsError(f"max_attempts must be an integer from 1 to 50, got {max_attempts!r}.")
        if kwargs.get("max_turns") is None:  # room for every attempt plus some invalid steps
            kwargs["max_turns"] = max(self.default_max_turns, 3 * max_attempts)
        super().__init__(**kwargs)
        self.difficulty = difficulty
        self.preset = DIFFICULTIES[difficulty]
        self.max_attempts = max_attempts
        self.numbers: tuple[int, ...] = ()
        self.target = 0
        self._solution = ""
        self._attempts = 0
        self._best: int | None = None
        self._intro_text = self._build_intro()

    # ------------------------------------------------------------------ episode
    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        custom = (options or {}).get("numbers")
        if custom is not None or (options or {}).get("target") is not None:
            numbers, target = _custom_task(options or {})
            self._solution = ""
            label = "custom"
        else:
            for _ in range(SPLIT_TRIES):
                numbers, target, self._solution = self._draw(rng)
                if in_split(numbers, target, self.split):
                    break
            label = self.difficulty
        self.numbers, self.target = numbers, target
        self._attempts = 0
        self._best = None
        listing = _listing(numbers)
        return Task(
            id=f"countdown-{'.'.join(map(str, numbers))}-{target}",
            goal=f"Use the numbers {listing} (each at most once) with + - * / to make exactly {target}.",
            split=self.split,
            difficulty=label,
            extra={"numbers": list(numbers), "target": target, "max_attempts": self.max_attempts},
        )

    def _draw(self, rng: random.Random) -> tuple[tuple[int, ...], int, str]:
        preset = self.preset
        large = rng.randint(0, min(preset.max_large, preset.count)) if preset.max_large else 0
        numbers = rng.sample(LARGE_NUMBERS, large) + rng.sample(SMALL_NUMBERS, preset.count - large)
        while True:
            count = rng.randint(2, preset.count)
            value, text = random_expression(rng, numbers, count)
            if preset.target_min <= value <= preset.target_max and value not in numbers:
                return tuple(numbers), value, text
            if rng.random() < 0.05:  # now and then draw new numbers so no draw can stall
                large = rng.randint(0, min(preset.max_large, preset.count)) if preset.max_large else 0
                numbers = rng.sample(LARGE_NUMBERS, large) + rng.sample(SMALL_NUMBERS, preset.count - large)

    def _intro(self) -> str:
        return self._intro_text

    def _build_intro(self) -> str:
        return (
            f"Countdown ({self.difficulty}): make the target number exactly from the given numbers using "
            "+ - * / and parentheses. Each number may be used at most once (not all are needed). Every "
            "intermediate result must be a positive whole number: no zero, no negatives, division only "
            f"when exact. You have {self.max_attempts} attempts.\n"
            "Reply with one expression, e.g. <action>(25 + 3) * 4</action> (you may add '= 112')."
        )

    def _observe(self) -> str:
        lines = [f"Numbers: {_listing(self.numbers)}", f"Target: {self.target}"]
        status = f"Attempts: {self._attempts} of {self.max_attempts} used."
        if self._best is not None:
            status += f" Best so far: {self._best} (off by {abs(self._best - self.target)})."
        lines.append(status)
        return "\n".join(lines)

    # ------------------------------------------------------------------ actions
    def _parse(self, text: str) -> tuple[int, int | None, str]:
        try:
            value, claimed = evaluate_expression(text, self.numbers)
        except ExpressionError as err:
            raise InvalidAction(f"{err}") from None
        return value, claimed, text

    def _apply(self, action: tuple[int, int | None, str]) -> Transition:
        value, claimed, text = action
        self._attempts += 1
        distance = abs(value - self.target)
        if self._best is None or distance < abs(self._best - self.target):
            self._best = value
        note = f" (you wrote = {claimed}, but it equals {value})" if claimed is not None and claimed != value else ""
        shown = text.split("=")[0].strip()
        if distance == 0:
            return Transition(
                f"{shown} = {value}{note}. That is the target: solved!\n\n{self._observe()}",
                {"success_reward": 1.0},
                terminated=True,
                success=True,
            )
        head = f"{shown} = {value}{note}: off by {distance}."
        if self._attempts >= self.max_attempts:
            assert self._best is not None
            best = abs(self._best - self.target)
            closeness = CLOSENESS_MAX * max(0.0, 1.0 - best / CLOSENESS_RANGE)
            rewards = {"closeness_reward": closeness} if closeness else {}
            end = f"Out of attempts. Your best was {self._best} (off by {best})."
            if self._solution:
                end += f" One solution: {self._solution} = {self.target}."
            return Transition(f"{head}\n{end}\n\n{self._observe()}", rewards, terminated=True)
        return Transition(f"{head} Try again.\n\n{self._observe()}")

    def sample_action(self, rng: random.Random) -> str:
        """A random legal expression over a random subset of the numbers."""
        return random_expression(rng, self.numbers, rng.randint(1, len(self.numbers)))[1]

    def progress(self) -> float:
        if self._best is None:
            return 0.0
        return max(0.0, 1.0 - abs(self._best - self.target) / self.target)


def _custom_task(options: dict[str, Any]) -> tuple[tuple[int, ...], int]:
    numbers = options.get("numbers")
    target = options.get("target")
    if (
        not isinstance(numbers, (list, tuple))
        or not 2 <= len(numbers) <= 8
        or not all(isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 1000 for n in numbers)
    ):
        raise ConfigError(f"options['numbers'] must be a list of 2 to 8 integers from 1 to 1000, got {numbers!r}.")
    if isinstance(target, bool) or not isinstance(target, int) or not 1 <= target <= 100_000:
        raise ConfigError(f"options['target'] must be an integer from 1 to 100000, got {target!r}.")
    return tuple(numbers), target
