"""``envgym play`` on a MiniWoB page: the screen saved after the last turn is the task as it was left,
not the START cover MiniWoB puts over the task when an episode ends (the frame the leaderboard's
viewer shows as the episode's final screen comes from the same ``render()``)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import envgym
from envgym.cli import app

pytest.importorskip("playwright.sync_api", reason="MiniWoB needs `pip install playwright`")
Image = pytest.importorskip("PIL.Image")
if shutil.which("chromium") is None and not Path("/usr/bin/chromium").exists():
    pytest.skip("no Chromium (apt-get install chromium)", allow_module_level=True)


def _png(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"), dtype=np.float64)


def test_the_last_screen_is_the_task_not_the_start_cover(tmp_path: Path) -> None:
    env = envgym.make("envgym/MiniWoB-click-button-v0")  # the seed's task, to know which button to click
    try:
        observation, _ = env.reset(seed=0)
    finally:
        env.close()
    button = re.search(r'Click on the "([^"]+)" button', observation)[1]  # type: ignore[index]
    target = re.search(rf'\[(\d+)\] button "{re.escape(button)}"', observation)[1]  # type: ignore[index]
    result = CliRunner().invoke(app, ["play", "envgym/MiniWoB-click-button-v0", "--seed", "0", "-k",
                                      "render_mode=rgb_array", "--screenshots", str(tmp_path)],
                                input=f"click({target})\n")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "Episode solved." in result.stdout
    before, after = _png(tmp_path / "turn-0.png"), _png(tmp_path / "turn-1.png")
    assert before.shape == after.shape
    # The cover is a dark page with one word on it; the task is a light page. Below the
    # instruction bar (which MiniWoB colours when an episode ends) the last screen is the task's.
    assert after.mean() > 150, after.mean()
    body = slice(after.shape[0] // 4, None)
    assert np.abs(after[body] - before[body]).mean() < 10
