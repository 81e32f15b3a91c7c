"""Built-in reward components (wrappers): values, invariants, validation and anti-hacking."""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import pytest
from test_rewards_envs import LineWalk, PlainCorridor, QuizEnv

from envgym import TextEnv
from envgym.contrib.rewards import InfoGainHook, InfoGainQuery, answer_probability, information_gain
from envgym.errors import EnvContractError
from envgym.registration import EnvSpec, register
from envgym.rewards import (
    ApplyRubric,
    FormatReward,
    InvalidActionPenalty,
    Lexicographic,
    MetaReasoningReward,
    NumericMatch,
    OutcomeReward,
    ProgressShaping,
    RubricError,
    StepContext,
    StepCost,
    Term,
    VerifierReward,
    build_rubric,
    component_metrics,
)
from envgym.rollout import RandomAgent, run_episodes
from envgym.testing import BAD_ACTIONS

Policy = Callable[[str, dict[str, Any], random.Random], str]


def play(env: gym.Env[Any, Any], policy: Policy, seed: int, options: dict[str, Any] | None = None):
    """One episode: (return, per-step component dicts, per-step rewards, last info)."""
    rng = random.Random(seed)
    obs, info = env.reset(seed=seed, options=options)
    total, steps, rewards = 0.0, [], []
    while True:
        obs, reward, terminated, truncated, info = env.step(policy(obs, info, rng))
        total += reward
        rewards.append(reward)
        steps.append(dict(info["reward_components"]))
        if terminated or truncated:
            return total, steps, rewards, info


def right(obs: str, info: dict[str, Any], rng: random.Random) -> str:
    return "<action>right</action>"


# ------------------------------------------------------------------------------- invariants
def full_stack(**walk: Any) -> gym.Env[Any, Any]:
    env: gym.Env[Any, Any] = LineWalk(**walk)
    env = ProgressShaping(env, gamma=0.9)
    env = FormatReward(env, tags=("think", "action"))
    env = MetaReasoningReward(env)
    env = StepCost(env, cost=-0.02, name="time_cost_reward")
    return OutcomeReward(env, success=0.5)


def test_components_are_visible_on_reset_and_every_step_and_sum_to_the_reward() -> None:
    env = full_stack(max_turns=15)
    expected = (
        *LineWalk.reward_components,
        "shaping_reward",
        "format_reward",
        "meta_reasoning_reward",
        "time_cost_reward",
        "outcome_reward",
    )
    assert env.reward_components == expected
    _, info = env.reset(seed=0)
    assert list(info["reward_components"]) == list(expected) and set(info["reward_components"].values()) == {0.0}
    rng = random.Random(0)
    for seed in range(5):
        env.reset(seed=seed)
        for _ in range(15):
            action = rng.choice(["<think>go</think><action>right</action>", "left", "", "<action>wait</action>"])
            _, reward, terminated, truncated, info = env.step(action)
            components = info["reward_components"]
            assert list(components) == list(expected)
            # Default wrapper rubrics add each component to the env's sum rubric.
            assert reward == pytest.approx(math.fsum(components.values()), abs=1e-12)
            if terminated or truncated:
                break


def test_apply_rubric_recomputes_the_scalar_from_all_components() -> None:
    spec = {
        "gate": {"component": "format_reward", ">=": 0},
        "then": {"sum": ["success_reward", "shaping_reward"]},
        "else": "format_reward",
    }
    rubric = build_rubric(spec)
    env = ApplyRubric(FormatReward(ProgressShaping(LineWalk(), gamma=1.0)), spec)
    env.reset(seed=1)
    rng = random.Random(3)
    for _ in range(12):
        text = rng.choice(["<action>right</action>", "right", "<action>left</action>", "nonsense"])
        _, reward, terminated, truncated, info = env.step(text)
        context = StepContext(
            action_text=text,
            turn=info["turn"],
            action_valid=info["action_valid"],
            terminated=terminated,
            success=info["success"],
            task=info["task"],
            progress=info.get("progress"),
            truncated=truncated,
        )
        assert reward == rubric(info["reward_components"], context)
        assert reward == env.rubric(info["reward_components"], context)
        if terminated or truncated:
            break


