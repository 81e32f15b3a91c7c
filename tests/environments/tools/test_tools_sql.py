"""envgym/Tools-SQL-v0: generated databases, disjoint splits, read-only tools, rewards, the oracle."""

from __future__ import annotations

import json
import pickle
import sqlite3
from pathlib import Path

import pytest
from envgym.agents.solvers.tools_sql import Solver, build_query
from envgym.environments.tools import sqldata
from envgym.environments.tools.sql import EFFICIENCY_MAX, EXPLORATION_BONUS, SQLEnv, results_match

import envgym
from envgym.errors import ConfigError, InvalidKwargsError


def call(name: str, **arguments: str) -> str:
    return json.dumps({"name": name, "arguments": arguments})


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("tools-sql"))


@pytest.fixture
def env(cache: str) -> SQLEnv:
    env = SQLEnv(size="small", cache_dir=cache)
    yield env
    env.close()


def play_oracle(env: SQLEnv, seed: int) -> tuple[dict, float, int]:
    obs, info = env.reset(seed=seed)
    solver = Solver("envgym/Tools-SQL-v0", seed)
    total, turns = 0.0, 0
    while True:
        obs, reward, terminated, truncated, info = env.step(solver.act(obs, info))
        total += reward
        turns += 1
        if terminated or truncated:
            return info, total, turns


def test_a_database_is_a_pure_function_of_its_seed(tmp_path: Path) -> None:
    a = sqldata.database_path("library", 1, "small", tmp_path / "a")
    b = sqldata.database_path("library", 1, "small", tmp_path / "b")
    assert a.read_bytes() == b.read_bytes()
    c = sqldata.database_path("library", 2, "small", tmp_path / "a")
    assert a.read_bytes() != c.read_bytes()
    con = sqlite3.connect(a)
    assert con.execute("SELECT count(*) FROM loans").fetchone()[0] == sqldata.SIZES["small"]
    assert con.execute("SELECT count(*) FROM members").fetchone()[0] == 200
    # every foreign key points at a row
    assert con.execute("SELECT count(*) FROM loans WHERE member_id NOT IN (SELECT id FROM members)").fetchone()[0] == 0
    con.close()


def test_splits_are_disjoint_by_template_and_database(cache: str) -> None:
    seen = {}
    for split in ("train", "test"):
        env = SQLEnv(size="small", cache_dir=cache, split=split)
        keys = set()
        for seed in range(60):
            task = env.reset(seed=seed)[1]["task"]
            keys.add((task["template"], task["schema"], task["instance"]))
        env.close()
        seen[split] = keys
    assert seen["train"] and seen["test"] and not seen["train"] & seen["test"]
    for split, keys in seen.items():
        assert all(sqldata.in_split(*key, split) for key in keys)
    # every difficulty has tasks in both splits
    for level in ("easy", "medium", "hard"):
        for split in ("train", "test"):
            SQLEnv(size="small", cache_dir=cache, difficulty=level, split=split).close()


def test_the_oracle_solves_every_seed_of_both_splits(cache: str) -> None:
    for split in ("train", "test"):
        env = SQLEnv(size="small", cache_dir=cache, split=split)
        for seed in range(40):
            info, total, turns = play_oracle(env, seed)
            assert info["success"], info["task"]
            calls = turns - 1
            efficiency = EFFICIENCY_MAX * (1 - calls / env.call_budget)
            assert info["reward_components"]["exploration_reward"] == EXPLORATION_BONUS  # diagnostic
            assert total == pytest.approx(1.0 + efficiency)
            assert info["progress"] == 1.0
        env.close()


def test_writes_pragma_attach_and_runaway_queries_are_refused(cache: str) -> None:
    env = SQLEnv(size="small", cache_dir=cache, query_steps=1_000_000, max_turns=30)
    env.reset(seed=0)
    table = env._table_names()[0]
    count = f"SELECT count(*) FROM {table}"
    before = env.step(call("execute_sql", query=count))[0].split("\n\n")[0]
    for query in (
        f"DELETE FROM {table}",
        f"DROP TABLE {table}",
        f"UPDATE {table} SET id = 0",
        "PRAGMA table_info(orders)",
        "ATTACH DATABASE ':memory:' AS other",
        "CREATE TABLE x (a)",
        "SELECT zeroblob(1000000000)",
        "SELECT load_extension('x')",
        f"SELECT printf('%.90000c', 'x') FROM {table}",  # 90 kB a row: the result outgrows its bound
    ):
        obs, reward, terminated, _, info = env.step(call("execute_sql", query=query))
        assert obs.startswith("Tool error (execute_sql):"), (query, obs)
        assert info["action_valid"] and not terminated and reward == 0.0
    obs, *_ = env.step(
        call(
            "execute_sql",
            query="WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
        )
    )
    assert "ran past its limit" in obs
    obs, *_ = env.step(call("execute_sql", query=f"SELECT 1; DELETE FROM {table}"))
    assert obs.startswith("Tool error")
    # nothing was written
    assert env.step(call("execute_sql", query=count))[0].split("\n\n")[0] == before
    obs, _, terminated, _, info = env.step(call("submit", query=f"SELECT printf('%.90000c', 'x') FROM {table}"))
    assert terminated and not info["success"] and "larger than 2,000,000 bytes" in obs  # submits are bounded too
    env.close()


