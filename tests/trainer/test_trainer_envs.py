"""A trivial environment the trainer tests learn on, and checks of the environment itself.

``VowelEnv``: every turn the agent is asked for a word; the ``vowel_reward`` component is 1 when
the reply starts with a vowel (``a e i o u``, either case), else 0. A tiny randomly initialised
model starts near 15-20 % (its next-token distribution is close to uniform over the vocabulary)
and can learn to put its mass on vowel-initial tokens in a few dozen updates on a CPU. A second
component, ``short_reward`` (0.5 for a reply of at most ``short_chars`` characters), gives GDPO
two components to normalise apart.

It lives in a test module (the trainer's test files import it) so the registry can make it by
its entry point ``test_trainer_envs:VowelEnv``.
"""

from __future__ import annotations

import random
from typing import Any

from envgym import InvalidAction, Task, TextEnv, Transition
from envgym.registration import EnvSpec, register
from envgym.testing import check_env

VOWELS = frozenset("aeiouAEIOU")


class VowelEnv(TextEnv):
    """Reply with a word that starts with a vowel.

    Observation: "Say one word." (after the first turn: "Again.").
    Actions: any non-empty text.
    Reward components: vowel_reward (1 when the reply starts with a vowel), short_reward (0.5 for a
    reply of at most ``short_chars`` characters), invalid_action_reward, step_cost_reward.
    Episode end: after ``turns`` replies; success when the last reply started with a vowel.
    Arguments: turns (replies per episode), short_chars.
    """

    name = "vowel"
    reward_components = ("vowel_reward", "short_reward", "invalid_action_reward", "step_cost_reward")
    default_max_turns = 50

    def __init__(self, *, turns: int = 1, short_chars: int = 0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.turns = turns
        self.short_chars = short_chars
        self._played = 0

    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        self._played = 0
        # Every task is the same; the id only tells seeds apart (the checker wants them distinct).
        return Task(id=f"vowel-{rng.randrange(10**9)}", goal="Start your reply with a vowel.")

    def _intro(self) -> str:
        return ""

    def _observe(self) -> str:
        return "Say one word." if self._played == 0 else "Again."

    def _parse(self, text: str) -> str:
        if not text:
            raise InvalidAction("expected a word, got an empty reply.")
        return text

    def _apply(self, action: str) -> Transition:
        self._played += 1
        hit = action[:1] in VOWELS
        rewards = {"vowel_reward": 1.0 if hit else 0.0}
        if self.short_chars and len(action) <= self.short_chars:
            rewards["short_reward"] = 0.5
        done = self._played >= self.turns
        return Transition(self._observe(), rewards, terminated=done, success=done and hit)


register(EnvSpec(id="envgymtest/Vowel-v0", entry_point="test_trainer_envs:VowelEnv", family="test"))


def test_vowel_env_passes_the_checker() -> None:
    check_env("envgymtest/Vowel-v0")


def test_vowel_env_rewards() -> None:
    import envgym

    env = envgym.make("envgymtest/Vowel-v0", turns=2, short_chars=4)
    obs, info = env.reset(seed=3)
    assert obs == "Say one word." and set(info["reward_components"]) >= {"vowel_reward", "short_reward"}
    obs, reward, terminated, _, info = env.step("apple")
    assert (reward, terminated, obs) == (1.0, False, "Again.")
    obs, reward, terminated, _, info = env.step("  Ox ")  # cleaned: "Ox", short
    assert reward == 1.5 and terminated and info["success"] and info["reward_components"]["short_reward"] == 0.5
    env.reset(seed=3)
    _, reward, terminated, _, info = env.step("banana")
    assert reward == 0.0 and not terminated
    _, reward, terminated, _, info = env.step("pear")
    assert reward == 0.5 and terminated and not info["success"]