def test_apply_rubric_validates_against_the_whole_stack() -> None:
    with pytest.raises(
        RubricError, match=r"'format_rewrd'.*Did you mean 'format_reward'.*shaping_reward, format_reward"
    ):
        ApplyRubric(FormatReward(ProgressShaping(LineWalk())), {"sum": ["format_rewrd"]})
    with pytest.raises(RubricError, match="expected a rubric"):
        ApplyRubric(LineWalk(), None)  # type: ignore[arg-type]


def test_history_rubrics_work_in_wrappers() -> None:
    dense = ApplyRubric(LineWalk(), {"sum": ["progress_reward", "success_reward"]})
    sparse = ApplyRubric(LineWalk(), {"at_end": {"sum": ["progress_reward", "success_reward"]}})
    policy = lambda obs, info, rng: rng.choice(["right", "right", "left", "wait"])
    for seed in range(4):
        d_total, _, _, d_info = play(dense, policy, seed)
        s_total, _, s_rewards, s_info = play(sparse, policy, seed)
        assert d_info["turn"] == s_info["turn"]
        assert all(r == 0.0 for r in s_rewards[:-1])
        assert s_total == pytest.approx(d_total)


def test_lexicographic_rubric_puts_the_priority_tuple_in_info() -> None:
    env = ApplyRubric(LineWalk(), Lexicographic(["success_reward", Term("progress_reward") + Term("step_cost_reward")]))
    env.reset(seed=0)
    _, reward, _, _, info = env.step("right")
    assert info["reward_priorities"] == (0.0, 1 / env.unwrapped.length)
    assert reward == pytest.approx(1e-3 / env.unwrapped.length)


def test_every_bad_action_is_survived_by_the_full_stack() -> None:
    env = ApplyRubric(full_stack(), {"sum": ["success_reward", {"clip": "shaping_reward", "min": -1}]})
    for action in BAD_ACTIONS:
        env.reset(seed=0)
        _, reward, _, _, info = env.step(action)
        assert math.isfinite(reward) and not info["action_valid"]
        assert all(isinstance(v, float) and math.isfinite(v) for v in info["reward_components"].values())


def make_format_walk(**kwargs: Any) -> gym.Env[Any, Any]:
    """Entry point: a registered env id whose reward stack includes wrappers."""
    return FormatReward(ProgressShaping(LineWalk(**kwargs), gamma=1.0))


def test_components_reach_trajectories_and_metrics() -> None:
    register(EnvSpec(id="envgymtest/RewardsFormatWalk-v0", entry_point=f"{__name__}:make_format_walk", family="test"))
    results = run_episodes("envgymtest/RewardsFormatWalk-v0", RandomAgent(seed=0), episodes=6, seed=0)
    assert len(results) == 6
    for result in results:
        assert {"format_reward", "shaping_reward", "success_reward"} <= set(result.reward_components)
        assert result.total_reward == pytest.approx(math.fsum(result.reward_components.values()))
        # Shaping with gamma=1 telescopes: -Phi(s0) = 0 when terminated, Phi(s_T) when truncated.
        expected = 0.0 if result.success else result.reward_components["progress_reward"]
        assert result.reward_components["shaping_reward"] == pytest.approx(expected)
    metrics = component_metrics([r.reward_components for r in results])
    assert {"rewards/format/mean", "rewards/shaping/mean", "rewards/success/mean"} <= set(metrics)
    assert metrics["rewards/success/mean"] == pytest.approx(sum(r.success for r in results) / 6)


# ------------------------------------------------------------------------- single components
def test_outcome_reward_pays_once_on_any_env() -> None:
    env = OutcomeReward(PlainCorridor(length=3), success=1.0, failure=-1.0)
    total, _, rewards, info = play(env, lambda o, i, r: "right", seed=0)
    assert info["success"] and rewards == [0.0, 0.0, 1.0] and total == 1.0
    total, _, rewards, info = play(env, lambda o, i, r: "left", seed=0)
    assert not info["success"] and total == 0.0  # truncation is not an outcome
    with pytest.raises(RubricError, match="must not exceed success"):
        OutcomeReward(PlainCorridor(), success=0.0, failure=1.0)


class NoInfoEnv(PlainCorridor):
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        obs, _ = super().reset(seed=seed)
        return obs, {}


