"""Run folders after a crash: every shape a damaged last line of ``episodes.jsonl`` can take is
repaired on resume (cut away, its episode played again, nothing duplicated); the same damage on an
earlier line, which no crash leaves, is refused with ``line N of PATH is damaged`` (an envgym
error, no traceback from json or the UTF-8 decoder); whole files are replaced atomically.

The ``kill -9`` tests of the real commands are in ``test_rundir_kill.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from crash_points import Killed, dies_at

from envgym.errors import ConfigError
from envgym.rollout import RunConfig, Runner, load_trajectories, make_agent
from envgym.rollout.records import Trajectory

ROOT = Path(__file__).resolve().parents[2]
ENV = "envgym/FrozenLake-v0"
EPISODES = 4


def _run(out: Path) -> list[Trajectory]:
    config = RunConfig(env_id=ENV, agent="random:3", episodes=EPISODES, seed=5, max_turns=8)
    return Runner(config, make_agent("random:3"), out=out).run().trajectories


@pytest.fixture(scope="module")
def straight(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[bytes]]:
    """An uninterrupted run: its folder and its record lines (newlines kept)."""
    out = tmp_path_factory.mktemp("straight") / "run"
    _run(out)
    lines = (out / "episodes.jsonl").read_bytes().splitlines(keepends=True)
    assert len(lines) == EPISODES
    return out, lines


def _with(line: bytes, **changes: object) -> bytes:
    """``line`` (a record) with some fields changed, as ``RunFolder.append`` would write it."""
    data = json.loads(line)
    data.update(changes)
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def _torn_in_multibyte(line: bytes) -> bytes:
    # The record with a non-ASCII observation, cut between the bytes of its "✓" (3 bytes in UTF-8).
    whole = _with(line, final_observation="goal reached \u2713 (\u00e9t\u00e9)")
    cut = whole.index("\u2713".encode()) + 1
    return whole[:cut]


#: A damaged record line, by what a crash (or a disk) can leave; each takes the intact line.
DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "torn in ASCII": lambda line: line[: len(line) // 2],
    "torn inside a multibyte character": _torn_in_multibyte,
    "torn just before its newline": lambda line: line.rstrip(b"\n"),
    "not UTF-8": lambda line: line[:20] + b"\xff\xfe" + line[22:],
    "NUL bytes (a power cut)": lambda line: b"\x00" * len(line),
    "an empty object": lambda line: b"{}\n",
    "a list": lambda line: b"[1,2]\n",
    "null": lambda line: b"null\n",
    "a string": lambda line: b'"episode"\n',
    "an index that is text": lambda line: _with(line, index="3"),
    "an index that is a bool": lambda line: _with(line, index=True),
    "an unknown termination reason": lambda line: _with(line, termination_reason="exploded"),
    "turns that are not objects": lambda line: _with(line, turns=[1, 2]),
    "a turn without its fields": lambda line: _with(line, turns=[{}]),
}


def _damaged_folder(straight: tuple[Path, list[bytes]], tmp_path: Path, damage: str, line_number: int) -> Path:
    """A copy of the straight run with record ``line_number`` (1-based) replaced by ``damage``,
    and without its summary (the run did not finish)."""
    source, lines = straight
    out = tmp_path / "run"
    out.mkdir()
    for name in ("config.json", "meta.json"):
        (out / name).write_bytes((source / name).read_bytes())
    kept = list(lines)
    kept[line_number - 1] = DAMAGE[damage](lines[line_number - 1])
    if line_number == len(kept):
        (out / "episodes.jsonl").write_bytes(b"".join(kept))
    else:  # a damaged line before the last one: it still ends where the next one starts
        middle = kept[line_number - 1]
        kept[line_number - 1] = middle if middle.endswith(b"\n") else middle + b"\n"
        (out / "episodes.jsonl").write_bytes(b"".join(kept))
    return out


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_last_line_is_cut_away_and_its_episode_played_again(
    straight: tuple[Path, list[bytes]], tmp_path: Path, damage: str
) -> None:
    out = _damaged_folder(straight, tmp_path, damage, EPISODES)
    readers_view = load_trajectories(out)  # a reader (report, bundle) skips the damaged line, changing nothing
    assert [t.index for t in readers_view] == list(range(EPISODES - 1))
    resumed = _run(out)
    _, lines = straight
    rows = (out / "episodes.jsonl").read_bytes().splitlines()
    assert len(rows) == EPISODES  # the damaged line is gone, not kept beside its replacement
    assert sorted(json.loads(row)["index"] for row in rows) == list(range(EPISODES))
    straight_records = sorted((Trajectory.from_dict(json.loads(line)) for line in lines), key=lambda t: t.index)
    expected = [t.comparable() for t in straight_records]  # (the file is in the order episodes ended)
    assert [t.comparable() for t in resumed] == expected
    assert [t.comparable() for t in load_trajectories(out)] == expected
    meta = json.loads((out / "meta.json").read_text())
    assert meta["sessions"][-1]["resumed_from"] == EPISODES - 1


#: With the next record after it, a line cut just before its newline is a whole line again.
MIDDLE_DAMAGE = [name for name in DAMAGE if name != "torn just before its newline"]


@pytest.mark.parametrize("damage", MIDDLE_DAMAGE)
def test_a_damaged_line_before_the_last_is_refused_with_its_number(
    straight: tuple[Path, list[bytes]], tmp_path: Path, damage: str
) -> None:
    out = _damaged_folder(straight, tmp_path, damage, 2)
    before = (out / "episodes.jsonl").read_bytes()
    path = out / "episodes.jsonl"
    with pytest.raises(ConfigError, match=f"line 2 of {path} is damaged: "):
        _run(out)
    with pytest.raises(ConfigError, match="line 2 of"):
        load_trajectories(out)
    assert (out / "episodes.jsonl").read_bytes() == before  # refused, never "repaired"


def test_the_cli_refuses_a_damaged_folder_in_one_line(straight: tuple[Path, list[bytes]], tmp_path: Path) -> None:
    out = _damaged_folder(straight, tmp_path, "torn inside a multibyte character", 2)
    args = ["run", ENV, "--agent", "random:3", "-n", str(EPISODES), "--seed", "5", "--max-turns", "8"]
    done = subprocess.run(
        [sys.executable, "-m", "envgym.cli", *args, "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    text = " ".join(done.stderr.split())
    assert f"line 2 of {out / 'episodes.jsonl'} is damaged: it is not UTF-8 text" in text
    assert "Traceback" not in done.stderr


def test_a_record_from_a_newer_envgym_is_refused_not_cut(straight: tuple[Path, list[bytes]], tmp_path: Path) -> None:
    out = _damaged_folder(straight, tmp_path, "torn in ASCII", EPISODES)
    _, lines = straight
    newer = b"".join(lines[:-1]) + _with(lines[-1], record_version=99)
    (out / "episodes.jsonl").write_bytes(newer)
    with pytest.raises(ConfigError, match="record_version 99 is newer"):
        _run(out)
    assert (out / "episodes.jsonl").read_bytes() == newer  # another envgym's episode is not "repaired" away


def test_trajectory_from_dict_names_what_is_wrong() -> None:
    with pytest.raises(ConfigError, match="expected an episode .* got list"):
        Trajectory.from_dict([1, 2])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="lacks the fields episode_id, index"):
        Trajectory.from_dict({})
    good = Trajectory(episode_id="000000", index=0, env_id=ENV, seed=1, agent="a").to_dict()
    with pytest.raises(ConfigError, match="'seed' must be int or null, got 'one'"):
        Trajectory.from_dict({**good, "seed": "one"})
    assert Trajectory.from_dict(good).to_dict() == good


def test_a_kill_at_any_write_of_a_run_resumes_to_the_same_run(
    straight: tuple[Path, list[bytes]], tmp_path: Path
) -> None:
    _, lines = straight
    expected = sorted((Trajectory.from_dict(json.loads(line)).comparable() for line in lines), key=lambda t: t["index"])
    with dies_at(None, tmp_path) as writes:
        _run(tmp_path / "counted")
    assert len(writes) == EPISODES + 3, writes  # config, meta, the records, the summary
    for point, write in enumerate(writes):
        out = tmp_path / f"killed-{point}"
        with pytest.raises(Killed), dies_at(point, out):
            _run(out)
        resumed = _run(out)  # the same command again
        assert [t.comparable() for t in resumed] == expected, write
        rows = (out / "episodes.jsonl").read_bytes().splitlines()
        assert sorted(json.loads(row)["index"] for row in rows) == list(range(EPISODES)), write
        assert json.loads((out / "summary.json").read_text())["episodes"] == EPISODES, write
