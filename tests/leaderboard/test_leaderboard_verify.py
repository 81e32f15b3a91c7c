"""Bundles and verification by replay: real bench runs of a tiny suite, bundled, then tampered with.

Every tamper case must be rejected with a reason that names where it is; honest bundles from the
random and oracle agents must pass, score from the replay, and rank the oracle first.
"""

from __future__ import annotations

import copy
import gzip
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_leaderboard_support import SUITE_ID, bundles_fixture, runs_fixture, suite_dir_fixture  # noqa: F401 - fixtures

from envgym.bench.metrics import pass_hat
from envgym.errors import ConfigError
from envgym.leaderboard.bundle import (
    Bundle,
    BundleError,
    bundle_bytes,
    content_hash,
    make_bundle,
    read_bundle,
    write_bundle,
)
from envgym.leaderboard.scores import EpisodeOutcome, compute_scores
from envgym.leaderboard.verify import VerificationError, VerifyConfig, verify_bundle
from envgym.rollout.rundir import load_trajectories


def _edited(bundle: Bundle, edit: Callable[[Bundle], Any], *, rehash: bool = True) -> Bundle:
    changed = Bundle(copy.deepcopy(bundle.manifest), copy.deepcopy(bundle.episodes))
    edit(changed)
    if rehash:
        changed.rehash()
    return changed


def _reject(bundle: Bundle) -> VerificationError:
    with pytest.raises(VerificationError) as info:
        verify_bundle(bundle)
    return info.value