def test_results_are_capped_and_cells_cut(cache: str) -> None:
    env = SQLEnv(size="small", cache_dir=cache, row_cap=5)
    env.reset(seed=0)
    events = min(env._table_names(), key=len)
    obs, *_ = env.step(call("execute_sql", query="SELECT id, printf('%.200c', 'x') FROM " + events))
    lines = obs.split("\n\n")[0].splitlines()
    assert len(lines) == 1 + 5 + 1 and "first 5 rows shown" in lines[-1]
    assert max(len(line) for line in lines) < 100
    env.close()


def test_malformed_calls_are_invalid_steps_with_the_tool_error(env: SQLEnv) -> None:
    env.reset(seed=1)
    for action, message in (
        ("SELECT 1", "expected one tool call as JSON"),
        ('{"name": "execute_sql"', "not valid JSON"),
        (call("drop_db"), "unknown tool 'drop_db'"),
        ('{"name": "execute_sql", "arguments": {}}', "missing required argument(s) ['query']"),
        (call("describe_table", table="nope"), "no table 'nope'"),
        ('{"name": "execute_sql", "arguments": {"query": 5}}', "arguments.query: expected string"),
    ):
        obs, reward, terminated, _, info = env.step(action)
        assert not info["action_valid"] and message in obs, (action, obs)
        assert reward == pytest.approx(-0.1) and not terminated
    assert env._calls == 0


def test_info_lists_the_tools_and_the_card_names_them(env: SQLEnv) -> None:
    _, info = env.reset(seed=2)
    names = [t["function"]["name"] for t in info["tools"]]
    assert names == ["list_tables", "describe_table", "execute_sql", "submit"]
    assert info["parallel_tool_calls"] is False
    card = SQLEnv.env_card()
    assert all(f"``{name}" in card for name in names)


def test_a_wrong_submit_earns_nothing_and_ordering_counts_only_when_asked(env: SQLEnv) -> None:
    _, info = env.reset(seed=0, options={"schema": "shop", "instance": 0, "template": "list_people"})
    question = info["task"]["goal"]
    assert info["task"]["ordered"] and "sorted by name" in question
    query = build_query(question, {})
    assert len(set(env._gold)) >= 2  # (shop 0 has several people per place and year)
    _, reward, terminated, _, info = env.step(
        call("submit", query=query.replace("ORDER BY name", "ORDER BY name DESC"))
    )
    assert terminated and not info["success"] and reward == 0.0
    assert results_match([(1, "a"), (2, "b")], [(2, "b"), (1, "a")], ordered=False)
    assert not results_match([(1, "a"), (2, "b")], [(2, "b"), (1, "a")], ordered=True)
    assert results_match([(1.00001,)], [(1,)], ordered=False)
    assert not results_match([(1,), (1,)], [(1,)], ordered=False)  # multisets


def test_efficiency_counts_calls_and_exploration_needs_the_gold_tables(env: SQLEnv) -> None:
    _, info = env.reset(seed=3, options={"schema": "flights", "instance": 2, "template": "count_category"})
    query = build_query(info["task"]["goal"], {})
    env.step(call("list_tables"))
    env.step(call("execute_sql", query="SELECT count(*) FROM passengers"))  # not the table it needs
    _, reward, _, _, info = env.step(call("submit", query=query))
    assert info["success"]
    assert info["reward_components"]["efficiency_reward"] == pytest.approx(EFFICIENCY_MAX * (1 - 2 / 6))
    assert info["reward_components"]["exploration_reward"] == 0.0
    assert info["reward_basis"] == [
        "execution_match_reward",
        "efficiency_reward",
        "invalid_action_reward",
        "step_cost_reward",
    ]
    assert reward == pytest.approx(1.0 + EFFICIENCY_MAX * (1 - 2 / 6))


