"""Tools-Search: the generated encyclopedia, its questions and splits, the BM25 search over it,
the tool calls, the rewards, the oracle's success and the random baseline."""

from __future__ import annotations

import json
import pickle
import random
from pathlib import Path

import pytest
from envgym.agents.solvers.tools_search import Solver, parse_question
from envgym.environments.tools.encyclopedia import (
    KINDS,
    RELATIONS,
    TEMPLATES,
    Encyclopedia,
    f1_score,
    normalize_answer,
)
from envgym.environments.tools.search import EFFICIENCY_MAX, SearchEnv, search_latency

from envgym.errors import InvalidKwargsError
from envgym.testing import check_env

ARTICLES = 2000


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tools-search")


@pytest.fixture(scope="module")
def world() -> Encyclopedia:
    return Encyclopedia(ARTICLES, 0)


def _env(cache: Path, **kwargs: object) -> SearchEnv:
    return SearchEnv(articles=ARTICLES, cache_dir=str(cache), **kwargs)


def _call(name: str, **arguments: object) -> str:
    return json.dumps({"name": name, "arguments": arguments})


# ------------------------------------------------------------------ the encyclopedia
def test_the_encyclopedia_is_a_pure_function_of_its_arguments(world: Encyclopedia) -> None:
    again = Encyclopedia(ARTICLES, 0)
    other = Encyclopedia(ARTICLES, 1)
    assert len(world) == ARTICLES
    assert [world.article(i) for i in range(0, ARTICLES, 37)] == [again.article(i) for i in range(0, ARTICLES, 37)]
    assert world.fingerprint == again.fingerprint != other.fingerprint
    assert [world.title(i) for i in range(50)] != [other.title(i) for i in range(50)]
    assert len({t.lower() for t in (world.title(i) for i in range(len(world)))}) == ARTICLES  # titles are unique
    assert {k for k in KINDS if world.by_kind[k]} == set(KINDS)


def test_relations_are_consistent_and_stated_in_the_articles(world: Encyclopedia) -> None:
    for e in world.entities:
        for name, target in e.relations.items():
            assert RELATIONS[name].source == e.kind and world.entities[target].kind == RELATIONS[name].target
            assert world.title(target) in world.article(e.index)  # an article names its relations by title
        if e.kind == "country":  # a capital lies in its own country
            assert world.entities[e.relations["capital"]].relations["country"] == e.index
    assert world.find("  " + world.title(5).upper() + " ") == 5
    assert world.find("No Such Article") is None
    with pytest.raises(ValueError, match="at least 100"):
        Encyclopedia(99)


def test_questions_follow_their_chain_and_have_two_to_four_hops(world: Encyclopedia) -> None:
    assert {t[3] for t in TEMPLATES} == {2, 3, 4}
    rng = random.Random(0)
    seen_hops = set()
    for _ in range(300):
        q = world.question(rng)
        seen_hops.add(q.hops)
        assert q.hops == len(q.relations) + (0 if q.asked == "name" else 1)
        for (a, b), name in zip(zip(q.chain, q.chain[1:]), q.relations):
            assert world.entities[a].relations[name] == b
        last = world.entities[q.chain[-1]]
        assert q.answer == (last.title if q.asked == "name" else last.facts[q.asked])
        assert q.answer in (world.title(q.chain[-1]) + " " + world.article(q.chain[-1]))
        assert parse_question(q.text) == (world.title(q.chain[0]), list(q.relations), q.asked)
    assert seen_hops == {2, 3, 4}
    assert {world.question(rng, hops=3).hops for _ in range(20)} == {3}


def test_the_splits_share_no_question_chain(world: Encyclopedia) -> None:
    rng = random.Random(1)
    train = {world.question(rng, split="train").key for _ in range(400)}
    test = {world.question(rng, split="test").key for _ in range(400)}
    assert train and test and not train & test
    drawn = [world.question(rng).split for _ in range(1000)]
    assert 0.12 < drawn.count("test") / len(drawn) < 0.28  # one chain in five


def test_answer_normalisation_and_token_f1() -> None:
    assert normalize_answer("  The Tarvo-X3!  ") == "tarvox3"
    assert normalize_answer("2,817,786") == normalize_answer("2817786")
    assert f1_score("Varnex Motors", "Varnex Motors") == 1.0
    assert f1_score("Varnex", "Varnex Motors") == pytest.approx(2 * 1.0 * 0.5 / 1.5)
    assert f1_score("Motors of Varnex", "Varnex Motors") == pytest.approx(2 * (2 / 3) * 1.0 / (2 / 3 + 1.0))
    assert f1_score("", "x") == 0.0 and f1_score("the", "a") == 1.0


# ------------------------------------------------------------------ search
def test_a_title_searched_comes_first_and_ranks_as_fts5(cache: Path) -> None:
    env = _env(cache)
    rng = random.Random(2)
    titles = [env.world.title(rng.randrange(ARTICLES)) for _ in range(40)]
    first = sum(env.index.search(t, 5)[0] == env.world.find(t) for t in titles)
    assert first >= 36  # a name shared with a mention can lose the first place now and then
    for t in titles[:10]:
        assert env.index.search(t, 5) == env.index.search_fts5(t, 5)  # WebShop's BM25 machinery, as FTS5 ranks


