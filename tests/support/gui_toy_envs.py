"""A tiny environment that renders ``rgb_array`` frames, for the screenshot-recording tests.

It lives in an importable module (not a test file) because the process backend makes it again
inside worker processes. Each frame is one flat colour that encodes the state, so a test reads the
turn and the last guess back from a saved PNG: red = 30 x turn, green = 20 x last guess (0 before
any), blue = 10 x secret.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from toy_envs import GuessEnv

from envgym.registration import EnvSpec, register
from envgym.spaces import MAX_TEXT_LENGTH, Text

FRAME_SHAPE = (12, 16, 3)


def frame_colour(turn: int, last: int | None, secret: int) -> tuple[int, int, int]:
    """The colour of every pixel of the frame after ``turn`` actions."""
    return (30 * turn, 20 * (last or 0), 10 * secret)


class PaintEnv(GuessEnv):
    """GuessEnv that renders a flat-colour frame of its state (``render_mode="rgb_array"``); with
    ``dict_obs`` the observation is ``{"text": ..., "image": frame}`` (an image inside the
    observation, which run records must not inline)."""

    name = "paint"
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "human", "rgb_array"], "render_fps": 4}

    def __init__(self, *, dict_obs: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dict_obs = dict_obs
        if dict_obs:
            self.observation_space = gym.spaces.Dict(
                {"text": Text(MAX_TEXT_LENGTH), "image": gym.spaces.Box(0, 255, FRAME_SHAPE, np.uint8)}
            )

    def _frame(self) -> np.ndarray:
        return np.full(FRAME_SHAPE, frame_colour(self.turn, self.last, self.secret), np.uint8)

    def render(self) -> Any:
        if self.render_mode == "rgb_array":
            return self._frame()
        return super().render()

    def _wrap(self, text: str) -> Any:
        return {"text": text, "image": self._frame()} if self.dict_obs else text

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        text, info = super().reset(seed=seed, options=options)
        return self._wrap(text), info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        text, reward, terminated, truncated, info = super().step(action)
        return self._wrap(text), reward, terminated, truncated, info


PAINT_ID = "envgymtest/Paint-v0"
PAINT_DICT_ID = "envgymtest/PaintDict-v0"
SPECS = [
    EnvSpec(id=PAINT_ID, entry_point="gui_toy_envs:PaintEnv", family="test", kwargs={"high": 6}),
    EnvSpec(
        id=PAINT_DICT_ID,
        entry_point="gui_toy_envs:PaintEnv",
        family="test",
        kwargs={"high": 6, "dict_obs": True, "render_mode": "rgb_array"},
    ),
]
for _spec in SPECS:
    register(_spec)