def test_components_that_need_info_keys_say_so() -> None:
    for wrapper, key in (
        (OutcomeReward, "success"),
        (InvalidActionPenalty, "action_valid"),
        (ProgressShaping, "progress"),
    ):
        with pytest.raises(RubricError, match=key):
            wrapper(NoInfoEnv()).reset(seed=0)


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("<think>plan</think><action>up</action>", True),
        ("  <think>plan</think>\n<action>up</action>\n", True),
        ("<THINK>plan</THINK><Action>up</Action>", True),
        ("<action>up</action><think>plan</think>", False),  # order
        ("<think>plan</think>", False),  # missing action
        ("<think>plan</think><action>up</action><action>down</action>", False),  # repeated
        ("<think></think><action>up</action>", False),  # empty block
        ("<think>plan<action>up</action></think>", False),  # nested
        ("<think>plan</think><action>up", False),  # unclosed
        ("Sure! <think>plan</think><action>up</action>", False),  # text outside
        ("</think><think>a</think><action>up</action>", False),  # stray closing tag
        ("", False),
    ],
)
def test_format_reward_rules(text: str, ok: bool) -> None:
    env = FormatReward(LineWalk(), tags=("think", "action"))
    assert env.well_formed(text) is ok
    env.reset(seed=0)
    assert env.step(text)[4]["reward_components"]["format_reward"] == (0.0 if ok else -0.1)


def test_format_reward_options_and_bad_arguments() -> None:
    loose = FormatReward(LineWalk(), tags=("think", "action"), ordered=False, allow_outside_text=True)
    assert loose.well_formed("Sure: <action>up</action> <think>x</think>")
    assert not loose.well_formed(None)
    for kwargs in ({"tags": "action"}, {"tags": ("a", "A")}, {"tags": ()}, {"invalid": 1.0}, {"valid": math.nan}):
        with pytest.raises(RubricError):
            FormatReward(LineWalk(), **kwargs)


def test_invalid_action_penalty_and_step_cost_on_any_env() -> None:
    env = StepCost(InvalidActionPenalty(PlainCorridor(length=2), penalty=-0.5), cost=-0.01)
    total, steps, _, _ = play(env, lambda o, i, r: "jump", seed=0)
    assert all(s["invalid_action_reward"] == -0.5 and s["step_cost_reward"] == -0.01 for s in steps)
    assert total == pytest.approx(-0.51 * len(steps))
    with pytest.raises(RubricError, match="already emits 'invalid_action_reward'"):
        InvalidActionPenalty(LineWalk())
    assert InvalidActionPenalty(LineWalk(), name="harsh_invalid_reward").reward_components[-1] == "harsh_invalid_reward"
    with pytest.raises(RubricError, match="<= 0"):
        InvalidActionPenalty(PlainCorridor(), penalty=0.1)
    with pytest.raises(RubricError, match="<= 0"):
        StepCost(PlainCorridor(), cost=0.1)
    with pytest.raises(RubricError, match="component name"):
        StepCost(PlainCorridor(), name="bad name!")


# ---------------------------------------------------------------------------------- shaping
def random_walker(obs: str, info: dict[str, Any], rng: random.Random) -> str:
    return rng.choice(["right", "right", "left", "wait", "jump"])


@pytest.mark.parametrize("gamma", [1.0, 0.9, 0.5])
def test_shaping_telescopes_over_every_episode(gamma: float) -> None:
    env = ProgressShaping(LineWalk(max_turns=25), gamma=gamma, scale=2.0)
    checked = {"terminated": 0, "truncated": 0}
    for seed in range(40):
        start = seed % 3
        _, steps, _, info = play(env, random_walker, seed, options={"start": start})
        length = env.unwrapped.length
        phi0 = 2.0 * start / length
        discounted = math.fsum(gamma**t * s["shaping_reward"] for t, s in enumerate(steps))
        if info["termination_reason"] == "success":
            checked["terminated"] += 1
            assert discounted == pytest.approx(-phi0, abs=1e-12)
        else:
            checked["truncated"] += 1
            assert discounted == pytest.approx(gamma ** len(steps) * 2.0 * info["progress"] - phi0, abs=1e-12)
    assert min(checked.values()) > 0


def test_shaping_is_policy_invariant_and_cycles_earn_nothing() -> None:
    gamma = 0.95
    env = ProgressShaping(LineWalk(max_turns=30), gamma=gamma)
    direct = play(env, right, 7, options={"start": 1})
    detour_moves = iter(["right", "left", "wait", "right", "left", "right"] + ["right"] * 20)
    detour = play(env, lambda o, i, r: next(detour_moves), 7, options={"start": 1})
    for _, steps, _, _ in (direct, detour):
        assert math.fsum(gamma**t * s["shaping_reward"] for t, s in enumerate(steps)) == pytest.approx(
            -1 / env.unwrapped.length
        )
    cycle = iter(["right", "left"] * 15)
    _, steps, _, _ = play(env, lambda o, i, r: next(cycle), 7)
    assert math.fsum(s["shaping_reward"] for s in steps) <= 1e-12


