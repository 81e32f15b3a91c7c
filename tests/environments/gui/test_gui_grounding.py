"""GUI grounding (envgym/GUIGrounding-*): generated forms rendered by Chromium, point/box answers,
rewards, splits, views, and the oracle."""

from __future__ import annotations

import hashlib
import math
import random
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

import envgym
from envgym.errors import InvalidKwargsError

pytest.importorskip("playwright.sync_api", reason="the grounding envs render in Chromium (pip install 'envgym[gui]')")
pytest.importorskip("PIL", reason="the grounding envs decode screenshots with Pillow (pip install 'envgym[gui]')")

from envgym.agents.solvers.gui_grounding import Solver, find_target
from envgym.environments.gui.grounding.env import GUIGroundingEnv, parse_answer, score_answer
from envgym.environments.gui.grounding.forms import (
    _BUTTONS,
    _CHECKS,
    _FIELDS,
    _LINKS,
    _RADIOS,
    _ROW_ACTIONS,
    _ROW_ITEMS,
    _SECONDARY,
    _SELECTS,
    describe_target,
    generate_form,
    split_words,
)
from envgym.environments.gui.grounding.render import CHROMIUM

pytestmark = pytest.mark.skipif(
    not __import__("os").path.exists(CHROMIUM), reason=f"Debian's Chromium ({CHROMIUM}) is not installed"
)

DICT_ID = "envgym/GUIGrounding-v0"
TEXT_ID = "envgym/GUIGrounding-Text-v0"


def _registered() -> None:
    """The ids, whether or not the gui family's SPECS lists them yet (they are appended there)."""
    from envgym.environments.gui.grounding.specs import GROUNDING_SPECS

    from envgym.registration import register

    for spec in GROUNDING_SPECS:
        register(spec)


_registered()


@pytest.fixture(scope="module")
def env() -> Any:
    made = envgym.make(DICT_ID)
    yield made
    made.close()


@pytest.fixture(scope="module")
def text_env() -> Any:
    made = envgym.make(TEXT_ID)
    yield made
    made.close()


# ---------------------------------------------------------------- answers and rewards


def test_answers_parse_strictly() -> None:
    assert parse_answer("click(10, 20)", 480, 360) == ("point", (10.0, 20.0))
    assert parse_answer("CLICK_XY( 3.5 ,7 )", 480, 360) == ("point", (3.5, 7.0))
    assert parse_answer("box(1, 2, 30, 40)", 480, 360) == ("box", (1.0, 2.0, 30.0, 40.0))
    from envgym.core import InvalidAction

    for bad in ("click(10)", "click(a, b)", "tap(1, 2)", "click(1, 2) now", "box(30, 2, 1, 40)", "box(1, 40, 30, 40)",
                "click(481, 3)", "click(-1, 3)", "click(1e3, 2)", "click(nan, 1)", ""):  # fmt: skip
        with pytest.raises(InvalidAction):
            parse_answer(bad, 480, 360)


def test_reward_components_by_hand() -> None:
    target = (100.0, 50.0, 140.0, 70.0)  # centre (120, 60)
    diagonal = math.hypot(480, 360)  # 600
    centre = score_answer("point", (120, 60), target, 480, 360)
    assert centre == {"hit_reward": 1.0, "distance_reward": 0.0, "iou_reward": 0.0}
    edge = score_answer("point", (140, 70), target, 480, 360)  # edges count as inside
    assert edge["hit_reward"] == 1.0 and edge["distance_reward"] == pytest.approx(-math.hypot(20, 10) / diagonal)
    miss = score_answer("point", (420, 60), target, 480, 360)
    assert miss["hit_reward"] == 0.0 and miss["distance_reward"] == pytest.approx(-0.5)  # 300 px of 600
    # a box over the left half of the target: IoU 1/2, centre (110, 60) inside
    half = score_answer("box", (100, 50, 120, 70), target, 480, 360)
    assert half["hit_reward"] == 1.0 and half["iou_reward"] == pytest.approx(0.5)
    assert half["distance_reward"] == pytest.approx(-10 / diagonal)
    # a box twice the target's size around it: IoU 1/4 (exact in binary floating point)
    assert score_answer("box", (80, 40, 160, 80), target, 480, 360)["iou_reward"] == 0.25
    assert score_answer("box", (0, 0, 10, 10), target, 480, 360)["iou_reward"] == 0.0


