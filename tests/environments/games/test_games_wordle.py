"""Wordle: word lists, feedback rules, hard mode, rewards, splits, solver win rates."""

from __future__ import annotations

import random
import zlib
from importlib import resources

import pytest

import envgym
from envgym.agents.oracle import OracleAgent
from envgym.agents.solvers.wordle import Solver, parse_history, pattern_code
from envgym.environments.games.wordle import (
    GREEN_REWARD,
    WordleEnv,
    allowed_words,
    answer_words,
    feedback,
    split_answers,
)
from envgym.errors import ConfigError, InvalidKwargsError
from envgym.rollout import run_episodes
from envgym.testing import check_env

IDS = ["envgym/Wordle-v0", "envgym/Wordle-Easy-v0", "envgym/Wordle-Medium-v0", "envgym/Wordle-Hard-v0"]


def make(env_id: str = "envgym/Wordle-v0", **kwargs):
    return envgym.make(env_id, **kwargs)


# ------------------------------------------------------------------ contract
@pytest.mark.parametrize("env_id", IDS)
def test_contract(env_id: str) -> None:
    report = check_env(env_id)
    assert {"seeded_determinism", "bad_input_fuzz", "max_turns"} <= set(report.checks)


# ------------------------------------------------------------------ word lists
def test_word_lists_are_clean_and_nested() -> None:
    answers, allowed = answer_words(), allowed_words()
    assert 1500 <= len(answers) <= 2100
    assert len(allowed) > 3 * len(answers)
    for words in (answers, allowed):
        assert list(words) == sorted(set(words))
        assert all(len(w) == 5 and w.isascii() and w.isalpha() and w.islower() for w in words)
    assert set(answers) <= set(allowed)
    # Common words are answers; inflections and vulgar words are not (but may still be guessed).
    assert {"crane", "abbey", "apple", "house", "chest", "thing"} <= set(answers)
    assert not {"books", "baked", "going", "nicer", "bitch"} & set(answers)
    assert {"books", "baked"} <= set(allowed)


def test_word_list_source_and_licence_are_stated() -> None:
    readme = resources.files("envgym.environments.games").joinpath("data", "README.md").read_text(encoding="utf-8")
    assert "SCOWL" in readme and "Kevin Atkinson" in readme and "Permission to use" in readme
    assert "2020.12.07" in readme  # the exact Debian package version the lists were made from


def test_splits_partition_the_answers() -> None:
    train, test = set(split_answers("train")), set(split_answers("test"))
    assert not train & test
    assert train | test == set(answer_words())
    assert 0.1 < len(test) / len(answer_words()) < 0.3
    assert all(zlib.crc32(w.encode()) % 5 == 0 for w in test)
    for split, pool in (("train", train), ("test", test)):
        env = WordleEnv(split=split)
        for seed in range(40):
            env.reset(seed=seed)
            assert env._answer in pool


# ------------------------------------------------------------------ feedback
@pytest.mark.parametrize(
    ("guess", "answer", "marks"),
    [
        ("babes", "abbey", "YYGG_"),  # two Bs: one green, one yellow; S absent
        ("abbey", "babes", "YYGG_"),
        ("keeps", "abbey", "_Y___"),  # answer has one E: only the first guessed E is yellow
        ("eerie", "crane", "__Y_G"),  # the green E takes the only copy: earlier Es are grey
        ("speed", "abide", "__Y_Y"),
        ("crane", "crane", "GGGGG"),
        ("llama", "hello", "YY___"),  # two Ls in both, none in place
        ("mamma", "maxim", "GGY__"),
        ("geese", "eerie", "_GY_G"),
    ],
)
def test_feedback_with_repeated_letters(guess: str, answer: str, marks: str) -> None:
    assert feedback(guess, answer) == marks


def test_feedback_agrees_with_a_counting_definition() -> None:
    # Independent definition: a letter's G+Y marks never exceed its count in the answer, greens
    # are exact matches, and yellows go left to right.
    rng = random.Random(3)
    words = answer_words()
    for _ in range(3000):
        guess, answer = rng.choice(words), rng.choice(words)
        marks = feedback(guess, answer)
        for letter in set(guess):
            marked = sum(1 for g, m in zip(guess, marks, strict=True) if g == letter and m != "_")
            assert marked == min(guess.count(letter), answer.count(letter))
        for i in range(5):
            assert (marks[i] == "G") == (guess[i] == answer[i])