class NoProgressWalk(LineWalk):
    progress = TextEnv.progress  # type: ignore[assignment]


class BadProgressWalk(LineWalk):
    def progress(self) -> float:
        return 2.0


def test_shaping_needs_a_valid_progress() -> None:
    with pytest.raises(RubricError, match="does not implement"):
        ProgressShaping(NoProgressWalk())
    with pytest.raises(EnvContractError, match="expected a number in \\[0, 1\\]"):
        ProgressShaping(BadProgressWalk()).reset(seed=0)
    for gamma in (0.0, 1.5, math.nan):
        with pytest.raises(RubricError, match="gamma"):
            ProgressShaping(LineWalk(), gamma=gamma)


# --------------------------------------------------------------------------- meta-reasoning
def test_meta_reasoning_rules() -> None:
    env = MetaReasoningReward(LineWalk(max_turns=20), plan=0.1, explore=0.05, reflect=0.07, max_total=1.0)
    env.reset(seed=0)
    length = env.unwrapped.length

    def pay(text: str) -> float:
        return env.step(text)[4]["reward_components"]["meta_reasoning_reward"]

    assert pay("<explore>try waiting</explore><action>wait</action>") == 0.05  # novel action
    assert pay("<explore>wait again</explore><action>wait</action>") == 0.0  # repeated action
    assert pay("<action>wait</action><explore>after the action</explore>") == 0.0  # not followed by the action
    assert pay("<explore>try waiting</explore><action>right</action>") == 0.0  # repeated segment text
    assert pay(f"<plan>Reach cell {length} by walking right.</plan><action>right</action>") == 0.0  # goal echo
    assert pay("<explore>jumping</explore><action>jump</action>") == 0.0  # invalid action
    assert pay("<reflect>jumping is not allowed, go back</reflect><action>left</action>") == 0.07  # fixes the error
    assert pay("<reflect>all good</reflect><action>wait</action>") == 0.0  # nothing to fix
    assert pay("<plan>go right to the end</plan><action>right</action>") == 0.0  # paid at success
    paid = 0.0
    for _ in range(length):
        _, _, terminated, _, info = env.step("<action>right</action>")
        paid += info["reward_components"]["meta_reasoning_reward"]
        if terminated:
            break
    assert info["success"] and paid == pytest.approx(0.1)  # one counted plan, paid on success


def test_meta_reasoning_cap_and_novelty_by_state() -> None:
    env = MetaReasoningReward(LineWalk(max_turns=30), explore=0.3, max_total=0.5, novelty="state")
    env.reset(seed=1)
    total = 0.0
    for t in range(6):
        move = "right" if t % 2 == 0 else "left"
        total += env.step(f"<explore>idea {t}</explore><action>{move}</action>")[4]["reward_components"][
            "meta_reasoning_reward"
        ]
    assert total == pytest.approx(0.3)  # cells 1 then back to 0 (seen at reset): one new state
    for kwargs in ({"plan": -0.1}, {"max_total": -1}, {"tags": ("plan", "explore")}, {"novelty": "states"}):
        with pytest.raises(RubricError):
            MetaReasoningReward(LineWalk(), **kwargs)


# ---------------------------------------------------------------------------- info gain
def progress_scorer(query: InfoGainQuery) -> float:
    """A deterministic stand-in for a model: belief grows with the cells reached; fooled by goal echo."""
    if not query.turns:
        return 0.1
    action, obs = query.turns[-1]
    if query.task.get("goal", "?") in action:
        return 0.95
    if obs.startswith("You reached"):
        return 0.9
    cell, length = map(int, re.search(r"Cell (\d+) of (\d+)", obs).groups())  # type: ignore[union-attr]
    return 0.1 + 0.8 * cell / length


