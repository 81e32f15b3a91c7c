"""Registration in Gymnasium's registry, the import hook, ids, variants and error messages."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import gymnasium as gym
import pytest

import envgym
from envgym.errors import EnvgymError, UnknownEnvError
from envgym.registration import EnvSpec, list_envs, register

HEAVY = ("torch", "playwright", "docker", "ray", "transformers", "vllm")


def _run(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_gymnasium_make_in_a_fresh_interpreter_without_importing_envgym() -> None:
    out = _run(
        """
        import gymnasium, json
        env = gymnasium.make("envgym/Sokoban-v0")
        obs, info = env.reset(seed=7)
        print(json.dumps({"obs": isinstance(obs, str), "id": env.spec.id, "task": info["task"]["id"]}))
        """
    )
    data = json.loads(out)
    assert data == {"obs": True, "id": "envgym/Sokoban-v0", "task": data["task"]} and data["task"]


def test_gymnasium_make_after_import_envgym_and_heavy_modules_stay_unloaded() -> None:
    out = _run(
        f"""
        import sys, json
        import envgym
        before = [m for m in {HEAVY!r} if m in sys.modules]
        import gymnasium
        env = gymnasium.make("envgym/FrozenLake-v0")
        env.reset(seed=0)
        after = [m for m in {HEAVY!r} if m in sys.modules]
        print(json.dumps([before, after]))
        """
    )
    assert json.loads(out) == [[], []]


def test_import_envgym_does_not_import_gymnasium_eagerly() -> None:
    out = _run(
        """
        import sys
        sys.modules.pop("gymnasium", None)
        import envgym
        print("gymnasium" in sys.modules, "numpy" in sys.modules)
        """
    )
    assert out.split() == ["False", "False"]


def test_every_single_agent_spec_is_in_gymnasiums_registry() -> None:
    specs = [s for s in list_envs(kind="gymnasium") if s.family != "test"]
    assert len(specs) >= 7
    for spec in specs:
        assert spec.id in gym.registry, spec.id
        assert gym.spec(spec.id).entry_point == spec.entry_point
        assert spec.id.startswith("envgym/")


def test_families_and_variants() -> None:
    games = {s.id for s in list_envs(family="games")}
    for name in ("Sokoban", "FrozenLake", "Wordle", "Minesweeper", "Countdown", "TicTacToe", "ConnectFour"):
        assert f"envgym/{name}-v0" in games
        for level in ("Easy", "Medium", "Hard"):
            assert f"envgym/{name}-{level}-v0" in games
    variant = envgym.spec("envgym/Sokoban-Hard-v0")
    assert variant.variant_of == "envgym/Sokoban-v0" and variant.kwargs == {"difficulty": "hard"}
    bases = list_envs(variants=False)
    assert all(s.variant_of is None for s in bases)


def test_multi_agent_specs() -> None:
    aec = {s.id for s in list_envs(kind="aec")}
    assert {"envgym/TicTacToe-v0", "envgym/ConnectFour-v0"} <= aec


def test_unknown_id_suggests_the_closest() -> None:
    with pytest.raises(UnknownEnvError, match="Did you mean 'envgym/Sokoban-v0'"):
        envgym.make("envgym/Sokobn-v0")


def test_unknown_version_lists_registered_versions() -> None:
    with pytest.raises(UnknownEnvError, match="registered versions: envgym/Sokoban-v0"):
        envgym.make("envgym/Sokoban-v9")


def test_multi_agent_id_through_make_points_to_make_aec() -> None:
    with pytest.raises(UnknownEnvError, match="gymnasium environment: build it with envgym.make"):
        envgym.make_parallel("envgym/Sokoban-v0")
    with pytest.raises(EnvgymError, match="make_aec"):
        envgym.make_parallel("envgym/TicTacToe-v0")


def test_bad_kwargs_through_gymnasium_make_name_valid_options() -> None:
    with pytest.raises(TypeError, match="Did you mean 'difficulty'"):
        gym.make("envgym/Sokoban-v0", dificulty="hard")


def test_spec_validation() -> None:
    with pytest.raises(EnvgymError, match="namespace/Name-vN"):
        EnvSpec(id="Sokoban", entry_point="m:C", family="x")
    with pytest.raises(EnvgymError, match="module:attribute"):
        EnvSpec(id="envgym/X-v0", entry_point="m.C", family="x")
    with pytest.raises(EnvgymError, match="kind"):
        EnvSpec(id="envgym/X-v0", entry_point="m:C", family="x", kind="vector")  # type: ignore[arg-type]


def test_register_is_idempotent_and_refuses_silent_changes() -> None:
    spec = EnvSpec(id="envgymtest/Guess-v0", entry_point="toy_envs:GuessEnv", family="test")
    register(spec)
    register(spec)
    env = gym.make("envgymtest/Guess-v0", high=3)
    assert env.reset(seed=1)[1]["admissible_actions"] == ["1", "2", "3"]
    with pytest.raises(EnvgymError, match="bump the version"):
        register(EnvSpec(id="envgymtest/Guess-v0", entry_point="toy_envs:BrokenInfoEnv", family="test"))
