"""Bundles of suites with multi-agent (PettingZoo Parallel) entries: bundled, verified by replay,
scored and shown exactly as strictly as single-agent ones.

A real bench run (``envgym.bench.run_suite``) of the random agent on a tiny suite of two
coopetition text games: a 2-agent one (TrustDilemma, the game's own 4-round horizon) and a
3-agent one (AppleAppStore, 3 rounds, cut at 2 by the suite's ``max_turns``, so the harness's
cut of a joint episode is replayed too). Every agent's record is one episode line; hostile
edits of one agent's record are rejected with the entry, seed, trial, agent and turn.
"""

from __future__ import annotations

import copy
import json
import math
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_leaderboard_support import bench_run

from envgym.leaderboard.bundle import EPISODE_KEYS, Bundle, bundle_bytes, make_bundle, read_bundle
from envgym.leaderboard.verify import VerificationError, VerifyConfig, verify_bundle
from envgym.rollout.rundir import load_trajectories

SUITE_ID = "matest-v1"
SUITE_YAML = """\
# Two coopetition games in their LLM text view, two tasks each, two trials per task.
name: matest
version: 1
description: multi-agent leaderboard tests
defaults: {episodes: 2, split: test, trials: 2}
entries:
  - name: trust-dilemma
    env: envgym/Coop-TrustDilemma-Text-v0
    kwargs: {max_steps: 4}
    seeds: [0, 1]
  - name: apple-app-store
    env: envgym/Coop-AppleAppStore-Text-v0
    kwargs: {max_steps: 3}
    seeds: [5, 6]
    max_turns: 2
"""
AGENTS = {"trust-dilemma": ["agent_0", "agent_1"], "apple-app-store": ["agent_0", "agent_1", "agent_2"]}
SINGLE_YAML = """\
name: satest
version: 1
description: a single-agent suite next to the multi-agent one
defaults: {episodes: 1, split: train, trials: 1}
entries:
  - {name: frozenlake, env: envgym/FrozenLake-v0, seeds: [3], max_turns: 12}
"""


