"""Hostile uploads: every bound of a bundle is checked before the work or the memory it bounds.

Real bench runs of the tiny test suite are bundled, then edited as an attacker would (and
rehashed, as anyone can): absurd counts (``trials`` = 10^99), fields of 100 MiB that compress to
a few hundred KB, screenshots that are not PNGs or claim huge sizes, dropped observations, over-long
actions, and episodes that wait out their time. Each is refused with a one-line reason, fast, and
without the memory a careless reader would spend; honest bundles still verify.

One fake, and why: the blocking environment of the kill test is a tiny plugin family written
into a temporary folder (a real ``envgym.environments`` entry point, found by the replay's child
process the way any installed plugin is), because no shipped environment blocks on purpose
without a sandbox.
"""

from __future__ import annotations

import base64
import copy
import gzip
import io
import json
import pickle
import struct
import sys
import time
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_leaderboard_support import SUITE_ID, bundles_fixture, runs_fixture, suite_dir_fixture  # noqa: F401 - fixtures

from envgym.errors import ConfigError, EnvgymError
from envgym.leaderboard.bundle import Bundle, BundleError, bundle_bytes, canonical_json, read_bundle
from envgym.leaderboard.suites import MAX_TRIALS, suite_is_sandboxed
from envgym.leaderboard.verify import VerificationError, VerifierUnavailable, VerifyConfig, verify_bundle

MiB = 1024 * 1024


def _edited(bundle: Bundle, edit: Callable[[Bundle], Any]) -> Bundle:
    changed = Bundle(copy.deepcopy(bundle.manifest), copy.deepcopy(bundle.episodes))
    edit(changed)
    return changed.rehash()


def _refused(data: bytes) -> tuple[BundleError, float, int]:
    """read_bundle's refusal, its time in CPU seconds and its peak of Python allocations in bytes.

    The time is this thread's CPU time: reading does no I/O and never waits, so it is the work done,
    which other jobs on a busy machine do not inflate (they stretch the wall clock many-fold).
    """
    tracemalloc.start()
    start = time.thread_time()
    try:
        with pytest.raises(BundleError) as info:
            read_bundle(data)
        elapsed = time.thread_time() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    message = str(info.value)
    assert "\n" not in message and len(message) < 600, message
    return info.value, elapsed, peak


def _png(width: int, height: int, extra: bytes = b"") -> str:
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    chunk = b"IHDR" + header
    png = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + chunk + struct.pack(">I", zlib.crc32(chunk)) + extra
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


# -- counts: bounded before anything is built from them ----------------------------------------------


def test_trials_of_ten_to_the_99_are_refused_at_once_with_flat_memory(bundles: dict[str, Bundle]) -> None:
    """The issue's upload: a 12 KB bundle claiming trials=2e5 cost 122 s and 2.26 GiB; 1e99 ran
    until memory ended. Refused now while the manifest line is read."""
    data = bundle_bytes(_edited(bundles["random"], lambda b: b.manifest.update(trials=10**99)))
    assert len(data) < 20_000
    err, elapsed, peak = _refused(data)
    assert err.status == 400 and "manifest.trials" in str(err) and "at most 1000" in str(err)
    assert elapsed < 0.1, elapsed
    assert peak < 2 * MiB, peak


def test_trials_beyond_what_the_suite_allows_are_rejected_before_the_episode_set_is_built(
    bundles: dict[str, Bundle],
) -> None:
    for trials in (MAX_TRIALS + 1, 200_000, 10**99):
        bundle = _edited(bundles["random"], lambda b, t=trials: b.manifest.update(trials=t))
        start = time.perf_counter()
        with pytest.raises(VerificationError, match=f"suite {SUITE_ID!r} allows 1 to {MAX_TRIALS}"):
            verify_bundle(bundle)
        assert time.perf_counter() - start < 2.0


def _manifest_edit(key: str, value: Any) -> Callable[[Bundle], None]:
    def edit(b: Bundle) -> None:
        b.manifest[key] = value

    return edit


def _entry_edit(**values: Any) -> Callable[[Bundle], None]:
    return lambda b: b.manifest["entries"][0].update(values)


def _agent_edit(**values: Any) -> Callable[[Bundle], None]:
    return lambda b: b.manifest["agent"].update(values)