def test_info_gain_telescopes_and_skips_the_final_turn() -> None:
    for final_turn in ("outcome", "gain"):
        env = InfoGainHook(LineWalk(max_turns=20), scorer=progress_scorer, final_turn=final_turn)
        _, steps, _, info = play(env, lambda o, i, r: r.choice(["right", "right", "left"]), seed=3)
        gains = [s["info_gain_reward"] for s in steps]
        p = [progress_scorer(InfoGainQuery(info["task"], env.turns[:t])) for t in range(len(steps) + 1)]
        if final_turn == "outcome" and info["success"]:
            assert gains[-1] == 0.0 and math.fsum(gains) == pytest.approx(p[-2] - p[0])
        else:
            assert math.fsum(gains) == pytest.approx(p[-1] - p[0])
        assert gains[:-1] == pytest.approx(information_gain(p)[: len(gains) - 1])


def test_info_gain_hook_without_and_with_a_late_scorer() -> None:
    env = InfoGainHook(LineWalk())
    env.reset(seed=0)
    assert env.step("right")[4]["reward_components"]["info_gain_reward"] == 0.0
    env.set_scorer(progress_scorer)
    gain = env.step("right")[4]["reward_components"]["info_gain_reward"]
    assert gain == pytest.approx(0.8 / env.unwrapped.length)
    env.set_scorer(lambda q: 1.5)
    with pytest.raises(RubricError, match="probability in \\[0, 1\\]"):
        env.step("wait")


def test_information_gain_helpers() -> None:
    assert information_gain([0.1, 0.4, 0.3, 0.9]) == pytest.approx([0.3, -0.1, 0.6])
    assert answer_probability([math.log(0.5), math.log(0.5)]) == pytest.approx(0.5)
    with pytest.raises(RubricError):
        information_gain([0.2, 1.2])
    with pytest.raises(RubricError):
        answer_probability([])


# ------------------------------------------------------------------------------- verifier
def test_verifier_reward_scores_the_final_answer() -> None:
    env = VerifierReward(QuizEnv(), NumericMatch())
    _, info = env.reset(seed=2)
    answer = info["task"]["answer"]
    _, _, _, _, info = env.step("hint")
    assert info["reward_components"]["verifier_reward"] == 0.0 and "verification" not in info
    _, reward, terminated, _, info = env.step(f"<action>answer {answer}</action>")
    assert terminated and info["reward_components"]["verifier_reward"] == 1.0 and reward == 2.0
    assert info["verification"]["status"] == "passed"
    with pytest.raises(RubricError, match="no 'solution' key.*Did you mean|no 'solution' key"):
        VerifierReward(QuizEnv(), NumericMatch(), reference="solution").reset(seed=0)


# --------------------------------------------------------------------------- anti-hacking
def tagged(text: str) -> str:
    return f"<action>{text}</action>"


def spam_tags(obs: str, info: dict[str, Any], rng: random.Random) -> str:
    t = info["turn"]
    return (
        f"<plan>plan {t}</plan><explore>idea {t}</explore><reflect>lesson {t}</reflect>"
        f"<think>hmm</think><action>{rng.choice(['wait', 'left', 'hint'])}</action><action>wait</action>"
    )


def spam_tags_valid(obs: str, info: dict[str, Any], rng: random.Random) -> str:
    t = info["turn"]
    return f"<plan>plan {t}</plan><explore>idea {t}</explore><reflect>lesson {t}</reflect>{tagged('wait')}"


def empty(obs: str, info: dict[str, Any], rng: random.Random) -> str:
    return ""


def repeat_wait(obs: str, info: dict[str, Any], rng: random.Random) -> str:
    return tagged("wait")


def echo_goal(obs: str, info: dict[str, Any], rng: random.Random) -> str:
    goal = info["task"]["goal"]
    return f"<plan>{goal}</plan>{tagged(goal)}" if info["turn"] % 2 else goal


def echo_goal_valid(obs: str, info: dict[str, Any], rng: random.Random) -> str:
    return f"{info['task']['goal']} <explore>{info['task']['goal']}</explore>{tagged('wait')}"


def explore_spam(obs: str, info: dict[str, Any], rng: random.Random) -> str:
    t = info["turn"]
    return f"<plan>plan {t}</plan><explore>idea {t}</explore>{tagged(['wait', 'right', 'left'][t % 3])}"


def oscillate(obs: str, info: dict[str, Any], rng: random.Random) -> str:
    return tagged("right" if info["turn"] % 2 == 0 else "left")


def alternate_error(obs: str, info: dict[str, Any], rng: random.Random) -> str:
    t = info["turn"]
    return (
        "jump"
        if t % 2 == 0
        else f"<reflect>that failed {t}</reflect>{tagged('wait' if t % 4 == 1 else 'right' if t < 2 else 'left')}"
    )


