"""envgym.testing.check_env passes good environments and catches broken ones."""

from __future__ import annotations

import pytest
from toy_envs import BrokenInfoEnv, GuessEnv, NondeterministicEnv, RaisingEnv

from envgym.errors import EnvContractError
from envgym.registration import EnvSpec, register
from envgym.testing import BAD_ACTIONS, CheckReport, check_env
from envgym.testing.single_agent import (
    check_bad_inputs,
    check_pickle,
    check_reset_info,
    check_step_before_reset,
    check_truncation,
)

for _cls in (GuessEnv, BrokenInfoEnv, NondeterministicEnv, RaisingEnv):
    register(EnvSpec(id=f"envgymtest/{_cls.__name__}-v0", entry_point=f"toy_envs:{_cls.__name__}", family="test"))


def test_good_env_passes_every_check() -> None:
    report = check_env("envgymtest/GuessEnv-v0")
    assert report.checks == [
        "gymnasium.check_env",
        "step_before_reset",
        "reset_info",
        "seeded_determinism",
        "bad_input_fuzz",
        "max_turns",
        "pickle_roundtrip",
        "close_twice",
    ]
    assert report.steps > 0


def test_missing_info_key_is_caught() -> None:
    with pytest.raises(EnvContractError, match=r"\[info\].*success"):
        check_env("envgymtest/BrokenInfoEnv-v0", gymnasium_checks=False)


def test_ignored_seed_is_caught() -> None:
    with pytest.raises(EnvContractError, match="determinism"):
        check_env("envgymtest/NondeterministicEnv-v0", make_kwargs={"high": 5000}, gymnasium_checks=False)


def test_raising_on_bad_input_is_caught() -> None:
    with pytest.raises(EnvContractError, match="fuzz|gymnasium|determinism"):
        check_env("envgymtest/RaisingEnv-v0")


def test_bad_actions_cover_the_hostile_cases() -> None:
    kinds = {type(a).__name__ for a in BAD_ACTIONS}
    assert {"str", "NoneType", "int", "bytes", "list", "dict"} <= kinds
    assert any(isinstance(a, str) and len(a) >= 100_000 for a in BAD_ACTIONS)
    assert any(isinstance(a, str) and "\x00" in a for a in BAD_ACTIONS)


def test_unregistered_instance_is_checked_against_a_twin_with_its_kwargs() -> None:
    # The twin must get the same kwargs (not GuessEnv()), or its rollouts differ in length.
    report = check_env(GuessEnv(high=20, max_turns=2))
    assert "pickle_roundtrip" in report.checks and "seeded_determinism" in report.checks


class _NeedsSize(GuessEnv):
    """GuessEnv with a required keyword argument."""

    def __init__(self, *, size: int, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.size = size


def test_env_with_a_required_kwarg_can_be_checked_as_an_instance() -> None:
    assert check_env(_NeedsSize(size=3)).checks[-1] == "close_twice"


def test_first_action_that_wins_does_not_break_the_pickle_check() -> None:
    # high=1: every first guess is right, so the episode is over when the checker pickles it.
    with pytest.raises(EnvContractError, match="determinism"):  # every seed gives the same task
        check_env(GuessEnv(high=1))
    report = check_env(GuessEnv(high=1), seeds=(0, 1))
    assert "pickle_roundtrip" in report.checks


def test_wall_clock_statistics_do_not_count_as_nondeterminism() -> None:
    import gymnasium as gym

    env = gym.wrappers.RecordEpisodeStatistics(gym.make("envgymtest/GuessEnv-v0"))
    assert "seeded_determinism" in check_env(env).checks


def test_named_checks_run_on_their_own() -> None:
    env, report = GuessEnv(max_turns=3), CheckReport("guess")
    check_step_before_reset(GuessEnv, "guess", report)
    check_reset_info(env, "guess", 0, report)
    check_bad_inputs(env, "guess", 0, report)
    check_truncation(env, "guess", 0, report)
    check_pickle(env, "guess", 1, report)
    assert report.checks == ["step_before_reset", "reset_info", "bad_input_fuzz", "max_turns", "pickle_roundtrip"]
    with pytest.raises(EnvContractError, match=r"\[fuzz\]"):
        check_bad_inputs(RaisingEnv(), "raising", 0, CheckReport("raising"))


class _CountedGuess(GuessEnv):
    """GuessEnv that counts the live instances (an env holding a browser or a sandbox would leak it)."""

    live: set[int] = set()  # noqa: RUF012 - shared on purpose: every instance the checker makes

    def reset(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        _CountedGuess.live.add(id(self))
        return super().reset(*args, **kwargs)

    def close(self) -> None:
        _CountedGuess.live.discard(id(self))
        super().close()


def test_the_checker_closes_every_environment_it_makes() -> None:
    register(EnvSpec(id="envgymtest/CountedGuess-v0", entry_point=f"{__name__}:_CountedGuess", family="test"))
    _CountedGuess.live.clear()
    check_env("envgymtest/CountedGuess-v0")
    assert _CountedGuess.live == set()  # the twins of the determinism check included
