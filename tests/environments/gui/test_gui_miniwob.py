"""The MiniWoB++ environments: registration, observations, actions, rewards through MiniWoB's own
JavaScript, determinism across processes, splits, fast resets equal to fresh loads, render()."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import envgym

pytest.importorskip("playwright")
pytest.importorskip("miniwob")
pytestmark = pytest.mark.skipif(
    not os.path.exists("/usr/bin/chromium"), reason="Debian's chromium is not installed (scripts/setup.sh installs it)"
)

from envgym.environments.gui import EXCLUDED, MINIWOB_TASKS
from envgym.environments.gui.miniwob.env import MiniWoBEnv, task_names


def _ids(tree: str, role: str, name: str | None = None) -> list[int]:
    """Ids of the tree lines with ``role`` (and the name ``name``)."""
    found = []
    for line in tree.splitlines():
        body = line.strip()
        if not body.startswith("["):
            continue
        ident, rest = body[1:].split("] ", 1)
        parts = rest.split(" ", 1)
        if parts[0].rstrip(",") != role:
            continue
        if name is not None:
            if len(parts) < 2 or not parts[1].startswith('"'):
                continue
            decoder = json.JSONDecoder()
            value, _ = decoder.raw_decode(parts[1])
            if value != name:
                continue
        found.append(int(ident))
    return found


def test_every_task_page_of_the_package_is_registered_or_excluded() -> None:
    assert sorted(MINIWOB_TASKS) == task_names()  # the package's pages, all registered
    ids = {s.id for s in envgym.list_envs() if s.family == "gui"}
    assert {f"envgym/MiniWoB-{t}-v0" for t in MINIWOB_TASKS} <= ids
    assert len(MINIWOB_TASKS) == 130 and set(EXCLUDED) == {"flight.AA", "flight.Alaska", "flight.Alaska-auto"}
    with pytest.raises(envgym.errors.InvalidKwargsError, match="Did you mean 'click-button'"):
        MiniWoBEnv(task="click-buton")


def test_click_button_success_and_failure_through_miniwob_rewards() -> None:
    env = envgym.make("envgym/MiniWoB-click-button-v0")
    try:
        for seed in range(4):
            obs, info = env.reset(seed=seed)
            target = info["task"]["fields"]["target"]
            assert obs.startswith(f'Task: Click on the "{target}" button.\n')
            assert info["admissible_actions"] is None and info["task"]["utterance"] in obs
            right = _ids(obs, "button", target)
            wrong = [i for i in _ids(obs, "button") if i not in right]
            assert right and wrong
            if seed % 2 == 0:
                obs, reward, terminated, truncated, info = env.step(f"click({right[0]})")
                assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True)
                assert info["reward_components"]["raw_reward"] == 1.0
                assert info["miniwob"] == {"reward": 1.0, "raw_reward": 1.0, "reason": None, "done": True}
                assert info["termination_reason"] == "success"
            else:
                obs, reward, terminated, _, info = env.step(f"click({wrong[0]})")
                assert (reward, terminated, info["success"]) == (-1.0, True, False)
                assert info["termination_reason"] == "failure"
    finally:
        env.close()


def test_checkboxes_fill_select_and_keys() -> None:
    env = MiniWoBEnv(task="click-checkboxes")
    try:
        obs, info = env.reset(seed=3)
        targets = [v for k, v in info["task"]["fields"].items() if k.startswith("target")]
        for name in targets:
            (box,) = _ids(obs, "checkbox", name)
            obs, _, _, _, info = env.step(f"click({box})")
            assert info["action_valid"] and f'[{box}] checkbox "{name}", checked' in obs
        (submit,) = _ids(obs, "button", "Submit")
        *_, terminated, _, info = env.step(f"click({submit})")
        assert terminated and info["success"] and info["reward_components"]["raw_reward"] == 1.0
    finally:
        env.close()

    env = MiniWoBEnv(task="enter-text")
    try:
        obs, info = env.reset(seed=5)
        word = info["task"]["fields"]["target"]
        (field,) = _ids(obs, "textbox")
        obs, _, _, _, info = env.step(f'fill({field}, "{word}")')
        assert f"[{field}] textbox, value={json.dumps(word)}, focused" in obs
        obs, _, terminated, _, info = env.step('press("Enter")')  # Enter in the field does not submit here
        (submit,) = _ids(obs, "button", "Submit")
        *_, terminated, _, info = env.step(f"click({submit})")
        assert terminated and info["success"]
    finally:
        env.close()

    env = MiniWoBEnv(task="choose-list")
    try:
        obs, info = env.reset(seed=2)
        target = info["task"]["fields"]["target"]
        (combo,) = _ids(obs, "combobox")
        obs, _, _, _, info = env.step(f'select({combo}, "{target}")')
        assert f"value={json.dumps(target)}" in obs.splitlines()[_line_of(obs, combo)]
        (submit,) = _ids(obs, "button", "Submit")
        assert env.step(f"click({submit})")[4]["success"]
    finally:
        env.close()


def test_click_action_set_lists_the_clicks_and_refuses_other_calls() -> None:
    env = MiniWoBEnv(task="click-option", action_set="click", max_turns=4)
    try:
        obs, info = env.reset(seed=4)
        every = [int(line.strip()[1:].split("]", 1)[0]) for line in obs.splitlines() if line.strip().startswith("[")]
        assert info["admissible_actions"] == [f"click({i})" for i in every] and len(every) >= 4
        assert env.unwrapped.sample_action(random.Random(0)) in info["admissible_actions"]
        for bad, reason in [('fill(1, "x")', "only click(id) is allowed"), ("click(999)", "no element [999]")]:
            after, _, terminated, _, info = env.step(bad)
            assert not info["action_valid"] and not terminated and reason in after.split("\n\n")[0]
        # click-option needs two clicks (the radio button, then Submit): the clicks alone solve it
        target = info["task"]["fields"]["target"]
        (radio,) = _ids(obs, "radio", target)
        (submit,) = _ids(obs, "button", "Submit")
        _, _, terminated, _, info = env.step(f"click({radio})")
        assert info["action_valid"] and not terminated and f"click({submit})" in info["admissible_actions"]
        *_, terminated, _, info = env.step(f"click({submit})")
        assert terminated and info["success"] and info["admissible_actions"] == []
    finally:
        env.close()
    with pytest.raises(envgym.errors.InvalidKwargsError, match="action_set"):
        MiniWoBEnv(task="click-button", action_set="keys")


def test_click_text_action_set_clicks_elements_by_their_names() -> None:
    env = MiniWoBEnv(task="click-option", action_set="click_text", max_turns=6)
    try:
        obs, info = env.reset(seed=4)
        target = info["task"]["fields"]["target"]
        # one click per distinct name, in tree order (each radio and its label share a name)
        names = [json.loads(m.group(1)) for m in re.finditer(r'^ *\[\d+\] \S+ ("(?:[^"\\]|\\.)*")', obs, re.MULTILINE)]
        assert info["admissible_actions"] == [f"click({json.dumps(n)})" for n in dict.fromkeys(names)]
        assert (
            f"click({json.dumps(target)})" in info["admissible_actions"]
            and 'click("Submit")' in info["admissible_actions"]
        )
        assert env.unwrapped.sample_action(random.Random(0)) in info["admissible_actions"]
        for bad, reason in [
            ("click(1)", 'only click("name") is allowed'),
            ('fill(1, "x")', 'only click("name") is allowed'),
            ('click("Submitt")', "no element of the page is named \"Submitt\". Did you mean 'Submit'?"),
            ("click(__import__('os'))", 'only click("name") is allowed'),
        ]:
            after, _, terminated, _, info = env.step(bad)
            assert not info["action_valid"] and not terminated and reason in after.split("\n\n")[0]
        # a name matches exactly, else ignoring case and spacing; the radio is clicked, then Submit
        _, _, terminated, _, info = env.step(f"click({json.dumps('  ' + target.upper() + ' ')})")
        tree = env.unwrapped._state["tree"]
        (radio,) = _ids(tree, "radio", target)
        assert info["action_valid"] and not terminated and "checked" in tree.splitlines()[_line_of(tree, radio)]
        *_, terminated, _, info = env.step("click('Submit')")
        assert terminated and info["success"]
    finally:
        env.close()


def _line_of(obs: str, ident: int) -> int:
    return next(i for i, line in enumerate(obs.splitlines()) if line.strip().startswith(f"[{ident}]"))


def test_invalid_actions_are_steps_with_feedback_and_change_nothing() -> None:
    env = MiniWoBEnv(task="click-checkboxes", invalid_penalty=-0.25)
    try:
        obs, _ = env.reset(seed=1)
        for bad, reason in [
            ("click(999)", "no element [999]"),
            ("push(1)", "unknown action 'push'"),
            ('fill(1, "x")', "not a text field"),
            ("click_xy(500, 5)", "outside the screen"),
            ('press("Hyper+1")', "unknown modifier"),
        ]:
            after, reward, terminated, truncated, info = env.step(bad)
            assert not info["action_valid"] and reward == -0.25 and not (terminated or truncated)
            assert after.startswith("Invalid action") and reason in after.split("\n\n")[0]
            assert after.split("\n\n", 1)[1] == obs  # the page (and the tree) did not change
    finally:
        env.close()


def test_truncation_at_max_turns() -> None:
    env = MiniWoBEnv(task="click-checkboxes", max_turns=3)
    try:
        obs, _ = env.reset(seed=0)
        (label,) = _ids(obs, "label")[:1]
        results = [env.step(f"click({label})") for _ in range(3)]
        assert [r[3] for r in results] == [False, False, True] and results[-1][4]["termination_reason"] == "max_turns"
    finally:
        env.close()


def test_same_seed_same_episode_across_processes_and_splits_disjoint() -> None:
    script = textwrap.dedent(
        """
        import json, random, sys
        from envgym.environments.gui.miniwob.env import MiniWoBEnv
        out = []
        for task in ("click-checkboxes", "enter-text", "click-tab", "use-autocomplete"):
            env = MiniWoBEnv(task=task, split=sys.argv[1])
            for seed in (0, 7):
                obs, info = env.reset(seed=seed)
                rng = random.Random(seed)
                trace = [obs, info["task"]["id"]]
                for _ in range(4):
                    obs, r, te, tr, info = env.step(env.sample_action(rng))
                    trace.append([obs, r, te])
                    if te or tr:
                        break
                out.append(trace)
            env.close()
        print(json.dumps(out))
        """
    )
    runs = {}
    for split in ("train", "train", "test"):
        result = subprocess.run(
            [sys.executable, "-c", script, split], check=False, capture_output=True, text=True, timeout=300
        )
        assert result.returncode == 0, result.stderr[-2000:]
        runs.setdefault(split, []).append(json.loads(result.stdout.splitlines()[-1]))
    first, second = runs["train"]
    assert first == second  # the same seeds give the same tasks, trees and transitions in two processes
    test = runs["test"][0]
    train_ids = {trace[1] for trace in first}
    assert not train_ids & {trace[1] for trace in test}
    assert [trace[0] for trace in first] != [trace[0] for trace in test]  # other task instances


def test_test_split_uses_miniwob_test_mode() -> None:
    """click-test-transfer asks for button ONE in MiniWoB's train mode and TWO in its test mode."""
    goals = {}
    for split in ("train", "test"):
        env = MiniWoBEnv(task="click-test-transfer", split=split)
        try:
            goals[split] = {env.reset(seed=s)[1]["task"]["goal"] for s in range(3)}
        finally:
            env.close()
    assert goals == {"train": {"Click button ONE."}, "test": {"Click button TWO."}}