@pytest.fixture(scope="module", name="suite_dir")
def suite_dir_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("suites")
    (folder / f"{SUITE_ID}.yaml").write_text(SUITE_YAML, encoding="utf-8")
    (folder / "satest-v1.yaml").write_text(SINGLE_YAML, encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ENVGYM_BENCHMARKS", str(folder))
        yield folder


@pytest.fixture(scope="module", name="run")
def run_fixture(suite_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return bench_run(tmp_path_factory.mktemp("runs") / "random", suite_dir / f"{SUITE_ID}.yaml", "random")


@pytest.fixture(scope="module", name="bundle")
def bundle_fixture(run: Path) -> Bundle:
    return make_bundle(run, name="random baseline", text_cap=60)


@pytest.fixture(scope="module", name="verified")
def verified_fixture(bundle: Bundle) -> Any:
    return verify_bundle(bundle)


def _edited(bundle: Bundle, edit: Callable[[Bundle], Any]) -> Bundle:
    changed = Bundle(copy.deepcopy(bundle.manifest), copy.deepcopy(bundle.episodes))
    edit(changed)
    changed.manifest["episodes"] = len(changed.episodes)
    return changed.rehash()


def _line(bundle: Bundle, entry: str, seed: int, trial: int, agent: str) -> dict[str, Any]:
    return next(
        e
        for e in bundle.episodes
        if (e["entry"], e["seed"], e["trial"], e.get("agent_id")) == (entry, seed, trial, agent)
    )


def _reject(bundle: Bundle) -> VerificationError:
    with pytest.raises(VerificationError) as info:
        verify_bundle(bundle)
    return info.value


# -- the bundle: one line per agent record ------------------------------------------------------------


def test_every_agent_record_is_an_episode_line_with_its_agent(bundle: Bundle, run: Path) -> None:
    m = bundle.manifest
    assert [(e["name"], e["episodes"], e["agents"]) for e in m["entries"]] == [
        ("trust-dilemma", 8, AGENTS["trust-dilemma"]),
        ("apple-app-store", 12, AGENTS["apple-app-store"]),
    ]
    assert m["episodes"] == 20 == len(bundle.episodes) and m["trials"] == 2
    keys = [(e["entry"], e["seed"], e["trial"], e["agent_id"], e["position"]) for e in bundle.episodes]
    assert keys == [
        (entry, s, t, a, k)
        for entry, seeds in (("trust-dilemma", (0, 1)), ("apple-app-store", (5, 6)))
        for s in seeds
        for t in (0, 1)
        for k, a in enumerate(AGENTS[entry])
    ]
    assert all(set(e) == {"entry", "agent_id", "position", *EPISODE_KEYS} for e in bundle.episodes)
    # Each line is that agent's record of the run, turn by turn.
    for entry, agents in AGENTS.items():
        records = load_trajectories(run / "entries" / entry)
        assert len(records) == 4 * len(agents)
        for t in records:
            meta = t.extra["multiagent"]
            line = _line(bundle, entry, t.seed, t.member, meta["agent_id"])
            assert line["index"] == t.index == meta["episode_index"] * len(agents) + meta["position"]
            assert [turn["action"] for turn in line["turns"]] == [turn.action for turn in t.turns]
            assert [turn["reward"] for turn in line["turns"]] == [turn.reward for turn in t.turns]
            assert line["total_reward"] == t.total_reward and line["termination_reason"] == t.termination_reason
    # The 3-agent game ran 2 of its 3 rounds: the suite's max_turns cut every agent at once.
    for e in bundle.episodes:
        if e["entry"] == "apple-app-store":
            assert (e["num_turns"], e["termination_reason"], e["truncated_by"]) == (2, "max_turns", "harness_max_turns")
            assert [t["truncated"] for t in e["turns"]] == [False, True]
        else:
            assert (e["num_turns"], e["termination_reason"], e["truncated_by"]) == (4, "max_turns", None)
    # Bundling is deterministic and the file reads back as the same bundle.
    again = make_bundle(run, name="random baseline", text_cap=60)
    assert bundle_bytes(again) == bundle_bytes(bundle)
    back = read_bundle(bundle_bytes(bundle))
    assert back.manifest == bundle.manifest and back.episodes == bundle.episodes


def test_single_agent_bundles_carry_no_agent_keys(suite_dir: Path, tmp_path: Path) -> None:
    run = bench_run(tmp_path / "single", suite_dir / "satest-v1.yaml", "oracle")
    bundle = make_bundle(run)
    assert set(bundle.manifest["entries"][0]) == {
        "name",
        "env_id",
        "env_version",
        "env_kwargs",
        "max_turns",
        "episodes",
    }
    assert [set(e) for e in bundle.episodes] == [{"entry", *EPISODE_KEYS}]
    verified = verify_bundle(bundle)
    assert [o.agent for o in verified.outcomes] == [None] and verified.scores.success_rate == 1.0


# -- honest bundles verify and score as the bench does --------------------------------------------------


def test_the_replay_accepts_the_run_and_scores_it_as_the_bench(verified: Any, bundle: Bundle, run: Path) -> None:
    outcomes = verified.outcomes
    assert [(o.entry, o.seed, o.trial, o.agent) for o in outcomes] == [
        (e["entry"], e["seed"], e["trial"], e["agent_id"]) for e in bundle.episodes
    ]
    assert all(o.scored and not o.success for o in outcomes)  # the games end by their horizon
    for o, e in zip(outcomes, bundle.episodes, strict=True):
        assert math.isclose(o.total_reward, e["total_reward"], rel_tol=1e-12)
        assert o.num_turns == e["num_turns"] and o.termination_reason == e["termination_reason"]
    results = json.loads((run / "results.json").read_text())
    by_name = {e["name"]: e for e in results["entries"]}
    scores = verified.scores
    for entry in scores.entries:
        bench = by_name[entry.entry]
        records = load_trajectories(run / "entries" / entry.entry)
        assert entry.episodes == bench["episodes"] == bench["expected_episodes"] == 4 * len(AGENTS[entry.entry])
        assert entry.mean_reward == pytest.approx(bench["mean_reward"], rel=1e-12, abs=1e-12)
        assert entry.mean_reward == pytest.approx(math.fsum(t.total_reward for t in records) / len(records), rel=1e-12)
        # These games define no success: the bench shows it as not defined (envgym.rollout.summary);
        # the leaderboard, which ranks on it, counts no episode as a success.
        assert bench["success_rate"] is None and bench["success_rate_ci"] is None and bench["pass_hat_k"] == {}
        assert entry.success_rate == 0.0 and [entry.ci_low, entry.ci_high] == [0.0, 0.0]
        assert all(value == 0.0 for value in entry.pass_k.values())
        # pass^k runs to agents x trials: every agent's record is an episode of its task.
        assert sorted(map(int, entry.pass_k)) == list(range(1, 2 * len(AGENTS[entry.entry]) + 1))
        assert entry.mean_turns == pytest.approx(bench["mean_turns"], abs=1e-12)
    overall = results["overall"]
    assert scores.mean_reward == pytest.approx(overall["mean_reward"], rel=1e-12)
    assert overall["success_rate"] is None and overall["success_defined"] is False
    assert [scores.ci_low, scores.ci_high] == [0.0, 0.0] and overall["success_rate_ci"] is None
    assert (scores.episodes, scores.scored, scores.infra) == (20, 20, 0)


def test_process_pool_replay_matches_in_process(verified: Any, bundle: Bundle) -> None:
    pooled = verify_bundle(bundle, VerifyConfig(workers=2, parallel_threshold=1))
    assert pooled.outcomes == verified.outcomes
    assert pooled.scores == verified.scores


# -- hostile bundles ------------------------------------------------------------------------------------


def test_one_agents_changed_action_is_rejected_at_its_turn(bundle: Bundle) -> None:
    def edit(b: Bundle) -> None:
        turn = _line(b, "trust-dilemma", 1, 0, "agent_1")["turns"][2]
        turn["action"] = "contribute 0" if turn["action"] != "contribute 0" else "contribute 1"

    err = _reject(_edited(bundle, edit))
    assert (err.entry, err.seed, err.trial, err.turn) == ("trust-dilemma", 1, 0, 2)
    # Shared payoffs move every agent's reward: the message names each agent whose claim differs.
    assert err.agent in AGENTS["trust-dilemma"] and "'agent_1'" in str(err)
    assert str(err).startswith(f"entry 'trust-dilemma', seed 1, trial 0, agent {err.agent!r}, turn 2: claimed")


def test_one_agents_edited_reward_is_rejected(bundle: Bundle) -> None:
    def edit(b: Bundle) -> None:
        _line(b, "apple-app-store", 6, 1, "agent_2")["turns"][1]["reward"] += 1.0

    err = _reject(_edited(bundle, edit))
    assert (err.entry, err.seed, err.trial, err.agent, err.turn) == ("apple-app-store", 6, 1, "agent_2", 1)
    assert "claimed reward" in err.reason and "differ" not in err.reason


def test_one_agents_edited_total_is_rejected(bundle: Bundle) -> None:
    def edit(b: Bundle) -> None:
        _line(b, "trust-dilemma", 0, 1, "agent_0")["total_reward"] += 0.5

    err = _reject(_edited(bundle, edit))
    assert (err.entry, err.seed, err.trial, err.agent, err.turn) == ("trust-dilemma", 0, 1, "agent_0", None)
    assert "claimed total reward" in err.reason


def test_a_missing_agent_record_is_rejected(bundle: Bundle) -> None:
    err = _reject(_edited(bundle, lambda b: b.episodes.remove(_line(b, "apple-app-store", 6, 0, "agent_1"))))
    assert str(err) == "missing episodes the suite asks for: entry 'apple-app-store' seed 6 trial 0 agent 'agent_1'"


def test_a_duplicated_agent_record_is_rejected(bundle: Bundle) -> None:
    err = _reject(_edited(bundle, lambda b: b.episodes.append(copy.deepcopy(b.episodes[1]))))
    assert str(err) == "duplicated episodes: entry 'trust-dilemma' seed 0 trial 0 agent 'agent_1'"


def test_swapped_agent_ids_are_rejected(bundle: Bundle) -> None:
    def swap(b: Bundle, entry: str, first: str, second: str, keys: tuple[str, ...]) -> None:
        seed = 5 if entry == "apple-app-store" else 0
        one, other = _line(b, entry, seed, 1, first), _line(b, entry, seed, 1, second)
        for key in keys:
            one[key], other[key] = other[key], one[key]

    err = _reject(_edited(bundle, lambda b: swap(b, "trust-dilemma", "agent_0", "agent_1", ("agent_id",))))
    assert (err.entry, err.seed, err.trial, err.agent) == ("trust-dilemma", 0, 1, "agent_1")
    assert "position 0" in err.reason
    err = _reject(_edited(bundle, lambda b: swap(b, "trust-dilemma", "agent_0", "agent_1", ("agent_id", "position"))))
    assert (err.entry, err.seed, err.trial, err.agent) == ("trust-dilemma", 0, 1, "agent_1")
    assert "record index 2 is not that of the agent at position 1" in err.reason
    # Relabelled whole (id, position and record number): the replay gives each agent the other's
    # actions. (In a symmetric game that is the same joint episode under other names, scoring the same.)
    relabel = ("agent_id", "position", "index")
    err = _reject(_edited(bundle, lambda b: swap(b, "apple-app-store", "agent_0", "agent_2", relabel)))
    assert (err.entry, err.seed, err.trial, err.turn) == ("apple-app-store", 5, 1, 0)
    assert err.agent in AGENTS["apple-app-store"]


def test_an_extra_agent_is_rejected(bundle: Bundle) -> None:
    def edit(b: Bundle) -> None:
        extra = copy.deepcopy(_line(b, "trust-dilemma", 0, 0, "agent_1"))
        extra["agent_id"], extra["position"] = "agent_2", 2
        b.episodes.insert(2, extra)

    err = _reject(_edited(bundle, edit))
    assert (err.entry, err.seed, err.trial, err.agent) == ("trust-dilemma", 0, 0, "agent_2")
    assert err.reason == "unknown agent id 'agent_2'; the environment's agents are agent_0, agent_1"


def test_lines_without_agent_ids_and_wrong_agent_lists_are_rejected(bundle: Bundle) -> None:
    def strip(b: Bundle) -> None:
        line = _line(b, "trust-dilemma", 1, 1, "agent_0")
        del line["agent_id"], line["position"]

    err = _reject(_edited(bundle, strip))
    assert (err.entry, err.seed, err.trial) == ("trust-dilemma", 1, 1) and "carries no agent_id" in err.reason
    err = _reject(_edited(bundle, lambda b: b.manifest["entries"][1]["agents"].reverse()))
    assert err.entry == "apple-app-store" and "the environment's agents are ['agent_0', 'agent_1', 'agent_2']" in str(
        err
    )


def test_one_agent_claiming_the_episode_goes_on_is_rejected(bundle: Bundle) -> None:
    def edit(b: Bundle) -> None:  # agent_2 claims a third round that the suite's max_turns cut
        line = _line(b, "apple-app-store", 5, 0, "agent_2")
        line["turns"].append(copy.deepcopy(line["turns"][-1]))
        line["num_turns"] = 3

    err = _reject(_edited(bundle, edit))
    assert (err.entry, err.seed, err.trial, err.agent, err.turn) == ("apple-app-store", 5, 0, "agent_2", 2)
    assert "ended after turn 1 but the claim has 3 turns" in err.reason

    def unscore(b: Bundle) -> None:  # one agent's record marked an infrastructure failure, the others not
        line = _line(b, "trust-dilemma", 0, 0, "agent_1")
        line["scored"], line["termination_reason"] = False, "agent_error"

    err = _reject(_edited(bundle, unscore))
    assert (err.entry, err.seed, err.trial) == ("trust-dilemma", 0, 0) and "scored and unscored at once" in err.reason


# -- store and pages ------------------------------------------------------------------------------------


def test_the_store_keeps_one_row_per_agent_and_the_page_shows_them(verified: Any, tmp_path: Path) -> None:
    pytest.importorskip("sqlalchemy")
    from envgym.leaderboard import pages
    from envgym.leaderboard.store import Store

    with Store(tmp_path / "board.db") as store:
        sub, created = store.add(verified)
        assert created and sub["episodes"] == 20 and sub["mean_reward"] == verified.scores.mean_reward
        listed = store.episodes(sub["id"])
        assert [(e["entry"], e["seed"], e["trial"], e["agent_id"]) for e in listed] == [
            (o.entry, o.seed, o.trial, o.agent) for o in verified.outcomes
        ]
        html = pages.submission_page(store.submission(sub["id"]), listed, lambda link: link)
        joint = pages.joint_returns(listed)
        for entry, agents in AGENTS.items():
            lines = [e for e in verified.bundle.episodes if e["entry"] == entry]
            assert joint[entry] == pytest.approx(
                math.fsum(e["total_reward"] for e in lines) / (len(lines) / len(agents))
            )
        assert "mean joint return" in html and "<td class='agent'>agent_2</td>" in html
        board = pages.suite_page(SUITE_ID, store.leaderboard(SUITE_ID), lambda link: link)
        assert "pass^2" in board and "pass^3" not in board  # pass^k columns up to the trials
        episode = store.episode(sub["id"], 8)
        assert episode["agent_id"] == "agent_0" and episode["entry"] == "apple-app-store"
        view = pages.episode_page(sub, episode, listed, lambda link: link)
        assert "apple-app-store seed 5 trial 0 agent agent_0</h1>" in view
        # The picker lists the entry's joint episodes; links lead to the other agents' records.
        assert view.count("<option ") == 4 and "<option value='/entries/1/episodes/8' selected>" in view
        assert "Agents: <b>agent_0</b> &middot; <a href='/entries/1/episodes/9'>agent_1</a>" in view


OLD_EPISODES_DDL = """
CREATE TABLE episodes (
    id INTEGER NOT NULL, submission_id INTEGER NOT NULL, ordinal INTEGER NOT NULL,
    entry VARCHAR(200) NOT NULL, seed INTEGER NOT NULL, trial INTEGER NOT NULL,
    task_id VARCHAR(200) NOT NULL, scored BOOLEAN NOT NULL, success BOOLEAN NOT NULL,
    total_reward FLOAT NOT NULL, num_turns INTEGER NOT NULL, termination_reason VARCHAR(40) NOT NULL,
    record JSON NOT NULL, PRIMARY KEY (id), UNIQUE (submission_id, entry, seed, trial),
    UNIQUE (submission_id, ordinal), FOREIGN KEY(submission_id) REFERENCES submissions (id) ON DELETE CASCADE
);
CREATE INDEX ix_episodes_submission_id ON episodes (submission_id);
"""


def test_a_database_from_before_multiagent_suites_is_migrated(verified: Any, tmp_path: Path) -> None:
    pytest.importorskip("sqlalchemy")
    from envgym.leaderboard.store import Store

    path = tmp_path / "old.db"
    Store(path).close()
    with sqlite3.connect(path) as db:  # the episodes table as the first release made it, with a row
        db.executescript("DROP TABLE episodes;" + OLD_EPISODES_DDL)
        db.execute(
            "INSERT INTO submissions (id, content_hash, suite_id, suite_name, suite_version, suite_sha256, agent_name,"
            " agent_spec, agent_metadata, manifest, created, submitted_at, envgym_version, trials, pass_k, episodes,"
            " scored, infra) VALUES (1, 'h', 's', 's', '1', 'x', 'a', 'a', '{}', '{}', 'c', 'c', 'v', 1, '{}', 1, 1, 0)"
        )
        db.execute(
            "INSERT INTO episodes (submission_id, ordinal, entry, seed, trial, task_id, scored, success, total_reward,"
            " num_turns, termination_reason, record) VALUES (1, 0, 'e', 4, 0, 't', 1, 1, 2.5, 3, 'success', '{}')"
        )
    with Store(path) as store:
        assert store.episodes(1) == [
            {
                "ordinal": 0,
                "entry": "e",
                "seed": 4,
                "trial": 0,
                "task_id": "t",
                "scored": True,
                "success": True,
                "total_reward": 2.5,
                "num_turns": 3,
                "termination_reason": "success",
            }
        ]
        sub, created = store.add(verified)
        assert created and len(store.episodes(sub["id"])) == 20
    with Store(path) as store:  # opening it again changes nothing
        assert len(store.episodes(sub["id"])) == 20 and len(store.episodes(1)) == 1