def test_one_answer_ends_the_episode_and_malformed_ones_are_invalid_steps(env: Any) -> None:
    obs, info = env.reset(seed=11)
    assert set(obs) == {"instruction", "screenshot"} and obs["screenshot"].dtype == np.uint8
    obs, reward, terminated, _, info = env.step("press the button")
    assert not info["action_valid"] and not terminated and reward == pytest.approx(-0.1)
    assert obs["instruction"].startswith("Invalid action") and "click(x, y)" in obs["instruction"]
    target = find_target(info["task"]["goal"], info["elements"])
    assert target is not None
    x1, y1, x2, y2 = target["box"]
    obs, reward, terminated, _, info = env.step(f"box({x1}, {y1}, {x2}, {y2})")
    assert terminated and info["success"] and info["termination_reason"] == "success"
    assert info["reward_components"]["iou_reward"] == 1.0 and reward == pytest.approx(2.0, abs=0.01)
    assert obs["instruction"].startswith(f"Your answer box({x1}, {y1}, {x2}, {y2}) hit the target.")


def test_answer_forms_can_be_restricted() -> None:
    points = envgym.make(DICT_ID, answer="point")
    boxes = envgym.make(DICT_ID, answer="box")
    try:
        obs, _ = points.reset(seed=2)
        assert "Answer with click(x, y)." in obs["instruction"]
        assert points.step("box(1, 1, 5, 5)")[4]["action_valid"] is False
        assert points.step("click(1, 1)")[4]["action_valid"] is True
        obs, _ = boxes.reset(seed=2)
        assert "Answer with box(x1, y1, x2, y2)." in obs["instruction"]
        assert boxes.step("click(1, 1)")[4]["action_valid"] is False
        assert Solver(DICT_ID).act(obs, boxes.reset(seed=2)[1]).startswith("box(")
    finally:
        points.close()
        boxes.close()
    for bad in ({"answer": "polygon"}, {"obs": "html"}, {"width": 100}, {"height": 240.5}, {"source": "web"}):
        with pytest.raises(InvalidKwargsError):
            GUIGroundingEnv(**bad)


# ---------------------------------------------------------------- what the agent sees


def test_boxes_are_where_the_screenshot_draws_the_elements(env: Any) -> None:
    checked = 0
    for seed in range(6):
        obs, info = env.reset(seed=seed)
        shot = obs["screenshot"]
        assert shot.shape == (360, 480, 3)
        for element in info["elements"]:
            x1, y1, x2, y2 = element["box"]
            assert 0 <= x1 < x2 <= 480 and 0 <= y1 < y2 <= 360
            if element["role"] == "textbox":
                # everything inside the border of an empty text field is its white background
                assert (shot[y1 + 3 : y2 - 3, x1 + 3 : x2 - 3] == 255).all()
                checked += 1
    assert checked >= 10


def test_render_returns_the_screenshot_and_the_text_view_lists_every_element(env: Any, text_env: Any) -> None:
    obs, info = env.reset(seed=4)
    np.testing.assert_array_equal(env.render(), obs["screenshot"])
    text, tinfo = text_env.reset(seed=4)
    assert isinstance(text, str) and text.startswith(f"Instruction: {info['task']['goal']}\n")
    assert tinfo["task"] == info["task"] and tinfo["elements"] == info["elements"]
    for element in info["elements"]:
        x1, y1, x2, y2 = element["box"]
        assert f'[{element["id"]}] {element["role"]} "{element["name"]}" box=({x1}, {y1}, {x2}, {y2})' in text
    # the dict view's instruction has no element list
    assert "Elements" not in obs["instruction"] and "Elements" in text