@pytest.mark.parametrize("task", ["click-checkboxes", "click-collapsible", "use-autocomplete", "click-dialog-2"])
def test_fast_reset_equals_a_fresh_page(task: str) -> None:
    """An episode started by a fast reset of a used page plays exactly like one on a freshly loaded page."""

    def play(env: MiniWoBEnv, seed: int) -> list:
        obs, info = env.reset(seed=seed)
        rng = random.Random(seed)
        trace = [obs, info["task"]]
        for _ in range(6):
            obs, reward, terminated, truncated, info = env.step(env.sample_action(rng))
            trace.append((obs, reward, terminated, info["miniwob"]))
            if terminated or truncated:
                break
        return trace

    fresh = MiniWoBEnv(task=task, reset_mode="reload")
    fast = MiniWoBEnv(task=task, reset_mode="fast")
    try:
        play(fast, 99)  # leave the page in some other episode's state
        for seed in (0, 1, 2):
            assert play(fast, seed) == play(fresh, seed)
    finally:
        fresh.close()
        fast.close()


def test_form_sequence_3_plays_the_same_in_every_env() -> None:
    """Issue 37: same seed, same click(4) on an option; the first env of a process loaded the page
    and opened Selectric's list, the next ones took that page back from the pool and, after a fast
    reset, did not. The task now starts every episode from a fresh load."""
    assert "form-sequence-3" in MiniWoBEnv.RELOAD_TASKS
    seen = []
    for _ in range(3):
        env = MiniWoBEnv(task="form-sequence-3")
        try:
            env.reset(seed=0)
            obs, *_ = env.step("click(4)")
            seen.append(obs)
        finally:
            env.close()
    assert seen[0] == seen[1] == seen[2]
    assert 'option "5ft 10in", selected' in seen[0]


