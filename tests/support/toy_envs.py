"""Tiny environments used by the core tests (not registered by the package)."""

from __future__ import annotations

import random
from typing import Any

from envgym import InvalidAction, Task, TextEnv, Transition


class GuessEnv(TextEnv):
    """Guess the secret number.

    Observation: the last guess and whether the secret is higher or lower.
    Actions: a number between 1 and ``high``.
    Reward components: success_reward (1 on the right guess), invalid_action_reward, step_cost_reward.
    Episode end: the right guess (success) or ``max_turns``.
    Arguments: high (largest secret).
    """

    name = "guess"
    default_max_turns = 8

    def __init__(self, *, high: int = 10, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.high = high
        self.secret = 0
        self.last: int | None = None

    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        self.secret = rng.randint(1, self.high)
        self.last = None
        return Task(id=f"guess-{self.secret}", goal=f"Guess the number between 1 and {self.high}.")

    def _observe(self) -> str:
        return f"Last guess: {self.last}"

    def _parse(self, text: str) -> int:
        if not text.isdigit() or not 1 <= int(text) <= self.high:
            raise InvalidAction(f"expected a whole number from 1 to {self.high}.")
        return int(text)

    def _apply(self, guess: int) -> Transition:
        self.last = guess
        if guess == self.secret:
            return Transition("Correct!", {"success_reward": 1.0}, terminated=True, success=True)
        hint = "higher" if guess < self.secret else "lower"
        return Transition(f"The secret is {hint}.\n{self._observe()}")

    def admissible_actions(self) -> list[str]:
        return [str(i) for i in range(1, self.high + 1)]

    def progress(self) -> float:
        return 1.0 if self.last == self.secret else 0.0


class BrokenInfoEnv(GuessEnv):
    """Breaks the contract: drops a standard info key."""

    def _info(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        info = super()._info(*args, **kwargs)
        info.pop("success")
        return info


class NondeterministicEnv(GuessEnv):
    """Breaks the contract: ignores the seed."""

    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        return super()._generate(random.Random(), options)


class RaisingEnv(GuessEnv):
    """Breaks the contract: raises on unparseable actions instead of an invalid step."""

    def _parse(self, text: str) -> int:
        return int(text)