def _first(bundle: Bundle, pred: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    return next(e for e in bundle.episodes if pred(e))


# -- the bundle file ---------------------------------------------------------------------------------


def test_bundle_manifest_and_episodes_describe_the_run(bundles: dict[str, Bundle], runs: dict[str, Path]) -> None:
    bundle = bundles["random"]
    m = bundle.manifest
    assert m["format"] == "envgym-bundle/1"
    assert m["suite"]["id"] == SUITE_ID and len(m["suite"]["sha256"]) == 64
    assert [e["name"] for e in m["entries"]] == ["frozenlake", "sokoban"]
    assert m["entries"][1] == {
        "name": "sokoban",
        "env_id": "envgym/Sokoban-v0",
        "env_version": 0,
        "env_kwargs": {"size": 6, "boxes": 1, "split": "train"},
        "max_turns": 20,
        "episodes": 4,
    }
    assert m["agent"] == {"spec": "random", "name": "random baseline", "options": {}, "metadata": {"model": "random"}}
    assert m["trials"] == 2 and m["episodes"] == 8 == len(bundle.episodes)
    assert "gymnasium" in m["packages"]
    keys = [(e["entry"], e["seed"], e["trial"]) for e in bundle.episodes]
    assert keys == [
        (n, s, t) for n, seeds in (("frozenlake", (3, 4)), ("sokoban", (10, 12))) for s in seeds for t in (0, 1)
    ]
    # The episode's claims are the run's records, turn by turn.
    trajectories = {(t.seed, t.member): t for t in load_trajectories(runs["random"] / "entries" / "sokoban")}
    for episode in bundle.episodes[4:]:
        t = trajectories[(episode["seed"], episode["trial"])]
        assert [turn["action"] for turn in episode["turns"]] == t.actions
        assert [turn["reward"] for turn in episode["turns"]] == t.rewards
        assert episode["success"] == t.success and episode["termination_reason"] == t.termination_reason
        assert episode["turns"][0]["observation"] == t.turns[0].observation
    assert bundle.content_hash == content_hash(m, bundle.episodes)


def test_bundle_file_round_trips_and_is_deterministic(bundles: dict[str, Bundle], tmp_path: Path) -> None:
    bundle = bundles["oracle"]
    path = write_bundle(bundle, tmp_path / "b.envgym.jsonl.gz")
    assert path.read_bytes() == bundle_bytes(bundle)  # same bundle, same bytes (gzip mtime 0)
    back = read_bundle(path)
    assert back.manifest == bundle.manifest and back.episodes == bundle.episodes
    assert back.recompute_hash() == bundle.content_hash
    first_line = gzip.decompress(path.read_bytes()).split(b"\n", 1)[0]
    assert json.loads(first_line)["content_hash"] == bundle.content_hash


def test_text_cap_cuts_observations_but_never_actions(runs: dict[str, Path]) -> None:
    bundle = make_bundle(runs["oracle"], text_cap=40)
    turn = bundle.episodes[0]["turns"][0]
    assert turn["observation"].startswith(turn["observation"][:40]) and "more characters cut]" in turn["observation"]
    full = make_bundle(runs["oracle"])
    assert [t["action"] for e in bundle.episodes for t in e["turns"]] == [
        t["action"] for e in full.episodes for t in e["turns"]
    ]
    verify_bundle(bundle)  # the replay compares the kept prefix of each observation


# -- honest bundles pass, score from the replay ---------------------------------------------------------


def test_honest_bundles_verify_and_score_from_the_replay(bundles: dict[str, Bundle], runs: dict[str, Path]) -> None:
    random_v = verify_bundle(bundles["random"])
    oracle_v = verify_bundle(bundles["oracle"])
    assert len(random_v.outcomes) == 8 and all(o.scored for o in random_v.outcomes)
    for verified, run in ((random_v, runs["random"]), (oracle_v, runs["oracle"])):
        for entry in verified.scores.entries:
            trajectories = load_trajectories(run / "entries" / entry.entry)
            assert entry.success_rate == pytest.approx(sum(t.success for t in trajectories) / len(trajectories))
            assert entry.mean_reward == pytest.approx(sum(t.total_reward for t in trajectories) / len(trajectories))
            assert entry.episodes == 4 and entry.infra == 0
    assert oracle_v.scores.success_rate == 1.0
    assert oracle_v.scores.pass_k == {"1": 1.0, "2": 1.0}
    assert random_v.scores.success_rate < oracle_v.scores.success_rate
    low, high = random_v.scores.ci_low, random_v.scores.ci_high
    assert 0.0 <= low <= random_v.scores.success_rate <= high <= 1.0


def test_intervals_are_the_bench_runs_own(runs: dict[str, Path], bundles: dict[str, Bundle]) -> None:
    """A leaderboard entry shows the same 95 % intervals as its bench run's results.json."""
    for agent in ("random", "oracle"):
        results = json.loads((runs[agent] / "results.json").read_text())
        scores = verify_bundle(bundles[agent]).scores
        assert [scores.ci_low, scores.ci_high] == pytest.approx(results["overall"]["success_rate_ci"], abs=1e-12)
        by_name = {e["name"]: e for e in results["entries"]}
        for entry in scores.entries:
            assert [entry.ci_low, entry.ci_high] == pytest.approx(by_name[entry.entry]["success_rate_ci"], abs=1e-12)
            assert entry.success_rate == pytest.approx(by_name[entry.entry]["success_rate"], abs=1e-12)


def test_process_pool_replay_matches_in_process(bundles: dict[str, Bundle]) -> None:
    here = verify_bundle(bundles["random"])
    pooled = verify_bundle(bundles["random"], VerifyConfig(workers=2, parallel_threshold=1))
    assert pooled.outcomes == here.outcomes
    assert pooled.scores == here.scores


def test_pass_hat_k_and_scores_by_hand() -> None:
    assert pass_hat(4, 2, 1) == 0.5
    assert pass_hat(4, 2, 2) == pytest.approx(1 / 6)
    assert pass_hat(3, 3, 3) == 1.0 and pass_hat(3, 2, 3) == 0.0
    with pytest.raises(ValueError, match="n=2, c=3"):
        pass_hat(2, 3, 1)

    def o(entry: str, seed: int, trial: int, success: bool, reward: float, scored: bool = True) -> EpisodeOutcome:
        return EpisodeOutcome(entry, seed, trial, scored, success, reward, 3, "success" if success else "failure")

    outcomes = [
        o("a", 0, 0, True, 1.0),
        o("a", 0, 1, True, 1.0),
        o("a", 1, 0, True, 1.0),
        o("a", 1, 1, False, 0.0),
        o("b", 5, 0, False, -1.0),
        o("b", 5, 1, False, 0.0, scored=False),  # an infrastructure failure: a failed episode, counted apart
    ]
    scores = compute_scores(outcomes, [("a", "x/A-v0"), ("b", "x/B-v0")], trials=2)
    a, b = scores.entries
    assert (a.success_rate, a.mean_reward, a.pass_k) == (0.75, 0.75, {"1": 0.75, "2": 0.5})
    assert (b.success_rate, b.mean_reward, b.scored, b.infra, b.pass_k) == (0.0, -0.5, 1, 1, {"1": 0.0, "2": 0.0})
    assert scores.success_rate == pytest.approx(0.375) and scores.mean_reward == pytest.approx(0.125)
    assert scores.pass_k == {"1": 0.375, "2": 0.25}
    assert (scores.episodes, scores.scored, scores.infra) == (6, 5, 1)
    assert a.ci_low == 0.5 and a.ci_high == 1.0  # tasks resampled: rates 2/4, 3/4 or 4/4


# -- tampering ------------------------------------------------------------------------------------------


def test_raised_reward_is_rejected_at_its_turn(bundles: dict[str, Bundle]) -> None:
    def edit(b: Bundle) -> None:
        episode = _first(b, lambda e: not e["success"])
        episode["turns"][-1]["reward"] += 1.0
        episode["turns"][-1]["reward_components"]["success_reward"] = 1.0
        episode["total_reward"] += 1.0
        episode["success"] = True

    target = _first(bundles["random"], lambda e: not e["success"])
    err = _reject(_edited(bundles["random"], edit))
    last = len(target["turns"]) - 1
    assert (err.entry, err.seed, err.trial, err.turn) == (target["entry"], target["seed"], target["trial"], last)
    assert "claimed reward" in err.reason
    assert f"entry {target['entry']!r}, seed {target['seed']}, trial {target['trial']}, turn {last}" in str(err)


def test_raised_reward_component_alone_is_rejected(bundles: dict[str, Bundle]) -> None:
    def edit(b: Bundle) -> None:
        b.episodes[0]["turns"][0]["reward_components"]["step_cost_reward"] = 0.5

    err = _reject(_edited(bundles["oracle"], edit))
    assert err.turn == 0 and "step_cost_reward" in err.reason


def test_changed_action_is_rejected(bundles: dict[str, Bundle]) -> None:
    bundle = bundles["oracle"]
    episode = _first(bundle, lambda e: e["entry"] == "frozenlake" and len(e["turns"]) >= 2)
    index = bundle.episodes.index(episode)
    original = episode["turns"][0]["action"]
    swapped = {"up": "down", "down": "up", "left": "right", "right": "left"}[original]

    def edit(b: Bundle) -> None:
        b.episodes[index]["turns"][0]["action"] = swapped

    err = _reject(_edited(bundle, edit))
    assert (err.entry, err.seed, err.trial) == (episode["entry"], episode["seed"], episode["trial"])
    assert err.turn is not None and err.turn <= 1


def test_changed_env_version_is_rejected(bundles: dict[str, Bundle]) -> None:
    err = _reject(_edited(bundles["oracle"], lambda b: b.manifest["entries"][1].update(env_version=1)))
    assert err.entry == "sokoban" and "version is 1" in err.reason and "version 0" in err.reason


def test_dropped_episode_is_rejected(bundles: dict[str, Bundle]) -> None:
    def edit(b: Bundle) -> None:
        b.episodes.pop()
        b.manifest["episodes"] -= 1

    err = _reject(_edited(bundles["oracle"], edit))
    assert "missing episodes" in str(err) and "entry 'sokoban' seed 12 trial 1" in str(err)


def test_duplicated_episode_is_rejected(bundles: dict[str, Bundle]) -> None:
    def edit(b: Bundle) -> None:  # the best episode twice, in place of another
        b.episodes[1] = copy.deepcopy(b.episodes[0])

    err = _reject(_edited(bundles["random"], edit))
    assert "duplicated episodes" in str(err) and "entry 'frozenlake' seed 3 trial 0" in str(err)

    def extra(b: Bundle) -> None:
        b.episodes.append(copy.deepcopy(b.episodes[0]) | {"seed": 99})
        b.manifest["episodes"] += 1

    assert "does not ask for" in str(_reject(_edited(bundles["random"], extra)))


def test_edited_manifest_without_rehash_is_rejected(bundles: dict[str, Bundle]) -> None:
    err = _reject(_edited(bundles["random"], lambda b: b.manifest["agent"].update(name="gpt-9"), rehash=False))
    assert "content hash mismatch" in str(err)


def test_edited_hash_is_rejected(bundles: dict[str, Bundle]) -> None:
    err = _reject(_edited(bundles["random"], lambda b: b.manifest.update(content_hash="0" * 64), rehash=False))
    assert "content hash mismatch" in str(err) and "0000000000000000" in str(err)


def test_edited_episode_without_rehash_is_rejected(bundles: dict[str, Bundle]) -> None:
    def edit(b: Bundle) -> None:
        b.episodes[0]["success"] = not b.episodes[0]["success"]

    assert "content hash mismatch" in str(_reject(_edited(bundles["random"], edit, rehash=False)))


def test_claimed_success_or_end_that_the_replay_disagrees_with_is_rejected(bundles: dict[str, Bundle]) -> None:
    failed = _first(bundles["random"], lambda e: not e["success"])
    index = bundles["random"].episodes.index(failed)
    err = _reject(_edited(bundles["random"], lambda b: b.episodes[index].update(success=True)))
    assert err.seed == failed["seed"] and "claimed success=True, replayed success=False" in err.reason

    def cut(b: Bundle) -> None:  # claim the episode ended one turn early
        episode = b.episodes[index]
        episode["turns"].pop()
        episode["num_turns"] -= 1

    err = _reject(_edited(bundles["random"], cut))
    assert err.seed == failed["seed"]


def test_other_suite_version_or_arguments_are_rejected(bundles: dict[str, Bundle]) -> None:
    err = _reject(_edited(bundles["oracle"], lambda b: b.manifest["suite"].update(sha256="ab" * 32)))
    assert "another version of the suite" in str(err)
    err = _reject(_edited(bundles["oracle"], lambda b: b.manifest["suite"].update(id="core-v99")))
    assert "'core-v99' is not installed" in str(err)
    err = _reject(_edited(bundles["oracle"], lambda b: b.manifest["entries"][1]["env_kwargs"].update(size=7)))
    assert err.entry == "sokoban" and "'size': 7" in str(err)
    err = _reject(_edited(bundles["oracle"], lambda b: b.manifest["entries"][0].update(max_turns=99)))
    assert err.entry == "frozenlake" and "max_turns=99" in str(err)

    def easier_suite(b: Bundle) -> None:  # the bundle's own suite copy cannot change what is expected
        b.manifest["suite_spec"]["entries"][0]["max_turns"] = 50

    assert "suite copy" in str(_reject(_edited(bundles["oracle"], easier_suite)))


def test_infrastructure_failures_are_carried_unscored_and_capped(bundles: dict[str, Bundle]) -> None:
    bundle = bundles["random"]
    longest = max(range(len(bundle.episodes)), key=lambda i: len(bundle.episodes[i]["turns"]))

    def crash(index: int) -> Callable[[Bundle], None]:
        def edit(b: Bundle) -> None:  # the episode stopped mid-way on an environment error
            episode = b.episodes[index]
            episode["turns"] = episode["turns"][:1]
            episode["num_turns"] = 1
            episode.update(scored=False, success=False, termination_reason="env_error", errors=["env_error: boom"])
            episode["total_reward"] = episode["turns"][0]["reward"]

        return edit

    verified = verify_bundle(_edited(bundle, crash(longest)))
    assert verified.scores.infra == 1 and verified.scores.scored == 7
    entry = next(e for e in verified.scores.entries if e.entry == bundle.episodes[longest]["entry"])
    assert entry.infra == 1 and entry.scored == 3  # shown apart, and counted as a failed episode:
    honest = verify_bundle(bundle).scores
    before = next(e for e in honest.entries if e.entry == entry.entry)
    others = sum(o.success for o in verified.outcomes if o.entry == entry.entry and o.scored)
    assert entry.success_rate == pytest.approx(others / 4) and entry.success_rate <= before.success_rate

    # A finished episode relabelled as an infrastructure failure is caught by the replay.
    def relabel(b: Bundle) -> None:
        b.episodes[longest].update(scored=False, success=False, termination_reason="env_error")

    assert "ended normally" in str(_reject(_edited(bundle, relabel)))

    def many(b: Bundle) -> None:
        for i in range(5):
            crash(i)(b)

    assert "infrastructure failures" in str(_reject(_edited(bundle, many)))


# -- malformed files: BundleError, never a traceback from deep inside ----------------------------------


def test_malformed_bundles_get_clear_errors(bundles: dict[str, Bundle], tmp_path: Path) -> None:
    good = bundle_bytes(bundles["oracle"])
    with pytest.raises(BundleError, match="gzip file"):
        read_bundle(b"PK\x03\x04 not a bundle")
    with pytest.raises(BundleError, match="truncated"):
        read_bundle(good[: len(good) // 2])
    lines = gzip.decompress(good).split(b"\n")
    with pytest.raises(BundleError, match="line 2 of the bundle is not valid JSON"):
        read_bundle(gzip.compress(lines[0] + b"\n{oops\n"))
    episode = json.loads(lines[1])
    del episode["turns"][0]["reward"]
    lines[1] = json.dumps(episode).encode()
    with pytest.raises(BundleError, match=r"episode on line 2, turn 0: reward: expected a number, got None"):
        read_bundle(gzip.compress(b"\n".join(lines)))
    manifest = json.loads(lines[0])
    manifest["trials"] = "two"
    with pytest.raises(BundleError, match=r"manifest.trials: expected int >= 1 \(at most 1000\), got 'two'"):
        read_bundle(gzip.compress(b"\n".join([json.dumps(manifest).encode(), *lines[1:]])))
    with pytest.raises(BundleError, match="announces 8 episodes but the bundle holds 7"):
        read_bundle(gzip.compress(b"\n".join(gzip.decompress(good).split(b"\n")[:-2])))
    with pytest.raises(BundleError, match="unpacks to more than 1000 bytes"):
        read_bundle(good, max_bytes=1000)
    with pytest.raises(BundleError, match="does not exist"):
        read_bundle(tmp_path / "nope.gz")
    with pytest.raises(BundleError, match=r"is not a bench run folder \(no bench.json\)"):
        make_bundle(tmp_path)


def test_store_is_idempotent_and_ranks_oracle_first(bundles: dict[str, Bundle], tmp_path: Path) -> None:
    from envgym.leaderboard.store import Store

    with Store(tmp_path / "lb.db") as store:
        first, created = store.add(verify_bundle(bundles["random"]))
        assert created and first["agent_name"] == "random baseline"
        again, created = store.add(verify_bundle(bundles["random"]))
        assert not created and again["id"] == first["id"]
        store.add(verify_bundle(bundles["oracle"]))
        board = store.leaderboard(SUITE_ID)
        assert [b["agent_name"] for b in board] == ["oracle baseline", "random baseline"]
        assert [b["rank"] for b in board] == [1, 2]
        assert store.count() == 2 and store.suites()[0]["best_agent"] == "oracle baseline"
        episodes = store.episodes(board[1]["id"])
        assert len(episodes) == 8 and [e["ordinal"] for e in episodes] == list(range(8))
        one = store.episode(board[1]["id"], 5)
        assert one["turns"][0]["action"] == bundles["random"].episodes[5]["turns"][0]["action"]
        assert math.isclose(one["total_reward"], bundles["random"].episodes[5]["total_reward"])


def test_regrade_hook_for_environments_that_cannot_be_replayed_step_by_step() -> None:
    import gymnasium as gym

    from envgym.leaderboard.verify import replay_episode

    class LiveSite(gym.Env):
        """Stands in for an environment whose transitions depend on more than the seed."""

        replayable = False
        observation_space = gym.spaces.Discrete(1)
        action_space = gym.spaces.Discrete(1)

        def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[int, dict[str, Any]]:
            super().reset(seed=seed)
            return 0, {"task": {"id": f"site-{seed}"}}

        def regrade_episode(self, record: dict[str, Any]) -> dict[str, Any]:
            solved = record.get("final_state", {}).get("cart") == ["book"]
            return {"success": solved, "total_reward": 1.0 if solved else 0.0}

    episode = {
        "entry": "site", "seed": 4, "trial": 0, "task_id": "site-4", "scored": True, "success": True,
        "termination_reason": "success", "total_reward": 1.0, "turns": [], "final_state": {"cart": ["book"]},
    }  # fmt: skip
    outcome = replay_episode(LiveSite(), episode, max_turns=None, config=VerifyConfig())
    assert (outcome.success, outcome.total_reward, outcome.scored) == (True, 1.0, True)
    episode["final_state"] = {"cart": []}
    with pytest.raises(VerificationError, match="claimed success=True, regraded success=False"):
        replay_episode(LiveSite(), episode, max_turns=None, config=VerifyConfig())


def test_published_schema_describes_real_bundles(bundles: dict[str, Bundle]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).resolve().parents[2] / "leaderboards" / "schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for bundle in bundles.values():
        for record in (bundle.manifest, *bundle.episodes):
            validator.validate(json.loads(json.dumps(record)))
    broken = copy.deepcopy(bundles["oracle"].episodes[0])
    broken["turns"][0]["reward"] = "1.0"
    assert not validator.is_valid(broken)


# -- spot checks (a test's quick replay; the leaderboard replays every episode) ----------------------


def test_a_spot_check_replays_the_first_episodes_of_every_entry_and_says_so(bundles: dict[str, Bundle]) -> None:
    bundle = bundles["oracle"]
    full = verify_bundle(bundle)
    spot = verify_bundle(bundle, VerifyConfig(episodes_per_entry=1))
    assert not full.spot_check and spot.spot_check
    entries = {e["entry"] for e in bundle.episodes}
    assert len(full.outcomes) == len(bundle.episodes) > len(entries)
    assert len(spot.outcomes) == len(entries)
    first = {}
    for episode in bundle.episodes:
        first.setdefault(episode["entry"], episode["seed"])
    assert {(o.entry, o.seed) for o in spot.outcomes} == set(first.items())
    # as many as there are: not a spot check
    assert not verify_bundle(bundle, VerifyConfig(episodes_per_entry=len(bundle.episodes))).spot_check


def test_a_spot_check_still_reads_the_whole_bundle(bundles: dict[str, Bundle]) -> None:
    bundle = bundles["oracle"]
    last = bundle.episodes[-1]
    assert last["seed"] != _first(bundle, lambda e: e["entry"] == last["entry"])["seed"]  # not replayed
    unhashed = _edited(bundle, lambda b: b.episodes[-1].update(reward=123.0), rehash=False)
    with pytest.raises(VerificationError, match="content hash mismatch"):
        verify_bundle(unhashed, VerifyConfig(episodes_per_entry=1))
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ConfigError, match="episodes_per_entry"):
            VerifyConfig(episodes_per_entry=bad)