def test_observation_shows_marks_history_and_known_letters() -> None:
    env = make()
    obs, _ = env.reset(seed=0, options={"answer": "abbey"})
    assert "five-letter" in obs and "G = right letter" in obs and "No guesses yet." in obs
    obs, reward, terminated, truncated, info = env.step("BABES")
    assert obs.startswith("BABES -> Y Y G G _:")
    assert "1. BABES -> Y Y G G _" in obs
    assert "Pattern: _ _ B E _" in obs
    assert "In the word, spot unknown: A" in obs
    assert "Not in the word: S" in obs
    assert (terminated, truncated, info["action_valid"]) == (False, False, True)
    assert reward == pytest.approx(2 * GREEN_REWARD)
    assert info["progress"] == pytest.approx(0.4)
    # A letter guessed twice with one copy in the answer is not "absent".
    env.reset(seed=0, options={"answer": "abbey"})
    obs, *_ = env.step("keeps")
    assert "Not in the word: K P S" in obs
    assert "no further copies of E" in obs


# ------------------------------------------------------------------ actions
def test_invalid_guesses_keep_the_state() -> None:
    env = make(max_turns=50)
    env.reset(seed=1, options={"answer": "crane"})
    env.step("slate")
    before = env.unwrapped._observe()
    for bad, needle in [
        ("cat", "five-letter"),
        ("cranes", "five-letter"),
        ("cr4ne", "five-letter"),
        ("xqzvw", "not in the word list"),
        ("SLATE", "already guessed"),
        ("", "five-letter"),
    ]:
        obs, reward, terminated, _, info = env.step(bad)
        assert not info["action_valid"], bad
        assert needle in obs, (bad, obs)
        assert reward == pytest.approx(-0.1)
        assert not terminated
        assert env.unwrapped._observe() == before
    assert len(env.unwrapped._guesses) == 1


@pytest.mark.parametrize("text", ["crane", "CRANE", " Crane ", "guess crane", "guess: CRANE", "<action>crane</action>"])
def test_accepted_spellings(text: str) -> None:
    env = make()
    env.reset(seed=2, options={"answer": "crane"})
    *_, terminated, _, info = env.step(text)
    assert info["action_valid"] and info["success"] and terminated


def test_the_word_guess_is_a_guess() -> None:
    env = make()
    env.reset(seed=2, options={"answer": "crane"})
    *_, info = env.step("guess")
    assert info["action_valid"]


def test_hard_mode_rejects_guesses_that_drop_hints() -> None:
    env = make("envgym/Wordle-Hard-v0")
    env.reset(seed=0, options={"answer": "crane"})
    obs, *_ = env.step("trace")
    assert "TRACE -> _ G G Y G" in obs
    obs, *_, info = env.step("slate")  # drops the green R
    assert not info["action_valid"] and "hard mode: the 2nd letter must be R" in obs
    obs, *_, info = env.step("brave")  # keeps R, A and E, but not the yellow C
    assert not info["action_valid"] and "must contain C" in obs
    assert len(env.unwrapped._guesses) == 1
    *_, info = env.step("crane")
    assert info["action_valid"] and info["success"]
    # The same guesses are fine outside hard mode.
    easy = make("envgym/Wordle-Medium-v0")
    easy.reset(seed=0, options={"answer": "crane"})
    easy.step("trace")
    *_, info = easy.step("slate")
    assert info["action_valid"]


def test_hard_mode_counts_repeated_hints() -> None:
    env = make("envgym/Wordle-Hard-v0")
    env.reset(seed=0, options={"answer": "abbey"})
    env.step("babes")  # Y Y G G _: two Bs revealed (one green, one yellow), A, E
    obs, *_, info = env.step("bribe")
    assert not info["action_valid"] and "3rd letter must be B" in obs
    obs, *_, info = env.step("ebbed")  # keeps both Bs and E, drops A
    assert not info["action_valid"] and "must contain A" in obs
    obs, *_, info = env.step("label")  # keeps A, E and the green B, but has one B only
    assert not info["action_valid"] and "must contain B 2 times" in obs
    *_, info = env.step("abbey")
    assert info["action_valid"] and info["success"]


def test_sample_action_is_always_valid_including_hard_mode() -> None:
    for env_id in ("envgym/Wordle-Easy-v0", "envgym/Wordle-Hard-v0"):
        env = make(env_id)
        rng = random.Random(0)
        env.reset(seed=0)
        for step in range(600):
            *_, terminated, truncated, info = env.step(env.unwrapped.sample_action(rng))
            assert info["action_valid"], (env_id, step)
            if terminated or truncated:
                env.reset(seed=step)


