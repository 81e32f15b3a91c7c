"""The leaderboard server for real: ``envgym leaderboard serve`` (uvicorn) on loopback, a SQLite file.

50 concurrent uploads (distinct and identical bundles), oversized and malformed uploads, tampered
bundles, the JSON API, and a restart on the same database file.
"""

from __future__ import annotations

import copy
import gzip
import json
import random
import socket
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from test_leaderboard_support import SUITE_ID, Server, bundles_fixture, runs_fixture, suite_dir_fixture  # noqa: F401 - fixtures

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("sqlalchemy")

from envgym.leaderboard.bundle import Bundle, bundle_bytes

MAX_UPLOAD = 256 * 1024  # --max-upload-mb 0.25


@pytest.fixture(scope="module")
def db_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("db") / "leaderboard.db"


@pytest.fixture(scope="module")
def server(db_file: Path, suite_dir: Path) -> Iterator[Server]:
    # 50 uploads at once from one address: room in the verify queue and the anonymous window.
    srv = Server(
        db_file, suite_dir, "--max-upload-mb", "0.25", "--verify-queue", "64", "--anonymous-uploads-per-minute", "1000"
    )
    yield srv
    srv.stop()


def _variant(bundle: Bundle, name: str) -> bytes:
    changed = Bundle(copy.deepcopy(bundle.manifest), bundle.episodes)
    changed.manifest["agent"]["name"] = name
    changed.manifest["agent"]["spec"] = f"variant:{name}"  # another agent: the same run is ranked once
    return bundle_bytes(changed.rehash())


def _post(url: str, data: bytes, **kwargs: Any) -> httpx.Response:
    headers = {"Content-Type": "application/gzip"}
    return httpx.post(url + "/api/submissions", content=data, headers=headers, timeout=120, **kwargs)


def _count(url: str) -> int:
    board = httpx.get(f"{url}/api/suites/{SUITE_ID}/entries", timeout=10).json()
    return len(board)


def test_50_concurrent_submissions_lose_nothing_and_duplicate_nothing(
    server: Server, bundles: dict[str, Bundle]
) -> None:
    before = _count(server.url)
    distinct = {
        f"agent-{i:02d}": _variant(bundles["random" if i % 2 else "oracle"], f"agent-{i:02d}") for i in range(20)
    }
    uploads = list(distinct.items())
    rng = random.Random(7)
    uploads += [rng.choice(uploads[:5]) for _ in range(30)]  # 30 identical copies of 5 of them
    rng.shuffle(uploads)
    assert len(uploads) == 50

    def send(item: tuple[str, bytes]) -> tuple[str, int, dict[str, Any]]:
        with httpx.Client(timeout=120) as client:
            response = client.post(
                server.url + "/api/submissions", content=item[1], headers={"Content-Type": "application/gzip"}
            )
        return item[0], response.status_code, response.json()

    with ThreadPoolExecutor(50) as pool:
        results = list(pool.map(send, uploads))
    statuses = Counter(status for _, status, _ in results)
    assert set(statuses) <= {200, 201}, results
    assert statuses[201] == len(distinct)  # each distinct bundle created exactly once
    ids: dict[str, set[int]] = {}
    for name, _, body in results:
        assert body["submission"]["agent_name"] == name
        ids.setdefault(name, set()).add(body["submission"]["id"])
    assert all(len(v) == 1 for v in ids.values())  # identical uploads all point at one row
    assert len({next(iter(v)) for v in ids.values()}) == len(distinct)
    assert _count(server.url) == before + len(distinct)


def test_resubmitting_reports_the_existing_entry(server: Server, bundles: dict[str, Bundle]) -> None:
    data = _variant(bundles["oracle"], "resubmitted")
    first = _post(server.url, data)
    second = _post(server.url, data)
    assert first.status_code == 201 and first.json()["status"] == "created"
    assert second.status_code == 200 and second.json()["status"] == "exists"
    assert second.json()["submission"]["id"] == first.json()["submission"]["id"]


def test_multipart_upload(server: Server, bundles: dict[str, Bundle]) -> None:
    data = _variant(bundles["random"], "multipart upload")
    response = httpx.post(
        server.url + "/api/submissions", files={"bundle": ("run.envgym.jsonl.gz", data, "application/gzip")}, timeout=60
    )
    assert response.status_code == 201, response.text
    sub = response.json()["submission"]
    assert sub["agent_name"] == "multipart upload" and sub["episodes"] == 8
    wrong_field = httpx.post(
        server.url + "/api/submissions",
        data={"bundle": "text, not a file"},
        files={"notes": ("notes.txt", b"hello", "text/plain")},
        timeout=60,
    )
    assert wrong_field.status_code == 400 and "must be a file" in wrong_field.json()["reason"]


