"""Wordle solver: keeps the answers consistent with the feedback and guesses by expected information.

The solver reads only the observation text (the ``N. WORD -> G Y _ _ G`` history lines) and
``info["task"]`` (``max_guesses``, ``hard_mode``). Like a person who knows the game's public
word lists, it starts from every possible answer (both splits) and, each turn, picks the guess
whose feedback pattern has the highest entropy over the remaining candidates, with a small
bonus for guesses that could win at once. The first guess (``slate``) comes out of the same
computation over all answers and is cached. Guesses are drawn from the answer list itself; in
hard mode only those that keep every revealed hint. Patterns come from a precomputed answer x
answer table (numpy, about 3.8 million entries, built once per process in about a second). If
the feedback rules out every answer (a custom answer from ``reset(options=...)``), it guesses
the first allowed word consistent with all the marks.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np

from envgym.environments.games.wordle import allowed_words, answer_words
from envgym.rollout import Policy

__all__ = ["Solver", "pattern_code", "pattern_table"]

_HISTORY = re.compile(r"^\s*\d+\.\s+([A-Z]{5})\s+->\s+([GY_](?: [GY_]){4})\s*$", re.MULTILINE)
_POWERS = np.array([1, 3, 9, 27, 81], dtype=np.int32)
#: Entropy bonus (in bits) for a guess that could itself be the answer.
CANDIDATE_BONUS = 0.1


def pattern_code(marks: str) -> int:
    """Base-3 code of a mark string (``_`` = 0, ``Y`` = 1, ``G`` = 2; first letter least significant)."""
    return sum((2 if m == "G" else 1 if m == "Y" else 0) * 3**i for i, m in enumerate(marks))


def _letters(words: tuple[str, ...]) -> np.ndarray:
    return np.frombuffer("".join(words).encode("ascii"), dtype=np.uint8).reshape(len(words), 5) - ord("a")


def _patterns(guesses: np.ndarray, answers: np.ndarray, chunk: int = 128) -> np.ndarray:
    """Pattern codes of every guess against every answer: a ``(len(guesses), len(answers))`` uint8 table."""
    out = np.empty((len(guesses), len(answers)), dtype=np.uint8)
    a = answers[None, :, :]
    for start in range(0, len(guesses), chunk):
        g = guesses[start : start + chunk][:, None, :]
        green = g == a
        not_green = ~green
        code = np.zeros((g.shape[0], a.shape[1]), dtype=np.int16)
        for i in range(5):
            gi = g[:, :, i : i + 1]
            available = ((a == gi) & not_green).sum(axis=2)
            earlier = ((g[:, :, :i] == gi) & not_green[:, :, :i]).sum(axis=2) if i else 0
            yellow = not_green[:, :, i] & (earlier < available)
            code += (2 * green[:, :, i] + yellow) * int(_POWERS[i])
        out[start : start + chunk] = code
    return out


class _Tables:
    """Answer words and their answer x answer pattern table, shared by every solver in the process."""

    def __init__(self) -> None:
        self.answers = answer_words()
        self.answer_index = {w: i for i, w in enumerate(self.answers)}
        self.letters = _letters(self.answers)
        self.letter_counts = np.stack([(self.letters == c).sum(axis=1) for c in range(26)], axis=1)
        self.table = _patterns(self.letters, self.letters)
        everything = np.arange(len(self.answers))
        self.first_guess = self.answers[self.best(everything, everything)]

    def best(self, pool: np.ndarray, candidates: np.ndarray) -> int:
        """The answer index in ``pool`` whose feedback over ``candidates`` has the highest entropy.

        A guess that is itself a candidate gets :data:`CANDIDATE_BONUS` bits: it may win at once.
        """
        table = self.table[np.ix_(pool, candidates)].astype(np.int64)
        table += (np.arange(len(pool), dtype=np.int64) * 243)[:, None]
        counts = np.bincount(table.ravel(), minlength=len(pool) * 243).reshape(len(pool), 243)
        p = counts / len(candidates)
        with np.errstate(divide="ignore", invalid="ignore"):
            entropy = -np.where(counts > 0, p * np.log2(p), 0.0).sum(axis=1)
        is_candidate = np.zeros(len(self.answers), dtype=bool)
        is_candidate[candidates] = True
        return int(pool[int(np.argmax(entropy + CANDIDATE_BONUS * is_candidate[pool]))])


@functools.cache
def pattern_table() -> _Tables:
    """The shared tables (built on first use, about a second)."""
    return _Tables()


def parse_history(observation: str) -> list[tuple[str, str]]:
    """The ``(word, marks)`` pairs of the latest board in ``observation`` (marks without spaces)."""
    found = [(w.lower(), m.replace(" ", "")) for w, m in _HISTORY.findall(observation)]
    # The board lists guesses 1..n once; a transition line may repeat the last one first.
    board: list[tuple[str, str]] = []
    for item in found:
        if item not in board:
            board.append(item)
    return board


class Solver(Policy):
    """Entropy-maximising Wordle player (see the module docstring)."""

    def __init__(self, env_id: str, seed: int | None = None) -> None:
        self.env_id = env_id
        self.tables = pattern_table()

    def act(self, observation: str, info: dict[str, Any]) -> str:
        t = self.tables
        task = info.get("task", {})
        hard = bool(task.get("hard_mode", False))
        max_guesses = int(task.get("max_guesses", 6))
        history = parse_history(observation)
        if not history:
            return t.first_guess
        alive = np.ones(len(t.answers), dtype=bool)
        for word, marks in history:
            code = pattern_code(marks)
            index = t.answer_index.get(word)
            if index is not None:
                alive &= t.table[index] == code
            else:  # a guess outside the answer list: score it against every answer
                alive &= _patterns(_letters((word,)), t.letters)[0] == code
        candidates = np.flatnonzero(alive)
        guessed = {w for w, _ in history}
        if len(candidates) == 0:  # a custom answer outside the answer list: search every allowed word
            return self._consistent_guess(history, guessed)
        if len(candidates) <= 2 or len(history) >= max_guesses - 1:
            return t.answers[int(candidates[0])]
        # Guess pool: the answer words not yet guessed (in hard mode, those that keep every hint).
        usable = np.ones(len(t.answers), dtype=bool)
        for word in guessed:
            if word in t.answer_index:
                usable[t.answer_index[word]] = False
        if hard:
            usable &= self._hard_mode_mask(history)
        return t.answers[t.best(np.flatnonzero(usable), candidates)]

    def _consistent_guess(self, history: list[tuple[str, str]], guessed: set[str]) -> str:
        """The first allowed word consistent with every mark (a custom answer may be any of them)."""
        words = allowed_words()
        letters = _letters(words)
        alive = np.ones(len(words), dtype=bool)
        for word, marks in history:
            alive &= _patterns(_letters((word,)), letters)[0] == pattern_code(marks)
        for index in np.flatnonzero(alive):
            if words[index] not in guessed:
                return words[index]
        return next(w for w in words if w not in guessed)

    def _hard_mode_mask(self, history: list[tuple[str, str]]) -> np.ndarray:
        """Answer words that keep every revealed green in place and use every revealed letter."""
        t = self.tables
        mask = np.ones(len(t.answers), dtype=bool)
        least: dict[int, int] = {}
        for word, marks in history:
            counts: dict[int, int] = {}
            for i, (letter, mark) in enumerate(zip(word, marks, strict=True)):
                code = ord(letter) - ord("a")
                if mark == "G":
                    mask &= t.letters[:, i] == code
                if mark != "_":
                    counts[code] = counts.get(code, 0) + 1
            for code, n in counts.items():
                least[code] = max(least.get(code, 0), n)
        for code, n in least.items():
            mask &= t.letter_counts[:, code] >= n
        return mask
