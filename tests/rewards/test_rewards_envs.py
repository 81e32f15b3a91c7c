"""Small environments for the reward-layer tests (not registered by the package), and their checks.

* :class:`LineWalk`: a ``TextEnv`` corridor with progress, used by the rubric and wrapper tests.
* :class:`PlainCorridor`: the same game as a plain ``gymnasium.Env`` that gives no reward and
  declares no components, to show the built-in components work on any environment.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

import gymnasium as gym
import pytest

from envgym import InvalidAction, Task, TextEnv, Transition
from envgym.spaces import Text
from envgym.testing import check_env


class LineWalk(TextEnv):
    """Walk right along a corridor to its end.

    Description: the agent starts in cell 0 of a corridor of ``length`` cells (3 to 6, drawn
    per episode) and must reach the last one.
    Observation: ``Cell i of n.`` and a picture such as ``@...G``.
    Actions: ``left``, ``right``, ``wait`` (``left`` in cell 0 is invalid).
    Reward components: success_reward (1 on reaching the goal), progress_reward (cells gained /
    length, negative when walking back), invalid_action_reward, step_cost_reward.
    Episode end: the goal (success) or ``max_turns`` (12).
    Arguments: the common TextEnv arguments; ``reset(options={"start": k})`` starts in cell k.
    Version history: v0 (tests only).
    """

    name = "line_walk"
    default_max_turns = 12
    reward_components = ("success_reward", "progress_reward", "invalid_action_reward", "step_cost_reward")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.length = 1
        self.pos = 0

    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        self.length = rng.randint(3, 6)
        self.pos = min(int((options or {}).get("start", 0)), self.length - 1)
        return Task(id=f"line-{self.length}", goal=f"Reach cell {self.length} by walking right.")

    def _observe(self) -> str:
        picture = "".join("@" if i == self.pos else ("G" if i == self.length else ".") for i in range(self.length + 1))
        return f"Cell {self.pos} of {self.length}. {picture}"

    def _parse(self, text: str) -> str:
        move = text.strip().lower()
        if move not in ("left", "right", "wait"):
            raise InvalidAction("expected left, right or wait.")
        return move

    def _apply(self, move: str) -> Transition:
        if move == "left" and self.pos == 0:
            raise InvalidAction("you are at the start; there is nothing to your left.")
        old = self.pos
        self.pos += {"left": -1, "right": 1, "wait": 0}[move]
        rewards = {"progress_reward": (self.pos - old) / self.length}
        if self.pos == self.length:
            rewards["success_reward"] = 1.0
            return Transition("You reached the goal!", rewards, terminated=True, success=True)
        return Transition(self._observe(), rewards)

    def admissible_actions(self) -> list[str]:
        return ["right", "wait"] if self.pos == 0 else ["left", "right", "wait"]

    def progress(self) -> float:
        return self.pos / self.length


class QuizEnv(TextEnv):
    """Answer one multiplication question; ask for hints if you like.

    Description: the task asks for ``a * b`` (a, b from 2 to 9); ``info["task"]["answer"]`` holds
    the product (for verifiers).
    Observation: the question, then hints.
    Actions: ``hint`` (valid, no progress), or ``answer N`` which ends the episode.
    Reward components: success_reward (1 for the right answer), invalid_action_reward,
    step_cost_reward.
    Episode end: any answer (success when right) or ``max_turns`` (6).
    Arguments: the common TextEnv arguments.
    Version history: v0 (tests only).
    """

    name = "quiz"
    default_max_turns = 6

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.a = self.b = 0

    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        self.a, self.b = rng.randint(2, 9), rng.randint(2, 9)
        return Task(
            id=f"quiz-{self.a}x{self.b}", goal=f"What is {self.a} times {self.b}?", extra={"answer": self.a * self.b}
        )

    def _observe(self) -> str:
        return f"What is {self.a} times {self.b}? Reply `answer N` or `hint`."

    def _parse(self, text: str) -> Any:
        words = text.lower().split()
        if words == ["hint"]:
            return "hint"
        if len(words) >= 2 and words[0] == "answer":
            return " ".join(words[1:])
        raise InvalidAction("expected `answer N` or `hint`.")

    def _apply(self, action: Any) -> Transition:
        if action == "hint":
            return Transition(f"Hint: it is {self.a} added {self.b} times. {self._observe()}")
        right = action.strip() == str(self.a * self.b)
        return Transition(
            "Correct." if right else "Wrong.", {"success_reward": float(right)}, terminated=True, success=right
        )

    def sample_action(self, rng: random.Random) -> str:
        return rng.choice(["hint", f"answer {rng.randint(4, 81)}"])


class PlainCorridor(gym.Env[str, str]):
    """The same corridor as a plain Gymnasium env: reward always 0, no reward components.

    Reports ``success``, ``action_valid`` and ``progress`` in ``info`` like any env may.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, length: int = 4, max_steps: int = 10) -> None:
        self.length = length
        self.max_steps = max_steps
        self.observation_space = Text()
        self.action_space = Text()
        self.pos = 0
        self.steps = 0

    def _info(self, valid: bool, success: bool) -> dict[str, Any]:
        return {
            "success": success,
            "action_valid": valid,
            "progress": self.pos / self.length,
            "task": {"id": f"corridor-{self.length}", "goal": f"Reach cell {self.length}.", "answer": str(self.length)},
        }

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.pos = 0
        self.steps = 0
        return f"cell {self.pos}", self._info(True, False)

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.steps += 1
        valid = action in ("left", "right")
        if valid:
            self.pos = max(0, self.pos + (1 if action == "right" else -1))
        success = self.pos == self.length
        return (
            f"cell {self.pos}",
            0.0,
            success,
            self.steps >= self.max_steps and not success,
            self._info(valid, success),
        )


def solve_line_walk(observation: str) -> str:
    """The intended optimum: always walk right, with a well-formed ``<action>`` block."""
    return "<action>right</action>"


def test_line_walk_passes_the_env_checker() -> None:
    report = check_env(LineWalk(), seeds=(0, 1, 2), steps=20)
    assert "seeded_determinism" in report.checks and "bad_input_fuzz" in report.checks


def test_line_walk_components_and_progress() -> None:
    env = LineWalk()
    _, info = env.reset(seed=3)
    assert info["progress"] == 0.0 and set(info["reward_components"]) == set(LineWalk.reward_components)
    total = 0.0
    for turn in range(1, env.length + 1):
        _, reward, terminated, _, info = env.step("right")
        total += reward
        assert info["progress"] == pytest.approx(turn / env.length)
    assert terminated and info["success"] and total == pytest.approx(2.0)


def test_plain_corridor_has_no_components() -> None:
    env = PlainCorridor()
    _, info = env.reset(seed=0)
    assert "reward_components" not in info
    for _ in range(4):
        _, reward, terminated, _, info = env.step("right")
        assert reward == 0.0
    assert terminated and info["success"]


def test_quiz_env_passes_the_env_checker_and_pays_the_right_answer() -> None:
    check_env(QuizEnv(), seeds=(0, 1, 2), steps=10)
    env = QuizEnv()
    _, info = env.reset(seed=1)
    _, reward, terminated, _, info = env.step(f"answer {info['task']['answer']}")
    assert terminated and info["success"] and reward == 1.0