#: name -> (edit, a piece of the one-line reason): each was stored and shown before.
BAD_MANIFESTS: dict[str, tuple[Callable[[Bundle], None], str]] = {
    "episodes of an entry 999999": (_entry_edit(episodes=999_999), "manifest.entries[0].episodes"),
    "negative text_cap": (_manifest_edit("text_cap", -7), "manifest.text_cap: expected an integer from 0"),
    "5,011-character created": (_manifest_edit("created", "2" * 5011), "manifest.created: expected an ISO 8601"),
    "created that is not a date": (_manifest_edit("created", "yesterday-ish"), "manifest.created"),
    "300-digit envgym_version": (_manifest_edit("envgym_version", "1" * 300), "manifest.envgym_version"),
    "git_commit that is not a hash": (_manifest_edit("git_commit", "<script>"), "manifest.git_commit"),
    "episodes as text": (_manifest_edit("episodes", "8"), "manifest.episodes"),
    "unknown manifest field": (_manifest_edit("payload", "x"), "unknown field(s) 'payload'"),
    "NUL in the agent name": (_agent_edit(name="gpt\x00"), "control or bidirectional-override character"),
    "terminal escape in the agent name": (_agent_edit(name="\x1b[31mred"), "control or bidirectional"),
    "bidi override in the agent name": (_agent_edit(name="abc\u202edcba"), "control or bidirectional"),
    "suite sha256 not hex": (lambda b: b.manifest["suite"].update(sha256="z" * 64), "manifest.suite"),
}


@pytest.mark.parametrize("name", sorted(BAD_MANIFESTS))
def test_every_manifest_field_is_validated(bundles: dict[str, Bundle], name: str) -> None:
    edit, expected = BAD_MANIFESTS[name]
    err, _, _ = _refused(bundle_bytes(_edited(bundles["random"], edit)))
    assert err.status == 400 and expected in str(err), str(err)


# -- sizes: a cap per field, 413, before the rest is read ----------------------------------------------


def _streamed_bundle(manifest: dict[str, Any], before: bytes, filler: bytes, count: int, after: bytes) -> bytes:
    """A gzip bundle whose line 1 is ``manifest`` and line 2 ``before + filler * count + after``,
    written a chunk at a time (the 100 MiB line never exists in memory here)."""
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=9) as gz:
        gz.write(canonical_json(manifest) + b"\n" + before)
        for _ in range(count):
            gz.write(filler)
        gz.write(after + b"\n")
    return raw.getvalue()


def test_100_mib_of_agent_metadata_is_refused_before_it_is_unpacked(bundles: dict[str, Bundle]) -> None:
    manifest = copy.deepcopy(bundles["random"].manifest)
    head, tail = canonical_json({**manifest, "agent": {**manifest["agent"], "metadata": {"notes": "@"}}}).split(b"@")
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=9) as gz:
        gz.write(head)
        for _ in range(100):
            gz.write(b"x" * MiB)
        gz.write(tail + b"\n")
    data = raw.getvalue()
    assert len(data) < 200_000  # ~100 KB on the wire
    err, elapsed, peak = _refused(data)
    assert err.status == 413 and "manifest (line 1) is longer than" in str(err)
    assert elapsed < 0.5, elapsed
    assert peak < 8 * MiB, peak


def test_100_mib_of_completion_text_is_refused_while_the_line_streams_in(bundles: dict[str, Bundle]) -> None:
    bundle = bundles["random"]
    episode = copy.deepcopy(bundle.episodes[0])
    episode["turns"][0]["completion"] = "@"
    head, tail = canonical_json(episode).split(b"@")
    data = _streamed_bundle(bundle.manifest, head, b"y" * MiB, 100, tail)
    assert len(data) < 200_000
    err, elapsed, peak = _refused(data)
    assert err.status == 413 and "line 2 of the bundle is longer than" in str(err)
    assert elapsed < 1.0, elapsed
    assert peak < 40 * MiB, peak  # the line cap (16 MiB) and one chunk, never the 100 MiB


@pytest.mark.parametrize("field", ["completion", "observation"])
def test_texts_longer_than_the_text_cap_are_413(bundles: dict[str, Bundle], field: str) -> None:
    def edit(b: Bundle) -> None:
        b.episodes[3]["turns"][0][field] = "z" * (b.manifest["text_cap"] + 500)

    err, _, _ = _refused(bundle_bytes(_edited(bundles["random"], edit)))
    assert err.status == 413 and f"episode on line 5, turn 0: {field} is" in str(err) and "text_cap" in str(err)


