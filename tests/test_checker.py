"""envgym.testing.check_env passes good environments and catches broken ones."""

from __future__ import annotations

import random
from typing import Any

import gymnasium
import numpy as np
import pytest
from toy_envs import BrokenInfoEnv, GuessEnv, NondeterministicEnv, RaisingEnv

from envgym import Transition
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


class _DriftsOnRepeatedInvalid(GuessEnv):
    """Breaks the contract on the fourth invalid step in a row: that one changes the state."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.invalid_run = 0

    def reset(self, *args: Any, **kwargs: Any) -> Any:
        self.invalid_run = 0
        return super().reset(*args, **kwargs)

    def _parse(self, text: str) -> int:
        try:
            return super()._parse(text)
        except Exception:
            self.invalid_run += 1
            if self.invalid_run == 4:
                self.last = -1
            raise


def test_fuzz_steps_bad_actions_in_a_row_and_resets_only_when_needed() -> None:
    """The fuzz steps every bad action from the seed's first state, resetting only after a valid step
    or an episode's end: a run of invalid steps with no reset between them still shows a leak."""
    with pytest.raises(EnvContractError, match=r"\[fuzz\].*changed the state"):
        check_bad_inputs(_DriftsOnRepeatedInvalid(max_turns=100), "drift", 0, CheckReport("drift"))
    good = GuessEnv(max_turns=100)
    resets = []
    original = good.reset
    good.reset = lambda *a, **k: resets.append(1) or original(*a, **k)  # type: ignore[method-assign]
    check_bad_inputs(good, "guess", 0, CheckReport("guess"))
    assert len(resets) == 1  # every bad action is invalid here and ends nothing
    short = GuessEnv(max_turns=3)
    resets.clear()
    original = short.reset
    short.reset = lambda *a, **k: resets.append(1) or original(*a, **k)  # type: ignore[method-assign]
    check_bad_inputs(short, "guess", 0, CheckReport("guess"))
    assert len(resets) == -(-len(BAD_ACTIONS) // 3)  # truncated every third invalid step: reset again


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


# ---------------------------------------------------------------------- the roll plays valid actions (issue 37)
class _LeakOnValidSteps(GuessEnv):
    """Non-deterministic only under valid actions: every valid guess reads a counter shared by all
    instances (as a page kept in a browser pool carries state into the next env); its own
    ``sample_action`` proposes text guesses that are never valid, as a sloppy sampler would."""

    shared = [0]  # noqa: RUF012 - shared on purpose: the leak between instances

    def _apply(self, guess: int) -> Transition:
        _LeakOnValidSteps.shared[0] += 1
        return Transition(f"Valid guess number {_LeakOnValidSteps.shared[0]} in this process.")

    def sample_action(self, rng: random.Random) -> str:
        return rng.choice(["guess a number", "maybe 3?", "look"])


def test_the_roll_plays_admissible_actions_and_catches_a_leak_under_valid_actions() -> None:
    # The mutant is only valid on its listed actions; a roll of its sampler's guesses never moves it.
    env = _LeakOnValidSteps(high=20)
    _, info = env.reset(seed=0)
    assert not env.step(env.sample_action(random.Random(0)))[4]["action_valid"]
    assert info["admissible_actions"] == [str(i) for i in range(1, 21)]
    with pytest.raises(EnvContractError, match=r"\[determinism\].*transition 1 differs"):
        check_env(_LeakOnValidSteps(high=20), gymnasium_checks=False, fuzz=False)


def test_the_roll_steps_are_valid_and_counted() -> None:
    report = check_env(GuessEnv(high=20), gymnasium_checks=False, fuzz=False)
    assert report.steps > 0
    assert report.valid_steps == report.steps  # every listed guess is a valid step


class _NeverValid(GuessEnv):
    """Lists no admissible actions and samples only guesses it rejects: a roll of it exercises nothing."""

    def admissible_actions(self) -> None:
        return None

    def sample_action(self, rng: random.Random) -> str:
        return "no idea"


def test_a_roll_without_one_valid_step_fails() -> None:
    with pytest.raises(EnvContractError, match=r"\[determinism\].*none of the \d+ rollout steps was valid"):
        check_env(_NeverValid(high=20, max_turns=5), gymnasium_checks=False, fuzz=False)


class _ListsWhatItRejects(GuessEnv):
    """Lists ``0`` as admissible although it rejects it: the list is the contract's word on validity."""

    def admissible_actions(self) -> list[str]:
        return ["0"]


def test_an_admissible_action_that_steps_as_invalid_fails() -> None:
    with pytest.raises(EnvContractError, match=r"\[determinism\].*'0' was in info\['admissible_actions'\]"):
        check_env(_ListsWhatItRejects(high=20), gymnasium_checks=False, fuzz=False)


class _NumericView(gymnasium.Env):
    """A numeric view (a ``Discrete`` action, a ``Box`` observation, as coopetition's) whose noise
    generator is not pickled: a copy reseeds it from the clock, so it steps differently, but only
    after a valid action (an invalid one changes nothing)."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 - Gymnasium's class attribute

    def __init__(self) -> None:
        self.action_space = gymnasium.spaces.Discrete(4)
        self.observation_space = gymnasium.spaces.Box(-1e6, 1e6, (1,), np.float64)
        self.total = 0.0
        self.noise = np.random.default_rng(0)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.total, self.noise = 0.0, np.random.default_rng(seed)
        return np.array([self.total]), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        if isinstance(action, (int, np.integer)) and self.action_space.contains(action):
            self.total += int(action) + float(self.noise.random())
        return np.array([self.total]), 0.0, False, False, {}

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "noise"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, noise=np.random.default_rng())


def test_the_pickle_check_steps_a_numeric_view_with_sampled_actions() -> None:
    # A text guess ("x") is invalid on a numeric view and so could never show the lost generator.
    with pytest.raises(EnvContractError, match=r"\[pickle\].*stepped differently"):
        check_pickle(_NumericView(), "numeric", 0, CheckReport("numeric"))


def test_rollouts_compare_exactly_without_printing_them() -> None:
    """``same_values``: at least as strict as the ``repr`` comparison it replaced, stricter for
    arrays (their bytes, not their 8 printed digits)."""
    from envgym.testing.common import same_values

    a = np.linspace(0.0, 1.0, 7)
    nudged = a.copy()
    nudged[3] = np.nextafter(nudged[3], 2.0)
    assert repr(a) == repr(nudged) and not same_values(a, nudged)  # repr rounds; bytes do not
    assert same_values(a, a.copy()) and not same_values(a, a.astype(np.float32))
    assert not same_values(a, a.reshape(7, 1)) and not same_values(np.zeros(2), np.array([0.0, -0.0]))
    nan = float("nan")
    transition = ("up", {"obs": [1.0, nan, -0.0], "n": 1, "arr": a}, 0.5, False, False, {"k": (1, "x", None)})
    again = ("up", {"obs": [1.0, nan, -0.0], "n": 1, "arr": a.copy()}, 0.5, False, False, {"k": (1, "x", None)})
    assert same_values(transition, again)
    for changed in (
        ("up", {"obs": [1.0, nan, 0.0], "n": 1, "arr": a}, 0.5, False, False, {"k": (1, "x", None)}),  # -0.0
        ("up", {"obs": [1.0, nan, -0.0], "n": 1.0, "arr": a}, 0.5, False, False, {"k": (1, "x", None)}),  # 1.0
        ("up", {"n": 1, "obs": [1.0, nan, -0.0], "arr": a}, 0.5, False, False, {"k": (1, "x", None)}),  # key order
        ("up", {"obs": [1.0, nan, -0.0], "n": 1, "arr": a}, 0.5, False, False, {"k": [1, "x", None]}),  # list
        ("up", {"obs": [1.0, nan, -0.0], "n": 1, "arr": a}, np.float32(0.5), False, False, {"k": (1, "x", None)}),
    ):
        assert not same_values(transition, changed)
        assert not same_values(changed, transition)
    assert same_values(np.float32(0.5), np.float32(0.5)) and not same_values(np.float32(0.5), np.float64(0.5))
    assert same_values(np.array([{"a": 1}], dtype=object), np.array([{"a": 1}], dtype=object))
    assert not same_values(np.array([{"a": 1}], dtype=object), np.array([{"a": 2}], dtype=object))

    class Cell:  # any other type: by repr, as before
        def __init__(self, value: int) -> None:
            self.value = value

        def __repr__(self) -> str:
            return f"Cell({self.value})"

    assert same_values(Cell(1), Cell(1)) and not same_values(Cell(1), Cell(2))