def test_reload_tasks_are_real_tasks() -> None:
    assert MiniWoBEnv.RELOAD_TASKS <= set(MINIWOB_TASKS)


def test_dict_observation_screenshot_and_render() -> None:
    env = MiniWoBEnv(task="click-button", obs="dict", dom=True, boxes=True, render_mode="rgb_array", scale=2)
    try:
        obs, info = env.reset(seed=0)
        assert set(obs) == {"goal", "axtree", "screenshot", "last_action_error", "dom"}
        assert env.observation_space.contains(obs)
        shot = obs["screenshot"]
        assert shot.shape == (420, 320, 3) and shot.dtype == np.uint8 and shot.std() > 0
        assert np.array_equal(env.render(), shot)
        assert "<button" in obs["dom"] and obs["goal"] == info["task"]["goal"]
        target = info["task"]["fields"]["target"]
        (button,) = _ids(obs["axtree"], "button", target)
        x, y, w, h = info["boxes"][button]  # screenshot pixels (scale 2)
        obs, reward, *_ = env.step(f"click_xy({x + w / 2}, {y + h / 2})")
        assert reward == 1.0 and obs["last_action_error"] == ""
        obs, *_ = env.reset(seed=1)
        obs, *_, info = env.step("click(0)")
        assert obs["last_action_error"].startswith("Invalid action") and not info["action_valid"]
    finally:
        env.close()