def test_search_latency_reports_percentiles(tmp_path: Path) -> None:
    figures = search_latency(500, queries=20, cache_dir=tmp_path)
    assert figures["articles"] == 500
    assert 0 < figures["search_p50_ms"] <= figures["search_p99_ms"] < 1000


# ------------------------------------------------------------------ the env
def test_tools_are_listed_and_calls_validated(cache: Path) -> None:
    env = _env(cache)
    obs, info = env.reset(seed=0)
    assert [t["function"]["name"] for t in info["tools"]] == ["search", "open", "answer"]
    assert info["tools"][0]["function"]["parameters"]["required"] == ["query"]
    assert info["parallel_tool_calls"] is False and "Question: " in obs
    assert "answer" not in info["task"] or info["task"].get("answer") is None  # the gold answer is not shown
    obs, reward, terminated, _, info = env.step(_call("search"))
    assert not info["action_valid"] and not terminated and reward == pytest.approx(-0.1)
    assert "Tool error (search): arguments: missing required argument(s) ['query']" in obs
    obs, *_, info = env.step('{"name": "browse", "arguments": {}}')
    assert not info["action_valid"] and "unknown tool 'browse'" in obs
    title = env.world.title(env.question.chain[0])
    obs, *_, info = env.step(_call("open", title=title[:-1] + "Q"))
    assert not info["action_valid"] and "Closest titles" in obs
    obs, *_, info = env.step(f"<action>{_call('open', title=title.lower())}</action>")
    assert info["action_valid"] and obs.startswith(f"Tool result (open): {title}\n")
    obs, *_, info = env.step(_call("open", title="The  " + title))  # as a question may write it
    assert info["action_valid"] and obs.startswith(f"Tool result (open): {title}\n")
    assert info["turn"] == 5 and info["invalid_actions"] == 3


def test_an_exact_answer_earns_the_efficiency_bonus_only_when_right(cache: Path) -> None:
    env = _env(cache)
    env.reset(seed=5)
    q = env.question
    for i in q.chain[:2]:
        env.step(_call("open", title=env.world.title(i)))
    *_, reward, terminated, _, info = env.step(_call("answer", text=f"the {q.answer.upper()}."))
    parts = info["reward_components"]
    assert terminated and info["success"] and parts["exact_match_reward"] == 1.0 and parts["f1_reward"] == 1.0
    assert parts["efficiency_reward"] == pytest.approx(EFFICIENCY_MAX * min(1.0, q.hops / 2))
    assert reward == pytest.approx(1.0 + parts["efficiency_reward"])
    env.reset(seed=5)
    for _ in range(q.hops * 2):
        env.step(_call("search", query=env.world.title(q.chain[0])))
    *_, info = env.step(_call("answer", text=q.answer))
    assert info["reward_components"]["efficiency_reward"] == pytest.approx(EFFICIENCY_MAX / 2)
    env.reset(seed=5)
    *_, reward, terminated, _, info = env.step(_call("answer", text=q.answer + " and more words"))
    assert terminated and not info["success"] and reward == 0.0  # F1 is diagnostic: weight 0
    assert 0 < info["reward_components"]["f1_reward"] < 1 and info["reward_components"]["efficiency_reward"] == 0
    assert info["reward_basis"] == [
        "exact_match_reward",
        "efficiency_reward",
        "invalid_action_reward",
        "step_cost_reward",
    ]


def test_the_env_keeps_the_contract_and_pickles_mid_episode(cache: Path) -> None:
    report = check_env(_env(cache), seeds=(0, 1, 2), steps=12)
    assert "pickle_roundtrip" in report.checks and report.valid_steps == report.steps
    env = _env(cache)
    env.reset(seed=3)
    env.step(_call("search", query="river"))
    clone = pickle.loads(pickle.dumps(env))
    assert clone.world is env.world  # the shared encyclopedia is found again, not copied
    action = _call("open", title=env.world.title(env.question.chain[0]))
    assert clone.step(action)[0] == env.step(action)[0]
    with pytest.raises(InvalidKwargsError, match="hops must be"):
        _env(cache, hops=5)
    with pytest.raises(InvalidKwargsError, match="articles must be"):
        SearchEnv(articles=10)


@pytest.mark.parametrize("split", ["train", "test"])
def test_the_oracle_solves_every_question_by_searching(cache: Path, split: str) -> None:
    env = _env(cache, split=split)
    solved = calls = 0
    seeds = range(100)
    for seed in seeds:
        obs, info = env.reset(seed=seed)
        assert info["task"]["split"] == split and env.question.split == split
        policy = Solver("envgym/Tools-Search-v0", seed)
        done = False
        while not done:
            action = policy.act(obs, info)
            calls += json.loads(action)["name"] == "search"
            obs, reward, terminated, truncated, info = env.step(action)
            assert info["action_valid"], obs
            done = terminated or truncated
        solved += info["success"]
        assert reward == pytest.approx(1.0 + EFFICIENCY_MAX)  # right, in as many calls as hops
    assert solved == len(seeds)
    assert calls == len(seeds)  # one search each: the start entity is found by searching


def test_the_random_baseline_rarely_answers(cache: Path) -> None:
    env = _env(cache, split="test")
    wins = 0
    for seed in range(100):
        env.reset(seed=seed)
        rng = random.Random(seed)
        done = False
        while not done:
            *_, terminated, truncated, info = env.step(env.sample_action(rng))
            assert info["action_valid"]
            done = terminated or truncated
        wins += info["success"]
    assert wins <= 3
