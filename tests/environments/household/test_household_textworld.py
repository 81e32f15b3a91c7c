"""TextWorld bridge (envgym/TextWorld-v0): needs the optional `textworld` package.

The tests that play games are skipped, with the reason, when `textworld` cannot be imported;
they generate small games and compile them with the Inform 7 toolchain shipped in its wheel
into a temporary cache (a few seconds per game).
"""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

import envgym
from envgym.errors import InvalidKwargsError, MissingDependencyError
from envgym.testing import check_env

HAVE_TEXTWORLD = importlib.util.find_spec("textworld") is not None
needs_textworld = pytest.mark.skipif(
    not HAVE_TEXTWORLD, reason="the optional package 'textworld' is not installed (pip install 'envgym[textworld]')"
)
SMALL = {"rooms": 2, "objects": 4, "quest_length": 2}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory):
    return tmp_path_factory.mktemp("textworld-cache")


def test_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "textworld", None)  # makes `import textworld` fail
    with pytest.raises(MissingDependencyError, match=r"pip install 'envgym\[textworld\]'"):
        envgym.make("envgym/TextWorld-v0")


def test_registration_imports_no_textworld() -> None:
    spec = envgym.spec("envgym/TextWorld-v0")
    assert spec.entry_point == "envgym.environments.household.textworld_env:TextWorldEnv"
    import envgym.environments.household as family

    assert "textworld" not in vars(family)


@needs_textworld
def test_bad_kwargs() -> None:
    with pytest.raises(InvalidKwargsError, match="quest_length"):
        envgym.make("envgym/TextWorld-v0", quest_length=0)


@needs_textworld
@pytest.mark.slow
def test_check_env(cache_dir) -> None:
    # Gymnasium's own checker resets with seeds of its choosing, each a new game to generate and
    # compile (12 s of this test): tests/test_all_envs.py runs it on envgym/TextWorld-v0, the
    # first id of this entry point; here the envgym contract runs on small games.
    report = check_env(
        "envgym/TextWorld-v0", make_kwargs={"cache_dir": str(cache_dir), **SMALL}, gymnasium_checks=False
    )
    assert "seeded_determinism" in report.checks


@needs_textworld
@pytest.mark.slow
def test_walkthrough_wins_and_cache_is_reused(cache_dir) -> None:
    import textworld

    env = envgym.make("envgym/TextWorld-v0", cache_dir=str(cache_dir), **SMALL)
    obs, info = env.reset(seed=0)
    game_file = env.unwrapped.game_file
    assert game_file.parent == cache_dir and game_file.with_suffix(".json").is_file()
    assert obs.startswith("-= Welcome to TextWorld! =-") and "$$" not in obs
    assert info["admissible_actions"] and info["progress"] == 0.0
    walkthrough = textworld.Game.load(str(game_file.with_suffix(".json"))).walkthrough
    assert walkthrough
    total = 0.0
    for command in walkthrough:
        assert command in info["admissible_actions"]
        obs, reward, terminated, _truncated, info = env.step(command)
        total += reward
        if terminated:
            break
    assert terminated and info["success"] and info["termination_reason"] == "success"
    assert info["progress"] == 1.0 and total == pytest.approx(2.0)  # success + progress
    # Same seed again: served from the cache (no compilation), same game.
    mtime = game_file.stat().st_mtime_ns
    _obs2, info2 = env.reset(seed=0)
    assert game_file.stat().st_mtime_ns == mtime and info2["task"]["id"] == info["task"]["id"]
    # An unknown command is an invalid step that never reaches the game.
    obs3, reward3, *_, info3 = env.step("dance with the grue")
    assert not info3["action_valid"] and "Nothing happens." in obs3 and reward3 == -0.1
    assert json.loads(game_file.with_suffix(".json").read_text())  # metadata published with the game
    env.close()


@needs_textworld
@pytest.mark.slow
def test_train_and_test_games_differ(cache_dir) -> None:
    ids = set()
    for split in ("train", "test"):
        env = envgym.make("envgym/TextWorld-v0", cache_dir=str(cache_dir), split=split, **SMALL)
        ids.add(env.reset(seed=0)[1]["task"]["id"])
        env.close()
    assert len(ids) == 2