def test_oversized_uploads_get_413_and_store_nothing(server: Server) -> None:
    before = _count(server.url)
    big = gzip.compress(random.Random(1).randbytes(MAX_UPLOAD + 10_000), compresslevel=0)
    response = _post(server.url, big)
    assert response.status_code == 413
    assert response.json() == {
        "error": "too_large",
        "reason": f"the upload is larger than the {MAX_UPLOAD} bytes this server accepts.",
    }
    # Without a Content-Length (chunked), the limit is checked while the body streams in: the server
    # answers 413 once it has read past the limit, while the client has not finished sending.
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(
            b"POST /api/submissions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/gzip\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b"x" * 65536
        for _ in range(MAX_UPLOAD // len(chunk) + 2):
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        reply = sock.recv(65536)  # the body is not terminated: only an early answer can arrive
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    assert _count(server.url) == before


def test_malformed_uploads_get_400_with_the_reason(server: Server, bundles: dict[str, Bundle]) -> None:
    before = _count(server.url)
    cases = {
        b"": "empty",
        b"hello, not gzip": "gzip file",
        gzip.compress(b"{not json\n"): "not valid JSON",
        bundle_bytes(bundles["random"])[:-40]: "truncated",
        gzip.compress(b'{"format": "envgym-bundle/9"}\n'): "format 'envgym-bundle/1'",
    }
    for data, reason in cases.items():
        response = _post(server.url, data)
        assert response.status_code == 400, (data[:20], response.text)
        assert response.json()["error"] == "malformed" and reason in response.json()["reason"]
    assert _count(server.url) == before


def test_tampered_uploads_get_422_with_the_verification_reason(server: Server, bundles: dict[str, Bundle]) -> None:
    before = _count(server.url)
    raised = Bundle(copy.deepcopy(bundles["random"].manifest), copy.deepcopy(bundles["random"].episodes))
    episode = next(e for e in raised.episodes if not e["success"])
    episode["turns"][-1]["reward"] = 5.0
    response = _post(server.url, bundle_bytes(raised.rehash()))
    assert response.status_code == 422
    body = response.json()
    assert body["error"] == "rejected"
    assert f"entry {episode['entry']!r}, seed {episode['seed']}, trial {episode['trial']}" in body["reason"]
    assert "claimed reward 5.0" in body["reason"]
    hash_edit = Bundle(copy.deepcopy(bundles["oracle"].manifest), bundles["oracle"].episodes)
    hash_edit.manifest["agent"]["name"] = "edited after hashing"
    response = _post(server.url, bundle_bytes(hash_edit))
    assert response.status_code == 422 and "content hash mismatch" in response.json()["reason"]
    assert _count(server.url) == before


def test_json_api(server: Server, bundles: dict[str, Bundle]) -> None:
    created = _post(server.url, _variant(bundles["oracle"], "api check")).json()["submission"]
    suites = httpx.get(server.url + "/api/suites").json()
    assert [s["id"] for s in suites] == [SUITE_ID]
    board = httpx.get(f"{server.url}/api/suites/{SUITE_ID}/entries").json()
    assert [b["rank"] for b in board] == list(range(1, len(board) + 1))
    rates = [b["success_rate"] for b in board]
    assert rates == sorted(rates, reverse=True)
    entry = httpx.get(f"{server.url}/api/entries/{created['id']}").json()
    assert entry["agent_name"] == "api check" and [e["entry"] for e in entry["entries"]] == ["frozenlake", "sokoban"]
    episodes = httpx.get(f"{server.url}/api/entries/{created['id']}/episodes").json()
    assert len(episodes) == 8 and "turns" not in episodes[0]
    one = httpx.get(f"{server.url}/api/entries/{created['id']}/episodes/3").json()
    assert [t["action"] for t in one["turns"]] == [t["action"] for t in bundles["oracle"].episodes[3]["turns"]]
    assert httpx.get(f"{server.url}/api/entries/999999").status_code == 404
    assert httpx.get(f"{server.url}/api/entries/{created['id']}/episodes/99").status_code == 404
    page = httpx.get(f"{server.url}/suites/{SUITE_ID}")
    assert page.status_code == 200 and "api check" in page.text and "<svg" in page.text


def test_cli_submit_uploads_to_the_server(server: Server, runs: dict[str, Path], tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from envgym.cli import app

    args = ["leaderboard", "submit", str(runs["oracle"]), "--name", "uploaded by cli", "--url", server.url]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "b.gz"), "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["status"] == "created" and document["submission"]["agent_name"] == "uploaded by cli"
    assert httpx.get(f"{server.url}/api/entries/{document['submission']['id']}").json()["success_rate"] == 1.0
    refused = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "c.gz"), "--url", "http://127.0.0.1:9"])
    assert refused.exit_code == 1 and "could not reach" in refused.output


def test_restart_on_the_same_file_keeps_every_entry(
    server: Server, db_file: Path, suite_dir: Path, bundles: dict[str, Bundle]
) -> None:
    _post(server.url, _variant(bundles["random"], "before restart"))
    board = httpx.get(f"{server.url}/api/suites/{SUITE_ID}/entries").json()
    server.stop()
    restarted = Server(db_file, suite_dir, "--anonymous-uploads-per-minute", "1000")
    try:
        again = httpx.get(f"{restarted.url}/api/suites/{SUITE_ID}/entries").json()
        assert [(b["id"], b["content_hash"], b["success_rate"]) for b in again] == [
            (b["id"], b["content_hash"], b["success_rate"]) for b in board
        ]
        assert "before restart" in {b["agent_name"] for b in again}
    finally:
        restarted.stop()