def test_oversized_metadata_actions_and_errors_are_413(bundles: dict[str, Bundle]) -> None:
    cases: list[tuple[Callable[[Bundle], None], str]] = [
        (lambda b: b.manifest["agent"].update(metadata={"notes": "m" * 20_000}), "manifest.agent.metadata is"),
        (lambda b: b.episodes[0]["turns"][0].update(action="a" * (300 * 1024)), "the action is 307200 characters"),
        (lambda b: b.episodes[0].update(errors=["e" * 70_000]), "errors is"),
        (lambda b: b.episodes[0]["turns"][0].update(padding="p" * 10), "unknown field(s) 'padding'"),
    ]
    for edit, expected in cases:
        err, _, _ = _refused(bundle_bytes(_edited(bundles["random"], edit)))
        assert expected in str(err), str(err)
        assert err.status == (400 if "unknown" in expected else 413)


def test_bundle_error_carries_its_status_across_processes() -> None:
    assert BundleError("bad").status == 400
    again = pickle.loads(pickle.dumps(BundleError("big", status=413)))
    assert isinstance(again, BundleError) and again.status == 413 and str(again) == "big"


# -- screenshots: PNG, dimensions from the header, bytes per image and per bundle ------------------------


def _with_shot(uri: str) -> Callable[[Bundle], None]:
    return lambda b: b.episodes[0]["turns"][0].update(screenshot=uri)


def test_screenshots_are_checked(bundles: dict[str, Bundle]) -> None:
    good = _edited(bundles["random"], _with_shot(_png(160, 210)))
    assert read_bundle(bundle_bytes(good)).episodes[0]["turns"][0]["screenshot"].startswith("data:image/png")
    cases = [
        ("data:image/png;base64," + base64.b64encode(b"GIF89a" + b"\0" * 40).decode(), 400, "is not a PNG"),
        ("data:image/png;base64,@@@@", 400, "not valid base64"),
        ("data:text/html;base64,PGgxPg==", 400, "data:image/png;base64"),
        (_png(100_000, 100_000), 413, "100000x100000 pixels"),
        (_png(4096, 4096), 413, "more than the 8388608 allowed"),
        (_png(100, 100, b"\0" * (3 * MiB)), 413, "more than the 2097152 allowed"),
    ]
    for uri, status, expected in cases:
        err, _, _ = _refused(bundle_bytes(_edited(bundles["random"], _with_shot(uri))))
        assert err.status == status and expected in str(err), str(err)