ADVERSARIES: dict[str, Policy] = {
    "spam_tags": spam_tags,
    "spam_tags_valid": spam_tags_valid,
    "empty": empty,
    "repeat": repeat_wait,
    "echo_goal": echo_goal,
    "echo_goal_valid": echo_goal_valid,
    "explore_spam": explore_spam,
    "oscillate": oscillate,
    "alternate_error": alternate_error,
}


def optimum_meta(obs: str, info: dict[str, Any], rng: random.Random) -> str:
    return "<plan>keep walking right</plan>" + tagged("right") if info["turn"] == 0 else tagged("right")


def quiz_optimum(obs: str, info: dict[str, Any], rng: random.Random) -> str:
    return tagged(f"answer {info['task']['answer']}")


def quiz_number_spam(obs: str, info: dict[str, Any], rng: random.Random) -> str:
    return "answer " + " ".join(str(n) for n in range(1, 101))


def quiz_guess(obs: str, info: dict[str, Any], rng: random.Random) -> str:
    return tagged("answer 0")


def quiz_hint_then_echo(obs: str, info: dict[str, Any], rng: random.Random) -> str:
    return "hint" if info["turn"] < 3 else f"answer {info['task']['goal']}"


WALK = {"max_turns": 30}
COMPONENT_CASES: dict[str, tuple[Callable[[], gym.Env[Any, Any]], Policy, dict[str, Policy]]] = {
    "outcome": (lambda: OutcomeReward(LineWalk(**WALK)), right, ADVERSARIES),
    "format": (lambda: FormatReward(LineWalk(**WALK), tags=("action",)), right, ADVERSARIES),
    "invalid_action": (lambda: InvalidActionPenalty(LineWalk(**WALK), name="extra_invalid_reward"), right, ADVERSARIES),
    "step_cost": (lambda: StepCost(LineWalk(**WALK), cost=-0.02, name="time_cost_reward"), right, ADVERSARIES),
    "shaping": (lambda: ProgressShaping(LineWalk(**WALK), gamma=0.99, scale=3.0), right, ADVERSARIES),
    "meta_reasoning": (lambda: MetaReasoningReward(LineWalk(**WALK)), optimum_meta, ADVERSARIES),
    "meta_reasoning_by_state": (
        lambda: MetaReasoningReward(LineWalk(**WALK), novelty="state"),
        optimum_meta,
        ADVERSARIES,
    ),
    "info_gain": (lambda: InfoGainHook(LineWalk(**WALK), scorer=progress_scorer), right, ADVERSARIES),
    "verifier": (
        lambda: VerifierReward(QuizEnv(), NumericMatch()),
        quiz_optimum,
        {
            "empty": empty,
            "repeat_hint": lambda o, i, r: "hint",
            "echo_goal": quiz_hint_then_echo,
            "number_spam": quiz_number_spam,
            "guess": quiz_guess,
            "spam_tags": spam_tags,
        },
    ),
}


def best_adversary(
    make_env: Callable[[], gym.Env[Any, Any]], optimum: Policy, adversaries: dict[str, Policy], seed: int
):
    env = make_env()
    best_return = play(env, optimum, seed)[0]
    worst = max(((play(env, policy, seed)[0], name) for name, policy in adversaries.items()))
    return best_return, worst


@pytest.mark.parametrize("component", list(COMPONENT_CASES))
def test_adversarial_policies_cannot_beat_the_intended_optimum(component: str) -> None:
    make_env, optimum, adversaries = COMPONENT_CASES[component]
    for seed in range(4):
        best, (adversary_return, name) = best_adversary(make_env, optimum, adversaries, seed)
        assert adversary_return < best, f"{component}: adversary {name!r} earned {adversary_return} >= optimum {best}"


def test_the_anti_hacking_check_catches_a_farmable_component() -> None:
    """Negative control: a positive per-step format bonus *can* be farmed by stalling."""

    def farmable() -> gym.Env[Any, Any]:
        return FormatReward(LineWalk(**WALK), tags=("action",), valid=0.3, invalid=0.0)

    best, (adversary_return, name) = best_adversary(farmable, right, ADVERSARIES, seed=0)
    assert adversary_return > best and name in ("repeat", "spam_tags_valid", "oscillate")