# ------------------------------------------------------------------ rewards and episode end
def test_rewards_and_failure_after_the_last_guess() -> None:
    env = make("envgym/Wordle-Medium-v0")
    env.reset(seed=0, options={"answer": "crane"})
    total_feedback = 0.0
    for i, word in enumerate(["blimp", "dough", "fuzzy", "wacky", "treat", "grand"]):
        obs, _, terminated, _, info = env.step(word)
        total_feedback += info["reward_components"]["letter_feedback_reward"]
        assert info["reward_components"]["success_reward"] == 0.0
        assert terminated == (i == 5)
    assert info["termination_reason"] == "failure" and not info["success"]
    assert "the word was CRANE" in obs
    # "treat" (_ G Y Y _) turns R green; "grand" (_ G G G _) adds A and N, R being known.
    assert total_feedback == pytest.approx(3 * GREEN_REWARD)


def test_success_reward_and_bounded_shaping() -> None:
    env = make()
    env.reset(seed=0, options={"answer": "crane"})
    _, reward, terminated, _, info = env.step("crane")
    assert terminated and info["success"] and info["termination_reason"] == "success"
    assert info["reward_components"]["success_reward"] == 1.0
    assert info["reward_components"]["letter_feedback_reward"] == pytest.approx(5 * GREEN_REWARD)
    assert reward == pytest.approx(1.1)
    assert info["progress"] == 1.0


def test_task_info_hides_the_answer_and_is_deterministic() -> None:
    env = make()
    obs_a, info_a = env.reset(seed=11)
    answer = env.unwrapped._answer
    assert answer not in str(info_a["task"]).lower() and answer not in obs_a.lower()
    obs_b, info_b = make().reset(seed=11)
    assert (obs_a, info_a["task"]) == (obs_b, info_b["task"])
    answers = set()
    for seed in range(30):
        env.reset(seed=seed)
        answers.add(env.unwrapped._answer)
    assert len(answers) > 20


# ------------------------------------------------------------------ kwargs
def test_kwargs_errors_name_the_valid_options() -> None:
    with pytest.raises(InvalidKwargsError, match=r"difficulty must be one of.*Did you mean 'hard'"):
        WordleEnv(difficulty="hardd")
    with pytest.raises(InvalidKwargsError, match="max_guesses"):
        WordleEnv(max_guesses=0)
    with pytest.raises(InvalidKwargsError, match="hard_mode"):
        WordleEnv(hard_mode="yes")
    with pytest.raises(InvalidKwargsError, match="max_guess"):
        WordleEnv(max_guess=3)
    with pytest.raises(ConfigError, match="options\\['answer'\\]"):
        WordleEnv().reset(seed=0, options={"answer": "zzzzz"})


def test_overrides_change_the_rules() -> None:
    env = WordleEnv(difficulty="easy", max_guesses=3, hard_mode=True)
    _, info = env.reset(seed=0)
    assert info["task"]["max_guesses"] == 3 and info["task"]["hard_mode"] is True
    assert info["task"]["difficulty"] == "max_guesses=3,hard_mode=True"


# ------------------------------------------------------------------ solver
def test_solver_parses_history() -> None:
    obs = "CRANE -> G Y _ _ G: x\n\nGuesses: 2 of 6 used\n1. SLATE -> _ _ Y _ G\n2. CRANE -> G Y _ _ G\n"
    assert parse_history(obs) == [("slate", "__Y_G"), ("crane", "GY__G")]
    assert pattern_code("GGGGG") == 242 and pattern_code("_____") == 0


def test_solver_obeys_hard_mode_and_wins() -> None:
    env = make("envgym/Wordle-Hard-v0")
    for seed in range(20):
        obs, info = env.reset(seed=seed)
        solver = Solver("envgym/Wordle-Hard-v0", seed)
        terminated = False
        while not terminated:
            obs, _, terminated, truncated, info = env.step(solver.act(obs, info))
            assert info["action_valid"], obs
            assert not truncated
        assert info["success"]


@pytest.mark.parametrize("env_id", IDS)
def test_oracle_win_rate(env_id: str) -> None:
    results = run_episodes(env_id, OracleAgent(), episodes=100, seed=500)
    wins = sum(r.success for r in results)
    assert wins >= 95, f"{env_id}: {wins}/100"
    assert sum(r.invalid_actions for r in results) == 0


def test_solver_handles_custom_answers_outside_the_answer_list() -> None:
    env = make("envgym/Wordle-Hard-v0")
    for word in ("books", "baked", "xylem"):
        assert word not in answer_words()
        obs, info = env.reset(seed=0, options={"answer": word})
        solver = Solver("envgym/Wordle-Hard-v0")
        terminated = truncated = False
        while not (terminated or truncated):
            obs, _, terminated, truncated, info = env.step(solver.act(obs, info))
            assert info["action_valid"]
        assert info["success"], word