def test_same_seed_same_screenshot_in_another_process(env: Any) -> None:
    obs, info = env.reset(seed=7)
    here = hashlib.sha256(obs["screenshot"].tobytes()).hexdigest()
    code = (
        "import hashlib, envgym\n"
        "from envgym.environments.gui.grounding.specs import GROUNDING_SPECS\n"
        "from envgym.registration import register\n"
        "[register(s) for s in GROUNDING_SPECS]\n"
        f"env = envgym.make({DICT_ID!r})\n"
        "obs, info = env.reset(seed=7)\n"
        "print(hashlib.sha256(obs['screenshot'].tobytes()).hexdigest(), info['task']['id'])\n"
        "env.close()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == [here, info["task"]["id"]]


# ---------------------------------------------------------------- splits


def test_splits_draw_from_disjoint_vocabularies() -> None:
    targets: dict[str, set[str]] = {}
    words: dict[str, set[str]] = {}
    for split in ("train", "test"):
        targets[split], words[split] = set(), set()
        for seed in range(300):
            rng = random.Random(f"gui_grounding:{split}:{seed}")
            form = generate_form(rng, split, width=480, height=360)
            target, _, _ = describe_target(form, form.elements, rng)
            targets[split].add(target.name)
            words[split] |= {e.name for e in form.elements}
    assert not targets["train"] & targets["test"]
    assert not words["train"] & words["test"]
    assert len(targets["train"]) > 60 and len(targets["test"]) > 20
    for pool in (_FIELDS, _SELECTS, _CHECKS, _RADIOS, _BUTTONS, _SECONDARY, _LINKS, _ROW_ITEMS, _ROW_ACTIONS):
        train, test = split_words(pool, "train"), split_words(pool, "test")
        assert set(train) | set(test) == set(pool) and not set(train) & set(test) and test


def test_the_env_uses_the_split_vocabularies() -> None:
    test_env = envgym.make(TEXT_ID, split="test")
    try:
        test_words = {w for pool in (_FIELDS, _BUTTONS, _LINKS, _CHECKS) for w in split_words(pool, "test")}
        train_words = {w for pool in (_FIELDS, _BUTTONS, _LINKS, _CHECKS) for w in split_words(pool, "train")}
        for seed in range(3):
            _, info = test_env.reset(seed=seed)
            names = {e["name"] for e in info["elements"]}
            assert names & test_words and not names & train_words
            assert info["task"]["split"] == "test"
    finally:
        test_env.close()


# ---------------------------------------------------------------- oracle and random agent


@pytest.mark.parametrize("env_id", [DICT_ID, TEXT_ID])
def test_oracle_solves_a_ci_sample(env_id: str) -> None:
    made = envgym.make(env_id)
    solved, kinds = 0, set()
    try:
        for seed in range(30):
            obs, info = made.reset(seed=seed)
            kinds.add(info["task"]["kind"])
            _, _, terminated, _, info = made.step(Solver(env_id, seed).act(obs, info))
            solved += info["success"]
            assert terminated
    finally:
        made.close()
    assert solved / 30 >= 0.95
    assert kinds == {"text", "label", "ordinal", "row"}


def test_random_points_rarely_hit(env: Any) -> None:
    hits = 0
    for seed in range(40):
        env.reset(seed=seed)
        hits += env.step(env.unwrapped.sample_action(random.Random(seed)))[4]["success"]
    assert hits / 40 < 0.15  # targets cover a few percent of the screen


# ---------------------------------------------------------------- MiniWoB scenes


def test_miniwob_pages_split_and_axtree_lines_parse() -> None:
    from envgym.environments.gui.grounding.miniwob import PAGES, pages, parse_axtree

    train, test = set(pages("train")), set(pages("test"))
    assert not train & test and train | test == set(PAGES) and len(test) == 6
    text = '[1] button "Okay"\n  [2] textbox, value=""\n[3] label "say \\"hi\\"", focused\nStaticText "x"'
    assert parse_axtree(text) == [(1, "button", "Okay"), (2, "textbox", ""), (3, "label", 'say "hi"')]


def test_miniwob_scenes_oracle_and_splits() -> None:
    from envgym.environments.gui.grounding.miniwob import pages

    pytest.importorskip("miniwob", reason="MiniWoB scenes need the miniwob package (pip install 'envgym[gui]')")
    env_id = "envgym/GUIGrounding-MiniWoB-Text-v0"
    for split in ("train", "test"):
        made = envgym.make(env_id, split=split)
        try:
            solved = 0
            for seed in range(8):
                obs, info = made.reset(seed=seed)
                assert info["task"]["page"] in pages(split)
                assert obs.startswith("Instruction: ") and "Screen: 320x420 pixels" in obs
                solved += made.step(Solver(env_id, seed).act(obs, info))[4]["success"]
            assert solved == 8
        finally:
            made.close()
