"""Wordle: guess a hidden five-letter word from per-letter colour feedback."""

from __future__ import annotations

import functools
import random
import zlib
from importlib import resources
from typing import Any, ClassVar

from envgym.core import InvalidAction, Task, TextEnv, Transition
from envgym.errors import ConfigError, InvalidKwargsError, check_choice

__all__ = ["DIFFICULTIES", "WordleEnv", "allowed_words", "answer_words", "feedback", "split_answers"]

#: Difficulty presets: name -> (guesses allowed, hard mode).
DIFFICULTIES: dict[str, tuple[int, bool]] = {
    "easy": (8, False),
    "medium": (6, False),
    "hard": (6, True),
}
#: Feedback marks: right letter in the right spot, in the word elsewhere, not in the word.
GREEN, YELLOW, GREY = "G", "Y", "_"
#: Shaping reward for each letter position turned green for the first time (at most 5 per episode).
GREEN_REWARD = 0.02
#: One answer in ``TEST_MODULUS`` (chosen by a CRC-32 of the word) belongs to the test split.
TEST_MODULUS = 5

_ORDINALS = ("1st", "2nd", "3rd", "4th", "5th")
_DATA = "data"


@functools.cache
def _read_words(filename: str) -> tuple[str, ...]:
    text = resources.files("envgym.environments.games").joinpath(_DATA, filename).read_text(encoding="utf-8")
    return tuple(line for line in text.split() if line)


def answer_words() -> tuple[str, ...]:
    """Every possible hidden word (common English words, sorted, lowercase)."""
    return _read_words("wordle_answers.txt")


@functools.cache
def allowed_words() -> tuple[str, ...]:
    """Every accepted guess, sorted: the answers plus less common five-letter words."""
    return tuple(sorted(answer_words() + _read_words("wordle_guesses.txt")))


@functools.cache
def _allowed_set() -> frozenset[str]:
    return frozenset(allowed_words())


@functools.cache
def split_answers(split: str) -> tuple[str, ...]:
    """The answers of one split; ``train`` and ``test`` are disjoint (a fixed CRC-32 partition)."""
    in_test = split == "test"
    return tuple(w for w in answer_words() if (zlib.crc32(w.encode()) % TEST_MODULUS == 0) == in_test)


def feedback(guess: str, answer: str) -> str:
    """Wordle marks of ``guess`` against ``answer``: a 5-character string of ``G``, ``Y`` and ``_``.

    Greens are given first; each remaining letter of the guess, left to right, is yellow while
    the answer still has an unmatched copy of it, so a letter guessed twice is marked yellow at
    most as many times as it appears in the answer outside the green spots.
    """
    marks = [GREY] * 5
    unmatched: dict[str, int] = {}
    for i in range(5):
        if guess[i] == answer[i]:
            marks[i] = GREEN
        else:
            letter = answer[i]
            unmatched[letter] = unmatched.get(letter, 0) + 1
    for i in range(5):
        if marks[i] == GREY:
            n = unmatched.get(guess[i], 0)
            if n:
                marks[i] = YELLOW
                unmatched[guess[i]] = n - 1
    return "".join(marks)


class _HardModeIndex:
    """Bitsets over :func:`allowed_words` to sample hard-mode-valid guesses without a full scan.

    ``bits[(i, letter)]`` has bit ``j`` set when word ``j`` has ``letter`` at position ``i``;
    ``bits[(letter, k)]`` when word ``j`` has at least ``k`` copies of ``letter``.
    """

    def __init__(self) -> None:
        words = allowed_words()
        self.position = {word: i for i, word in enumerate(words)}
        self.full = (1 << len(words)) - 1
        flags = ["0"] * len(words)
        members: dict[tuple[Any, ...], list[int]] = {}
        for index, word in enumerate(words):
            for i, letter in enumerate(word):
                members.setdefault((i, letter), []).append(index)
            for letter in set(word):
                for k in range(1, word.count(letter) + 1):
                    members.setdefault((letter, k), []).append(index)
        self.bits: dict[tuple[Any, ...], int] = {}
        for key, indices in members.items():
            for index in indices:
                flags[-1 - index] = "1"
            self.bits[key] = int("".join(flags), 2)
            for index in indices:
                flags[-1 - index] = "0"


@functools.cache
def _hard_index() -> _HardModeIndex:
    return _HardModeIndex()


