"""Benchmark suite files: the bundled suites, loading, validation errors and the content hash."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from envgym.bench.suite import METRICS, find_suite, list_suites, load_suite, suites_dir
from envgym.errors import ConfigError
from envgym.registration import list_envs

GAMES = {"Sokoban", "FrozenLake", "Wordle", "Countdown", "Minesweeper", "TicTacToe", "ConnectFour"}


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


TINY = """\
name: tiny
version: 1
description: two small entries
defaults: {episodes: 3, seed: 10, split: test, max_turns: 12, trials: 1}
metrics: [success_rate, mean_reward]
entries:
  - name: lake
    env: envgym/FrozenLake-v0
    kwargs: {difficulty: easy}
  - name: sums
    env: envgym/Countdown-v0
    kwargs: {difficulty: easy}
    seeds: [4, 9, 2]
    max_turns: 4
"""


# ---------------------------------------------------------------- bundled suites
def test_bundled_suites_load_and_are_named_after_their_content() -> None:
    ids = [p.stem for p in list_suites()]
    assert {"core-v1", "games-v1", "household-v1"} <= set(ids)
    for suite_id in ids:
        suite = load_suite(suite_id)  # builds one env per entry
        assert suite.id == suite_id
        assert suite.path == suites_dir() / f"{suite_id}.yaml"
        assert all(e.split in ("test", "valid_unseen") for e in suite.entries), "suites score held-out splits"
        assert set(suite.metrics) <= set(METRICS)


#: The families that had landed when core-v1 was frozen; a family that lands later joins the
#: next core version (core-v2), never core-v1 (a suite version never changes what it runs).
CORE_V1_FAMILIES = {"games", "household"}


def test_core_spans_every_family_it_was_frozen_with_and_every_game() -> None:
    core = load_suite("core-v1")
    # envgym's own families only: other test modules register toy envs in families of their own
    by_id = {s.id: s for s in list_envs(kind="gymnasium") if s.entry_point.startswith("envgym.environments.")}
    families = {s.family for s in by_id.values() if "textworld" not in s.entry_point.lower()}
    assert CORE_V1_FAMILIES <= families
    assert {by_id[e.env].family for e in core.entries} == CORE_V1_FAMILIES
    assert {by_id[e.env].name for e in core.entries} >= GAMES | {"Household"}
    # sized for the bundled 135M model on a CPU: few tasks, short turn limits
    assert sum(e.episodes for e in core.entries) <= 60
    assert all(e.max_turns is not None and e.max_turns <= 20 for e in core.entries)
    household = core.entry("household")
    assert household.kwargs == {"difficulty": "easy"} and household.split == "valid_unseen"


# ---------------------------------------------------------------- resolution and hash
def test_defaults_apply_and_seed_forms_resolve(tmp_path: Path) -> None:
    suite = load_suite(write(tmp_path, "tiny-v1.yaml", TINY))
    lake, sums = suite.entries
    assert (lake.seeds, lake.split, lake.max_turns, lake.episodes) == ((10, 11, 12), "test", 12, 3)
    assert lake.contiguous and lake.env_kwargs == {"difficulty": "easy", "split": "test"}
    assert (sums.seeds, sums.max_turns, sums.episodes, sums.contiguous) == ((4, 9, 2), 4, 3, False)
    resolved = suite.to_dict()
    assert resolved["entries"][0]["seeds"] == {"start": 10, "count": 3}
    assert resolved["entries"][1]["seeds"] == [4, 9, 2]
    assert resolved["defaults"]["trials"] == 1


def test_hash_covers_what_runs_not_the_formatting(tmp_path: Path) -> None:
    base = load_suite(write(tmp_path, "tiny-v1.yaml", TINY)).sha256
    # the same suite written out in full (defaults applied by hand, other key order, comments)
    explicit = """\
    # a comment
    version: 1
    name: tiny
    description: a different description does not change what runs
    metrics: [success_rate, mean_reward]
    defaults: {trials: 1, split: test, seed: 10, episodes: 3, max_turns: 12}
    entries:
      - {name: lake, env: envgym/FrozenLake-v0, kwargs: {difficulty: easy}, seeds: {start: 10, count: 3}, max_turns: 12}
      - {name: sums, env: envgym/Countdown-v0, kwargs: {difficulty: easy}, seeds: [4, 9, 2], episodes: 3, max_turns: 4}
    """
    other = tmp_path / "b"
    other.mkdir()
    assert load_suite(write(other, "tiny-v1.yaml", explicit)).sha256 == base
    changed = tmp_path / "c"
    changed.mkdir()
    assert load_suite(write(changed, "tiny-v1.yaml", TINY.replace("seed: 10", "seed: 11"))).sha256 != base
    assert load_suite(write(changed, "tiny-v1.yaml", TINY.replace("max_turns: 4", "max_turns: 5"))).sha256 != base
    assert len(base) == 64 and int(base, 16) >= 0


def test_find_suite_by_id_path_and_env_var(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert find_suite("core-v1").name == "core-v1.yaml"
    assert find_suite("core-v1.yaml") == find_suite("core-v1") == suites_dir() / "core-v1.yaml"
    with pytest.raises(ConfigError, match=r"unknown suite 'core-v2'.*Did you mean 'core-v1'"):
        find_suite("core-v2")
    path = write(tmp_path, "tiny-v1.yaml", TINY)
    assert find_suite(str(path)) == path
    with pytest.raises(ConfigError, match="does not exist"):
        find_suite(str(tmp_path / "nope-v1.yaml"))
    monkeypatch.setenv("ENVGYM_BENCHMARKS", str(tmp_path))
    assert suites_dir() == tmp_path
    assert load_suite("tiny-v1").path == path


# ---------------------------------------------------------------- invalid files
@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "env: envgym/FrozenLake-v0",
            "env: envgym/FrozenLak-v0",
            r"entries\[0\] \('lake'\) field 'env'.*Did you mean 'envgym/FrozenLake-v0'",
        ),
        (
            "{difficulty: easy}\n  - name: sums",
            "{difficulty: easy, size: -3}\n  - name: sums",
            r"entries\[0\] \('lake'\) field 'kwargs'",
        ),
        (
            "{difficulty: easy}\n  - name: sums",
            "{difficulty: easiest}\n  - name: sums",
            r"'lake'\) field 'kwargs'.*difficulty",
        ),
        (
            "{difficulty: easy}\n  - name: sums",
            "{difficulty: easy}\n    split: valid_unseen\n  - name: sums",
            r"'lake'\) field 'split'",
        ),
        ("name: sums", "name: lake", r"entries\[1\] field 'name': 'lake' is already the name of entries\[0\]"),
        (
            "max_turns: 4",
            "max_turns: four",
            r"\('sums'\) field 'max_turns': expected an integer >= 1 or null, got 'four'",
        ),
        ("max_turns: 4", "max_turn: 4", r"\('sums'\): unknown field 'max_turn'. Did you mean 'max_turns'"),
        ("seeds: [4, 9, 2]", "seeds: [4, 9, 4]", r"\('sums'\) field 'seeds': a seed appears twice"),
        (
            "seeds: [4, 9, 2]",
            "seeds: [4, 9, 2]\n    episodes: 5",
            r"\('sums'\) field 'episodes': 5 disagrees with the 3 seed",
        ),
        ("seeds: [4, 9, 2]", "seeds: {begin: 3}", r"field 'seeds': unknown field 'begin'"),
        ("seeds: [4, 9, 2]", "seeds: 7", r"field 'seeds': expected \{start: S, count: N\}"),
        ("episodes: 3,", "episodes: 0,", r"defaults.episodes: expected an integer >= 1, got 0"),
        ("trials: 1}", "trials: 1, trails: 2}", r"defaults: unknown field 'trails'. Did you mean 'trials'"),
        ("metrics: [success_rate, mean_reward]", "metrics: [success_rate, pass_k]", r"unknown metric 'pass_k'"),
        ("version: 1", "version: '1'", r"field 'version': expected an integer >= 1, got '1'"),
        ("name: tiny", "name: tiny-v1", r"field 'name'.*without a -vN suffix"),
        ("description: two small entries", "descripton: x", r"unknown field 'descripton'. Did you mean 'description'"),
        (
            "    kwargs: {difficulty: easy}\n    seeds",
            "    kwargs: {difficulty: easy, split: train}\n    seeds",
            r"give the split as the entry's 'split' field",
        ),
    ],
)
def test_invalid_suites_name_file_entry_and_field(tmp_path: Path, old: str, new: str, message: str) -> None:
    assert old in TINY, old
    path = write(tmp_path, "tiny-v1.yaml", TINY.replace(old, new, 1))
    with pytest.raises(ConfigError, match=message) as info:
        load_suite(path)
    assert str(path) in str(info.value)


def test_multi_agent_ids_bad_yaml_and_file_name_mismatch(tmp_path: Path) -> None:
    aec = TINY.replace("envgym/Countdown-v0", "envgym/TicTacToe-v0").replace(
        "{difficulty: easy}\n    seeds", "{}\n    seeds"
    )
    # TicTacToe-v0 is registered both ways: the single-agent registration is the one a suite plays
    assert load_suite(write(tmp_path, "tiny-v1.yaml", aec)).entries[1].env == "envgym/TicTacToe-v0"
    with pytest.raises(ConfigError, match=r"not valid YAML at line 4, column 1"):
        load_suite(write(tmp_path, "tiny-v1.yaml", "name: tiny\nversion: 1\nentries: [\n"))
    with pytest.raises(ConfigError, match=r"a suite file is a YAML mapping"):
        load_suite(write(tmp_path, "tiny-v1.yaml", "- just\n- a list\n"))
    with pytest.raises(ConfigError, match=r"missing required field 'entries'"):
        load_suite(write(tmp_path, "tiny-v1.yaml", "name: tiny\nversion: 1\n"))
    with pytest.raises(
        ConfigError, match=r"file name says 'tiny' version 2 .* holds name 'tiny' version 1; name the file tiny-v1.yaml"
    ):
        load_suite(write(tmp_path, "tiny-v2.yaml", TINY))
    with pytest.raises(ConfigError, match=r"file name says no id"):
        load_suite(write(tmp_path, "whatever.yaml", TINY))
