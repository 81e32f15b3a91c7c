"""The MiniWoB oracle (agents/solvers/miniwob.py): the tree parser on fixed text, and a CI-sized
sample of real episodes (3 test-split seeds of every supported task) that it must all win.

The full figures (100 seeds per task) come from benchmarks/perf/gui_oracle.py."""

from __future__ import annotations

import os

import pytest
from envgym.agents.solvers.miniwob_tree import observation_parts, parse_axtree

TREE = """[1] label "bqj"
  [2] checkbox "bqj"
[3] label "p7 \\"x\\""
  [4] checkbox "p7JV1z5", checked
StaticText "loose text"
[5] textbox, value="a b ", focused
[6] combobox, value="Two"
  [7] option "One"
  [8] option "Two", selected
[9] generic, class="reply"
[11] button "Submit", disabled"""


def test_parse_axtree_reads_ids_roles_names_props_and_nesting() -> None:
    tree = parse_axtree(TREE)
    assert [n.id for n in tree.nodes] == ["1", "2", "3", "4", None, "5", "6", "7", "8", "9", "11"]
    label, box = tree.by_id["3"], tree.by_id["4"]
    assert label.name == 'p7 "x"' and label.role == "label"
    assert box.parent is label and box.checked and box.role == "checkbox"
    assert not tree.by_id["2"].checked
    text = tree.nodes[4]
    assert text.role == "StaticText" and text.name == "loose text" and text.parent is None
    field = tree.by_id["5"]
    assert field.value == "a b " and field.prop("focused") is True  # values verbatim, trailing space kept
    assert [c.name for c in tree.by_id["6"].children] == ["One", "Two"] and tree.by_id["8"].selected
    assert tree.by_id["9"].prop("class") == "reply" and tree.by_id["9"].name == ""
    assert tree.by_id["11"].prop("disabled") is True
    assert [n.id for n in tree.named("bqj")] == ["2"]  # the innermost of nested namesakes


def test_observation_parts_reads_both_views() -> None:
    info = {"task": {"utterance": "Click it."}}
    assert observation_parts('Task: Click it.\n[1] button "OK"', info) == ("Click it.", '[1] button "OK"')
    assert observation_parts({"goal": "Click it.", "axtree": "[1] button"}, {}) == ("Click it.", "[1] button")


def test_every_supported_task_is_a_registered_env_and_others_are_refused() -> None:
    from envgym.agents.solvers.miniwob import SUPPORTED, Solver

    from envgym.errors import NotAvailableError
    from envgym.registration import list_envs

    ids = {s.id for s in list_envs()}
    assert len(SUPPORTED) >= 40
    missing = [t for t in SUPPORTED if f"envgym/MiniWoB-{t}-v0" not in ids]
    assert missing == []
    with pytest.raises(NotAvailableError, match="does not support"):
        Solver("envgym/MiniWoB-draw-circle-v0", 0)


def test_the_oracle_is_found_by_convention() -> None:
    pytest.importorskip("playwright")
    from envgym.agents.oracle import load_solver
    from envgym.agents.solvers.miniwob import Solver

    assert load_solver("envgym/MiniWoB-click-button-v0") is Solver


def _supported() -> list[str]:
    from envgym.agents.solvers.miniwob import SUPPORTED

    return list(SUPPORTED)


@pytest.mark.skipif(
    not os.path.exists("/usr/bin/chromium"), reason="Debian's chromium is not installed (scripts/setup.sh installs it)"
)
@pytest.mark.parametrize("task", _supported())
def test_the_oracle_wins_a_sample_of_episodes(task: str) -> None:
    pytest.importorskip("playwright")
    pytest.importorskip("miniwob")
    from envgym.agents.solvers.miniwob import WANTS_BOXES, Solver

    import envgym

    env_id = f"envgym/MiniWoB-{task}-v0"
    env = envgym.make(env_id, split="test", max_turns=20, boxes=task in WANTS_BOXES)
    try:
        for seed in (0, 1, 2):
            obs, info = env.reset(seed=seed)
            solver = Solver(env_id, seed)
            actions = []
            while True:
                action = solver.act(obs, info)
                actions.append(action)
                obs, _reward, terminated, truncated, info = env.step(action)
                if terminated or truncated:
                    break
            assert info["success"], (task, seed, actions, solver.last_error, obs[:600])
            assert info["reward_components"]["raw_reward"] > 0
    finally:
        env.close()