def _nth_set_bit(mask: int, n: int, width: int) -> int:
    """Position of the ``n``-th (0-based) set bit of ``mask`` (binary search over popcounts)."""
    lo, hi = 0, width
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if (mask & ((1 << mid) - 1)).bit_count() <= n:
            lo = mid
        else:
            hi = mid
    return lo


class WordleEnv(TextEnv):
    """Wordle: find the hidden five-letter English word from colour feedback.

    **Description.** A common English word is hidden. Each valid guess is marked letter by
    letter: ``G`` (green) the right letter in the right spot, ``Y`` (yellow) in the word but in
    another spot, ``_`` (grey) not in the word, or no further copies of it (a letter guessed
    twice is yellow at most as many times as the answer has unmatched copies of it). The
    ``train`` and ``test`` splits draw their answers from disjoint parts of the answer list
    (a fixed CRC-32 partition: about 4 in 5 answers are train, 1 in 5 test).

    **Observation.** At reset: the rules and the action format, then the board. After a valid
    guess: the marks with a one-line explanation (``CRANE -> G Y _ _ G: ...``), then the board:
    every guess so far with its marks, the known green pattern (``C _ _ _ E``), the letters
    known to be in the word and the letters known to be absent, and the guesses left.

    **Actions.** One five-letter word (case-insensitive), optionally prefixed by ``guess``:
    ``crane``, ``guess CRANE``, ``<action>crane</action>``. Invalid (state unchanged, penalty
    charged, no guess used): not five letters a-z, not in the word list (about 6,400 words from
    SCOWL, see ``data/README.md``), already guessed, or in hard mode a guess that drops a
    revealed hint. ``admissible_actions`` is ``None`` (too many words); :meth:`sample_action`
    draws a random valid guess.

    **Reward components.**
    ``success_reward``: 1.0 when the word is found.
    ``letter_feedback_reward``: +0.02 for each letter position that turns green for the first
    time (at most 0.1 per episode).
    ``invalid_action_reward``: ``invalid_penalty`` (default -0.1) on an invalid step.
    ``step_cost_reward``: ``step_cost`` (default 0) on every step.

    **Reward basis.** The reward is the sum of every component (``success_reward``, ``letter_feedback_reward``, ``invalid_action_reward``, ``step_cost_reward``): none is diagnostic.

    **Episode end.** Terminated with success when the word is guessed; terminated with failure
    when the guesses run out (the answer is then shown). Truncated at ``max_turns`` (default 30
    steps, invalid ones included). ``progress`` is the share of letter positions known green.

    **Arguments.**
    ``difficulty``: ``"easy"`` (8 guesses), ``"medium"`` (6 guesses) or ``"hard"`` (6 guesses,
    hard mode: every revealed green must stay in its spot and every revealed yellow must be
    used in later guesses). ``max_guesses`` (1-20) and ``hard_mode`` override the preset.
    Plus the common :class:`envgym.core.TextEnv` arguments (``max_turns``, ``invalid_limit``,
    ``invalid_penalty``, ``step_cost``, ``reward``, ``split``, ``render_mode``).
    ``reset(options={"answer": "abbey"})`` plays a given word (any word of the word list).

    **Version history.** v0: initial version.
    """

    name: ClassVar[str] = "wordle"
    reward_components: ClassVar[tuple[str, ...]] = (
        "success_reward",
        "letter_feedback_reward",
        "invalid_action_reward",
        "step_cost_reward",
    )
    reward_basis = reward_components  # their sum: none is diagnostic
    default_max_turns: ClassVar[int] = 30

    def __init__(
        self,
        *,
        difficulty: str = "easy",
        max_guesses: int | None = None,
        hard_mode: bool | None = None,
        **kwargs: Any,
    ) -> None:
        check_choice("difficulty", difficulty, DIFFICULTIES)
        preset_guesses, preset_hard = DIFFICULTIES[difficulty]
        if max_guesses is not None and (
            isinstance(max_guesses, bool) or not isinstance(max_guesses, int) or not 1 <= max_guesses <= 20
        ):
            raise InvalidKwargsError(f"max_guesses must be an integer from 1 to 20 or None, got {max_guesses!r}.")
        if hard_mode is not None and not isinstance(hard_mode, bool):
            raise InvalidKwargsError(f"hard_mode must be True, False or None (use the preset), got {hard_mode!r}.")
        super().__init__(**kwargs)
        self.difficulty = difficulty
        self.max_guesses = preset_guesses if max_guesses is None else max_guesses
        self.hard_mode = preset_hard if hard_mode is None else hard_mode
        if (self.max_guesses, self.hard_mode) == (preset_guesses, preset_hard):
            self._label = difficulty
        else:
            self._label = f"max_guesses={self.max_guesses},hard_mode={self.hard_mode}"
        self._answers = split_answers(self.split)
        self._allowed = _allowed_set()
        self._answer = ""
        self._reset_state()
        self._intro_text = self._build_intro()

    def _reset_state(self) -> None:
        self._guesses: list[tuple[str, str]] = []
        self._guessed: set[str] = set()
        self._greens: list[str | None] = [None] * 5
        self._present: set[str] = set()
        self._absent: set[str] = set()
        self._min_counts: dict[str, int] = {}
        self._sample_cache: tuple[int, int] | None = None
        self._board: str | None = None  # rendered board, cleared by every valid guess

    # ------------------------------------------------------------------ episode
    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        token = rng.getrandbits(32)
        custom = (options or {}).get("answer")
        if custom is not None:
            word = custom.lower() if isinstance(custom, str) else custom
            if not isinstance(word, str) or word not in self._allowed:
                raise ConfigError(f"options['answer'] must be a five-letter word from the word list, got {custom!r}.")
            self._answer = word
        else:
            self._answer = rng.choice(self._answers)
        self._reset_state()
        mode = " in hard mode" if self.hard_mode else ""
        return Task(
            id=f"wordle-{self.max_guesses}g{'-hard' if self.hard_mode else ''}-{token:08x}",
            goal=f"Guess the hidden five-letter English word in at most {self.max_guesses} guesses{mode}.",
            split=self.split,
            difficulty=self._label if custom is None else "custom",
            extra={"max_guesses": self.max_guesses, "hard_mode": self.hard_mode},
        )

    def _intro(self) -> str:
        return self._intro_text

    def _build_intro(self) -> str:
        lines = [
            f"Wordle. Guess the hidden five-letter English word in at most {self.max_guesses} guesses.",
            (
                "After each guess every letter is marked: G = right letter in the right spot, "
                "Y = in the word but in another spot, _ = not in the word (or no further copies of it)."
            ),
        ]
        if self.hard_mode:
            lines.append(
                "Hard mode: every green letter must stay in its spot and every yellow letter must be "
                "used in later guesses."
            )
        lines.append(
            "Reply with one five-letter English word, e.g. <action>crane</action>. Words not in the "
            "word list, repeated or malformed guesses are invalid and use no guess."
        )
        return "\n".join(lines)

    def _observe(self) -> str:
        if self._board is None:
            self._board = self._render()
        return self._board

    def _render(self) -> str:
        used = len(self._guesses)
        lines = [f"Guesses: {used} of {self.max_guesses} used, {self.max_guesses - used} left."]
        if not self._guesses:
            lines.append("No guesses yet.")
        for i, (guess, marks) in enumerate(self._guesses, start=1):
            lines.append(f"{i}. {guess.upper()} -> {' '.join(marks)}")
        lines.append("Pattern: " + " ".join(g.upper() if g else "_" for g in self._greens))
        elsewhere = sorted(self._present.difference(g for g in self._greens if g))
        lines.append("In the word, spot unknown: " + (" ".join(elsewhere).upper() or "-"))
        lines.append("Not in the word: " + (" ".join(sorted(self._absent)).upper() or "-"))
        return "\n".join(lines)

    # ------------------------------------------------------------------ actions
    def _parse(self, text: str) -> str:
        word = text.strip().lower()
        if len(word) > 5 and word.startswith("guess"):
            word = word[5:].lstrip(" :=").strip()
        if len(word) != 5 or not (word.isascii() and word.isalpha()):
            shown = word if len(word) <= 40 else word[:37] + "..."
            raise InvalidAction(
                f"expected one five-letter word made of the letters a-z, got {shown!r} ({len(word)} characters). "
                "Reply with a single word such as <action>crane</action>."
            )
        if word not in self._allowed:
            raise InvalidAction(f"{word.upper()!r} is not in the word list; guess a common English word.")
        return word

    def _hard_mode_violation(self, word: str) -> str | None:
        for i, letter in enumerate(self._greens):
            if letter is not None and word[i] != letter:
                return f"the {_ORDINALS[i]} letter must be {letter.upper()} (revealed green)"
        for letter, n in self._min_counts.items():
            if word.count(letter) < n:
                copies = "" if n == 1 else f" {n} times"
                return f"the guess must contain {letter.upper()}{copies} (revealed hint)"
        return None

    def _apply(self, word: str) -> Transition:
        if word in self._guessed:
            raise InvalidAction(f"{word.upper()} was already guessed; try a different word.")
        if self.hard_mode:
            problem = self._hard_mode_violation(word)
            if problem is not None:
                raise InvalidAction(f"hard mode: {problem}.")
        marks = feedback(word, self._answer)
        self._guesses.append((word, marks))
        self._guessed.add(word)
        self._board = None
        new_greens = 0
        counts: dict[str, int] = {}
        for i, (letter, mark) in enumerate(zip(word, marks, strict=True)):
            if mark == GREY:
                continue
            counts[letter] = counts.get(letter, 0) + 1
            self._present.add(letter)
            if mark == GREEN and self._greens[i] is None:
                self._greens[i] = letter
                new_greens += 1
        for letter, mark in zip(word, marks, strict=True):
            if mark == GREY and letter not in counts:
                self._absent.add(letter)
        for letter, n in counts.items():
            if n > self._min_counts.get(letter, 0):
                self._min_counts[letter] = n
        rewards = {"letter_feedback_reward": GREEN_REWARD * new_greens} if new_greens else {}
        head = f"{word.upper()} -> {' '.join(marks)}"
        if marks == "GGGGG":
            rewards["success_reward"] = 1.0
            n = len(self._guesses)
            text = f"{head}: solved in {n} guess{'es' if n > 1 else ''}!\n\n{self._observe()}"
            return Transition(text, rewards, terminated=True, success=True)
        text = f"{head}: {_explain(word, marks)}\n\n{self._observe()}"
        if len(self._guesses) >= self.max_guesses:
            text += f"\nOut of guesses: the word was {self._answer.upper()}."
            return Transition(text, rewards, terminated=True, success=False)
        return Transition(text, rewards)

    def sample_action(self, rng: random.Random) -> str:
        """A random word from the word list that is a valid guess now (hard-mode rules included)."""
        words = allowed_words()
        constrained = self.hard_mode and (self._min_counts or any(self._greens))
        if not constrained:
            while True:
                word = rng.choice(words)
                if word not in self._guessed:
                    return word
        cache = self._sample_cache
        if cache is None or cache[0] != len(self._guesses):
            index = _hard_index()
            mask = index.full
            for word in self._guessed:
                mask &= ~(1 << index.position[word])
            for i, letter in enumerate(self._greens):
                if letter is not None:
                    mask &= index.bits[(i, letter)]
            for letter, n in self._min_counts.items():
                mask &= index.bits.get((letter, n), 0)
            cache = self._sample_cache = (len(self._guesses), mask)
        count = cache[1].bit_count()
        if not count:  # cannot happen while the episode runs (the answer is always valid)
            return rng.choice(words)
        return words[_nth_set_bit(cache[1], rng.randrange(count), len(words))]

    def progress(self) -> float:
        return sum(1 for g in self._greens if g) / 5


def _explain(word: str, marks: str) -> str:
    """The marks in words, e.g. ``C (1st), E (5th) in the right spot; R in the word but elsewhere; A, N not in
    the word.``"""
    right = [f"{word[i].upper()} ({_ORDINALS[i]})" for i in range(5) if marks[i] == GREEN]
    elsewhere = [word[i].upper() for i in range(5) if marks[i] == YELLOW]
    marked = {word[i] for i in range(5) if marks[i] != GREY}
    absent: list[str] = []
    no_more: list[str] = []
    for i in range(5):
        letter = word[i]
        if marks[i] == GREY:
            target = no_more if letter in marked else absent
            if letter.upper() not in target:
                target.append(letter.upper())
    parts = []
    if right:
        parts.append(f"{', '.join(right)} in the right spot")
    if elsewhere:
        parts.append(f"{', '.join(elsewhere)} in the word but elsewhere")
    if absent:
        parts.append(f"{', '.join(absent)} not in the word")
    if no_more:
        parts.append(f"no further copies of {', '.join(no_more)}")
    return "; ".join(parts) + "."