def test_screenshots_of_a_bundle_share_one_byte_cap(bundles: dict[str, Bundle]) -> None:
    from envgym.leaderboard.bundle import DEFAULT_LIMITS, BundleLimits

    assert DEFAULT_LIMITS.max_screenshots_bytes == 64 * MiB
    shot = _png(100, 100, b"\0" * (MiB + MiB // 2))

    def edit(b: Bundle) -> None:
        for episode in b.episodes:
            episode["turns"][0]["screenshot"] = shot

    data = bundle_bytes(_edited(bundles["random"], edit))
    assert len(read_bundle(data).episodes) == 8  # 12 MiB of screenshots: under the default cap
    with pytest.raises(BundleError, match="more than the 4194304 a bundle may carry") as info:
        read_bundle(data, limits=BundleLimits(max_screenshots_bytes=4 * MiB))
    assert info.value.status == 413 and "line 4" in str(info.value)  # the third screenshot passes the cap


# -- replay: observations, actions, infrastructure failures ----------------------------------------------


def test_a_dropped_or_non_text_observation_is_rejected(bundles: dict[str, Bundle]) -> None:
    for value, expected in ((None, "carries no observation"), ({"x": 1}, "not the one the environment shows")):
        bundle = _edited(bundles["oracle"], lambda b, v=value: b.episodes[2]["turns"][0].update(observation=v))
        with pytest.raises(VerificationError) as info:
            verify_bundle(bundle)
        assert expected in str(info.value) and info.value.turn == 0 and info.value.seed == bundle.episodes[2]["seed"]


def test_an_action_longer_than_its_environments_cap_is_refused_before_any_step(
    bundles: dict[str, Bundle], monkeypatch: pytest.MonkeyPatch
) -> None:
    import envgym.leaderboard.verify as verify

    bundle = _edited(bundles["random"], lambda b: b.episodes[-1]["turns"][0].update(action="fill(" + "a" * 20_000))
    made: list[str] = []
    real_make = verify.make
    monkeypatch.setattr(verify, "make", lambda env_id, **kw: made.append(env_id) or real_make(env_id, **kw))
    with pytest.raises(VerificationError, match="more than the 16384 this environment accepts") as info:
        verify_bundle(bundle, VerifyConfig(isolate=False))
    assert info.value.entry == "sokoban" and info.value.turn == 0 and made == []  # nothing was stepped

    # An environment may declare its own cap (a class attribute), smaller or larger.
    from envgym.environments.games.frozen_lake import FrozenLakeEnv

    monkeypatch.setattr(FrozenLakeEnv, "max_action_chars", 2, raising=False)
    verify._declared_cap.cache_clear()
    try:
        with pytest.raises(VerificationError, match="more than the 2 this environment accepts"):
            verify_bundle(bundles["random"], VerifyConfig(isolate=False))
    finally:
        verify._declared_cap.cache_clear()


def test_an_episode_over_its_time_limit_fails_verification_in_process(
    bundles: dict[str, Bundle], monkeypatch: pytest.MonkeyPatch
) -> None:
    from envgym.environments.games.sokoban import SokobanEnv

    real_step = SokobanEnv.step

    def slow_step(self: Any, action: str) -> Any:
        time.sleep(0.2)
        return real_step(self, action)

    monkeypatch.setattr(SokobanEnv, "step", slow_step)
    config = VerifyConfig(isolate=False, episode_timeout_s=0.3, budget_s=60)
    with pytest.raises(VerificationError, match=r"took more than 0.3 s, the limit per episode") as info:
        verify_bundle(bundles["random"], config)
    assert info.value.entry == "sokoban" and info.value.turn is not None

    # Each episode within its limit, the bundle over its budget.
    real_reset = SokobanEnv.reset

    def slow_reset(self: Any, **kwargs: Any) -> Any:
        time.sleep(0.2)
        return real_reset(self, **kwargs)

    monkeypatch.setattr(SokobanEnv, "step", real_step)
    monkeypatch.setattr(SokobanEnv, "reset", slow_reset)
    with pytest.raises(VerificationError, match="budget of 0.5 s of wall-clock time"):
        verify_bundle(bundles["random"], VerifyConfig(isolate=False, episode_timeout_s=0.35, budget_s=0.5))


SLEEPY_MODULE = '''
import time

import gymnasium as gym

from envgym.registration import EnvSpec


class Sleepy(gym.Env):
    """Sleeps as long as its action says: stands in for a sandboxed command that waits out its timeout."""

    observation_space = gym.spaces.Text(100)
    action_space = gym.spaces.Text(100)

    def __init__(self, split="test"):
        self.split = split

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "ready", {"task": {"id": f"sleepy-{seed}"}}

    def step(self, action):
        if action.startswith("sleep "):
            time.sleep(float(action.split()[1]))
        return "slept", 0.0, action == "stop", False, {"reward_components": {}}


SPECS = [EnvSpec(id="sleepy/Sleepy-v0", entry_point="envgym_sleepy:Sleepy", family="sleepy")]
'''


def _sleepy_bundle(suite_dir: Path, plugin: Path) -> Bundle:
    """A bundle of the sleepy suite: one episode whose first action sleeps 1000 s."""
    from envgym.bench.suite import load_suite

    (plugin / "envgym_sleepy.py").write_text(SLEEPY_MODULE, encoding="utf-8")
    dist = plugin / "envgym_sleepy-0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: envgym-sleepy\nVersion: 0.0\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text("[envgym.environments]\nsleepy = envgym_sleepy\n", encoding="utf-8")
    path = suite_dir / "sleepy-v1.yaml"
    path.write_text(
        "name: sleepy\nversion: 1\ndefaults: {trials: 1, split: test}\n"
        "entries:\n  - {name: nap, env: sleepy/Sleepy-v0, seeds: [1], max_turns: 5}\n",
        encoding="utf-8",
    )
    suite = load_suite(path, check_envs=False)
    turn = {"action": "sleep 1000", "reward": 0.0, "reward_components": {}, "action_valid": True,
            "terminated": False, "truncated": False, "observation": "ready"}  # fmt: skip
    episode = {"entry": "nap", "seed": 1, "trial": 0, "index": 0, "task_id": "sleepy-1", "scored": True,
               "termination_reason": "failure", "success": False, "total_reward": 0.0, "reward_components": {},
               "num_turns": 1, "turns": [turn]}  # fmt: skip
    manifest = {
        "format": "envgym-bundle/1",
        "suite": {"id": suite.id, "name": suite.name, "version": str(suite.version), "sha256": suite.sha256},
        "suite_spec": suite.to_dict(),
        "entries": [{"name": "nap", "env_id": "sleepy/Sleepy-v0", "env_version": 0, "env_kwargs": {"split": "test"},
                     "max_turns": 5, "episodes": 1}],  # fmt: skip
        "agent": {"spec": "sleeper", "name": "sleeper"},
        "trials": 1,
        "episodes": 1,
        "text_cap": 2000,
    }
    return Bundle(manifest, [episode]).rehash()


def test_a_blocked_replay_is_killed_at_its_episode_limit(
    suite_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's SWE upload slept 1000 s per turn and was ranked after 280 s. A replay that
    blocks inside a step is in a child process, killed at the episode limit (plus a short grace)."""
    from envgym import registration
    from envgym.registration import EnvSpec

    plugin = tmp_path / "plugin"
    plugin.mkdir()
    # Known here for this test only; the spawned replay process finds the plugin on its own path.
    sleepy = EnvSpec(id="sleepy/Sleepy-v0", entry_point="envgym_sleepy:Sleepy", family="sleepy")
    monkeypatch.setitem(registration._single, sleepy.id, sleepy)
    monkeypatch.syspath_prepend(str(plugin))
    monkeypatch.setenv("PYTHONPATH", f"{plugin}:{':'.join(sys.path)}")
    bundle = _sleepy_bundle(suite_dir, plugin)
    start = time.perf_counter()
    with pytest.raises(VerificationError, match="took more than 1 s, the limit per episode") as info:
        verify_bundle(bundle, VerifyConfig(isolate=True, episode_timeout_s=1, budget_s=30))
    elapsed = time.perf_counter() - start
    assert (info.value.entry, info.value.seed, info.value.trial) == ("nap", 1, 0)
    assert elapsed < 30, elapsed  # not 1000 s: the child was killed
    start = time.perf_counter()
    with pytest.raises(VerificationError, match="budget of 2 s of wall-clock time"):
        verify_bundle(bundle, VerifyConfig(isolate=True, episode_timeout_s=2, budget_s=2))
    assert time.perf_counter() - start < 30


def test_an_environment_the_verifier_cannot_make_is_its_own_failure(
    bundles: dict[str, Bundle], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A browser that does not launch, a sandbox backend missing: 503 and retry, never a rejection."""
    import envgym.leaderboard.verify as verify

    def broken(env_id: str, **kwargs: Any) -> Any:
        raise OSError("the browser did not launch")

    monkeypatch.setattr(verify, "make", broken)
    with pytest.raises(VerifierUnavailable, match="retry later") as info:
        verify_bundle(bundles["oracle"], VerifyConfig(isolate=False))
    assert isinstance(info.value, EnvgymError) and not isinstance(info.value, VerificationError)
    assert pickle.loads(pickle.dumps(info.value)).retry_after_s == info.value.retry_after_s


def test_verify_config_limits_are_validated() -> None:
    for kwargs in (
        {"episode_timeout_s": 0},
        {"budget_s": -1},
        {"budget_s": float("inf")},
        {"cpu_budget_s": "10"},
        {"max_action_chars": 0},
        {"isolate": "yes"},
    ):
        with pytest.raises(ConfigError):
            VerifyConfig(**kwargs)
    config = VerifyConfig(budget_s=50)
    assert config.cpu_budget == 50 and VerifyConfig(budget_s=50, cpu_budget_s=5).cpu_budget == 5


def test_sandboxed_suites_are_told_apart(suite_dir: Path) -> None:
    from envgym.bench.suite import load_suite

    root = Path(__file__).resolve().parents[2] / "benchmarks"
    assert suite_is_sandboxed(load_suite(root / "swe-v1.yaml", check_envs=False)) is True
    assert suite_is_sandboxed(load_suite(root / "core-v1.yaml", check_envs=False)) is False
    assert suite_is_sandboxed(load_suite(suite_dir / f"{SUITE_ID}.yaml", check_envs=False)) is False
    assert suite_is_sandboxed("no-such-suite-v9") is False
    from envgym.leaderboard import verify

    assert verify.suite_is_sandboxed is suite_is_sandboxed
    assert json.loads(json.dumps(sorted(verify.__all__)))  # exported by name


def test_a_lone_surrogate_escape_is_refused_and_a_pair_is_text() -> None:
    # a lone \ud800 in stored text could not be encoded by the pages or the JSON answers (a 500)
    with pytest.raises(BundleError, match="lone UTF-16 surrogate") as caught:
        read_bundle(gzip.compress(b'{"format": "envgym-bundle/1", "agent": "x\\ud800y"}\n'))
    assert caught.value.status == 400
    with pytest.raises(BundleError) as other:  # a pair decodes to text: refused for other reasons only
        read_bundle(gzip.compress(b'{"format": "envgym-bundle/1", "agent": "x\\ud83d\\ude00y"}\n'))
    assert "surrogate" not in str(other.value)
