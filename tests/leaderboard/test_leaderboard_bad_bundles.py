"""Malformed bundles are refused with one clear line: by :func:`read_bundle`, by the server (400,
nothing stored) and by ``envgym leaderboard verify`` (exit 1, no traceback).

The cases are the ways a hostile or broken file can trip the JSON parser itself: nesting deep
enough to exhaust its recursion, numbers that overflow or are too long to convert, the NaN and
Infinity literals Python accepts but JSON does not, invalid UTF-8, and broken gzip.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_leaderboard_support import SUITE_ID, Server, bundles_fixture, runs_fixture, suite_dir_fixture  # noqa: F401 - fixtures
from typer.testing import CliRunner

from envgym.cli import app
from envgym.leaderboard.bundle import MAX_INT_DIGITS, Bundle, BundleError, bundle_bytes, read_bundle

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("sqlalchemy")

#: A manifest that passes the checks of line 1 (they run before line 2 is read).
GOOD_MANIFEST_LINE = json.dumps(
    {
        "format": "envgym-bundle/1",
        "suite": {"id": "lbtest-v1", "name": "lbtest", "version": "1", "sha256": "0" * 64},
        "suite_spec": {},
        "entries": [
            {"name": "a", "env_id": "envgym/FrozenLake-v0", "env_version": 0, "env_kwargs": {}, "max_turns": None}
        ],
        "agent": {"spec": "x", "name": "x"},
        "trials": 1,
        "episodes": 1,
        "content_hash": "0" * 64,
    }
).encode()

#: name -> (file bytes, a piece of the one-line reason).
CASES: dict[str, tuple[bytes, str]] = {
    "deep nesting": (gzip.compress(b"[" * 100_000 + b"\n"), "line 1 of the bundle nests arrays or objects too deeply"),
    "deep object nesting": (gzip.compress(b'{"a":' * 100_000 + b"\n"), "nests arrays or objects too deeply"),
    "deep nesting on an episode line": (
        gzip.compress(GOOD_MANIFEST_LINE + b"\n" + b"[" * 50_000 + b"]" * 50_000 + b"\n"),
        "line 2 of the bundle nests",
    ),
    "float overflow": (gzip.compress(b'{"total_reward": 1e999999}\n'), "1e999999 is too large for a float"),
    "100k-digit integer": (
        gzip.compress(b'{"seed": ' + b"7" * 100_000 + b"}\n"),
        f"an integer of 100000 digits is longer than the {MAX_INT_DIGITS} digits",
    ),
    "NaN literal": (gzip.compress(b'{"reward": NaN}\n'), "NaN is not a JSON number"),
    "Infinity literal": (gzip.compress(b'{"reward": [1, -Infinity]}\n'), "-Infinity is not a JSON number"),
    "invalid UTF-8": (gzip.compress(b'{"agent": "\xff\xfe"}\n'), "line 1 of the bundle is not valid UTF-8"),
    "not gzip": (b"PK\x03\x04 a zip file", "a bundle is a gzip file"),
    "truncated gzip": (gzip.compress(b'{"format": "envgym-bundle/1"}\n' * 200)[:-30], "truncated"),
    "damaged gzip": (b"\x1f\x8b\x08\x00" + b"\x00" * 6 + b"\xff" * 40, "gzip stream is damaged"),
}


def _one_line(reason: str) -> bool:
    return "\n" not in reason.strip() and len(reason) < 600


@pytest.mark.parametrize("name", sorted(CASES))
def test_read_bundle_refuses_with_one_line(name: str) -> None:
    data, expected = CASES[name]
    with pytest.raises(BundleError) as info:
        read_bundle(data)
    message = str(info.value)
    assert expected in message
    assert _one_line(message), message


def test_numbers_at_the_limits_still_parse(bundles: dict[str, Bundle]) -> None:
    """The hooks refuse only what they must: a real bundle, big finite floats and long-ish ints pass."""
    bundle = bundles["random"]
    assert read_bundle(bundle_bytes(bundle)).episodes == bundle.episodes
    edited = Bundle(dict(bundle.manifest), bundle.episodes)
    edited.manifest["agent"] = {
        **bundle.manifest["agent"],
        "metadata": {"big": 1e308, "long": 10 ** (MAX_INT_DIGITS - 1)},
    }
    back = read_bundle(bundle_bytes(edited.rehash()))
    assert back.manifest["agent"]["metadata"] == {"big": 1e308, "long": 10 ** (MAX_INT_DIGITS - 1)}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, suite_dir: Path) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("db") / "leaderboard.db", suite_dir)
    yield srv
    srv.stop()


def test_server_answers_400_and_stores_nothing(server: Server, bundles: dict[str, Bundle]) -> None:
    stored = httpx.post(
        server.url + "/api/submissions",
        content=bundle_bytes(bundles["random"]),
        headers={"Content-Type": "application/gzip"},
        timeout=120,
    )
    assert stored.status_code == 201, stored.text
    for name, (data, expected) in CASES.items():
        response = httpx.post(
            server.url + "/api/submissions", content=data, headers={"Content-Type": "application/gzip"}, timeout=60
        )
        assert response.status_code == 400, (name, response.status_code, response.text[:300])
        body = response.json()
        assert body["error"] == "malformed" and expected in body["reason"], (name, body)
        assert _one_line(body["reason"]), (name, body)
    board = httpx.get(f"{server.url}/api/suites/{SUITE_ID}/entries", timeout=10).json()
    assert [b["agent_name"] for b in board] == ["random baseline"]  # only the good upload
    assert server.proc.poll() is None  # still serving
    assert "Traceback" not in server.log.read_text()


@pytest.mark.parametrize(
    "name", ["deep nesting", "NaN literal", "100k-digit integer", "invalid UTF-8", "float overflow"]
)
def test_cli_verify_exits_1_with_the_reason(name: str, tmp_path: Path) -> None:
    data, expected = CASES[name]
    path = tmp_path / "bad.envgym.jsonl.gz"
    path.write_bytes(data)
    result = CliRunner().invoke(app, ["leaderboard", "verify", str(path)])
    assert result.exit_code == 1, result.output
    assert expected in " ".join(result.output.split())  # rich may wrap the line on a narrow terminal
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