def test_a_pickled_env_continues_like_the_original(env: SQLEnv) -> None:
    env.reset(seed=4)
    env.step(call("list_tables"))
    clone = pickle.loads(pickle.dumps(env))
    action = call("execute_sql", query="SELECT count(*) FROM " + env._table_names()[1])
    assert clone.step(action) == env.step(action)
    clone.close()


def test_bad_kwargs_are_refused() -> None:
    with pytest.raises(InvalidKwargsError, match="Did you mean 'shop'"):
        SQLEnv(schemas=["shopp"])
    with pytest.raises(InvalidKwargsError, match="row_cap"):
        SQLEnv(row_cap=0)
    with pytest.raises(InvalidKwargsError):
        SQLEnv(size="huge")
    env = SQLEnv(size="small")
    with pytest.raises(ConfigError, match="Did you mean 'top_people'"):
        env.reset(seed=0, options={"template": "top_peple"})
    with pytest.raises(ConfigError, match="options\\['schema'\\]"):
        env.reset(seed=0, options={"schema": ["shop"]})
    env.close()


@pytest.mark.parametrize("env_id", ["envgym/Tools-SQL-Easy-v0", "envgym/Tools-SQL-Hard-v0"])
def test_presets_keep_their_difficulty(env_id: str, cache: str) -> None:
    env = envgym.make(env_id, size="small", cache_dir=cache)
    levels = {env.reset(seed=s)[1]["task"]["difficulty"] for s in range(10)}
    assert levels == {env_id.split("-")[2].lower()}
    env.close()


def test_the_per_process_caches_change_no_task(cache: str) -> None:
    from envgym.environments.tools import sql

    env = SQLEnv(size="small", cache_dir=cache)
    warm = [(env.reset(seed=s)[1]["task"], list(env._gold)) for s in range(12)]
    sqldata._VALUES.clear()
    sql._GOLD.clear()
    cold = [(env.reset(seed=s)[1]["task"], list(env._gold)) for s in range(12)]
    assert warm == cold and sqldata._VALUES and sql._GOLD
    env.close()


def test_a_query_is_read_as_sent_inside_its_action_block(env: SQLEnv) -> None:
    env.reset(seed=5)
    obs, *_ = env.step(
        'Let me check.\n<action>{"name": "execute_sql", "arguments": {"query": "SELECT \'a   b\'"}}</action>'
    )
    assert obs.startswith("Tool result (execute_sql):") and "\na   b\n" in obs  # the spaces of the literal kept


@pytest.mark.parametrize("difficulty", ["easy", "hard"])
def test_candidates_offer_exactly_one_right_query_without_changing_the_question(difficulty: str, cache: str) -> None:
    plain = SQLEnv(difficulty=difficulty, size="small", cache_dir=cache)
    offered = SQLEnv(difficulty=difficulty, candidates=4, size="small", cache_dir=cache)
    for seed in range(6):
        question = plain.reset(seed=seed)[1]["task"]["goal"]
        obs, info = offered.reset(seed=seed)
        assert info["task"]["goal"] == question  # distractors are drawn after the gold task
        queries = info["task"]["candidates"]
        assert len(queries) == len(set(queries)) == 4
        assert all(f"- {q}" in obs for q in queries)
        assert info["admissible_actions"] == [call("submit", query=q) for q in queries]
        assert offered.reset(seed=seed)[1]["admissible_actions"] == info["admissible_actions"]  # seeded order
        right = []
        for action in info["admissible_actions"]:
            offered.reset(seed=seed)
            _, _, terminated, _, end = offered.step(action)
            assert terminated and end["admissible_actions"] == []
            right.append(end["success"])
        assert right.count(True) == 1, (seed, queries)
        offered.reset(seed=seed)  # any other tool stays valid
        assert offered.step(call("list_tables"))[4]["action_valid"]
        # the random agent draws among the candidates
        assert offered.sample_action(__import__("random").Random(seed)) in offered.admissible_actions()
    plain.close()
    offered.close()


@pytest.mark.parametrize("candidates", [1, 11, True, "4", 2.0])
def test_bad_candidate_counts_are_refused(candidates: object) -> None:
    with pytest.raises(InvalidKwargsError, match="candidates must be None or an integer from 2 to 10"):
        SQLEnv(candidates=candidates, size="small")