def test_screenshots_in_one_devtools_call_equal_playwrights() -> None:
    """A still page (no CSS animation) is captured in one call; the pixels are Playwright's own
    screenshot's (animations stopped, caret hidden), with a focused text field and its caret too."""
    env = MiniWoBEnv(task="enter-text", obs="dict")
    try:
        obs, _ = env.reset(seed=3)
        (field,) = _ids(obs["axtree"], "textbox")
        obs, *_ = env.step(f"click({field})")
        assert "focused" in obs["axtree"] and env._state["still"] is True
        assert np.array_equal(obs["screenshot"], env._tab.screenshot())  # Playwright's path
        obs, *_ = env.step(f'fill({field}, "abc")')
        assert np.array_equal(obs["screenshot"], env._tab.screenshot())
    finally:
        env.close()


def test_virtual_time_drives_delayed_tasks() -> None:
    """click-collapsible opens its section with a jQuery UI animation, which runs on virtual time: fully
    open one step (500 virtual ms) after the click, not started when no time passes; MiniWoB's
    time-discounted reward counts virtual time too."""
    env = MiniWoBEnv(task="click-collapsible", boxes=True)
    frozen = MiniWoBEnv(task="click-collapsible", step_ms=0, boxes=True)
    heights = []
    try:
        for e in (env, frozen):
            obs, info = e.reset(seed=0)
            assert "tabpanel" not in obs
            header = _ids(obs, "tab")[0]
            obs, *_, info = e.step(f"click({header})")
            (panel,) = _ids(obs, "tabpanel")
            heights.append(info["boxes"][panel][3])
            if e is env:
                assert "StaticText" in obs.splitlines()[_line_of(obs, panel) + 1]  # its words are shown
                (submit,) = _ids(obs, "button", "Submit")
                *_, info = e.step(f"click({submit})")
                # endEpisode(1, time_proportional=true) at the second click, after one step of 500 virtual ms
                assert info["miniwob"]["reward"] == pytest.approx(1 - 500 / (2**31 - 1), rel=1e-12)
    finally:
        env.close()
        frozen.close()
    assert heights[0] > 20 and heights[1] < heights[0]
