"""The leaderboard server against hostile uploads and hostile clients, over a real uvicorn on loopback.

Each test is one attack class of issue 33 (the server half): verification that starves the pages,
a full verify queue, an upload past its time or memory budget, anonymous upload floods, deletes,
out-of-range ids that used to cost a 500 and the connection, huge columns on list pages, terminal
escapes in names, DNS rebinding and cross-site requests, a hidden entry revealed by re-uploading
it, and tokens on command lines.

The server runs in this process (``uvicorn.Server`` in a thread) so that the toy environment whose
``sleep X`` action makes a replay slow (``tests/support/pool_toy_envs.py``) is registered where the
upload's child process inherits it from; verification still runs in real child processes.
"""

from __future__ import annotations

import copy
import http.client
import json
import os
import socket
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from test_leaderboard_support import SUITE_ID, bundles_fixture, runs_fixture, suite_dir_fixture  # noqa: F401 - fixtures
from typer.testing import CliRunner

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")
pytest.importorskip("sqlalchemy")

from envgym.cli import app as cli_app
from envgym.leaderboard.app import PoolConfig, beyond_loopback, create_app
from envgym.leaderboard.bundle import Bundle, bundle_bytes, make_bundle
from envgym.leaderboard.pages import plain
from envgym.leaderboard.store import Store
from envgym.leaderboard.verify import VerifyConfig

SUPPORT = Path(__file__).resolve().parent.parent / "support"
GZIP = {"Content-Type": "application/gzip"}
SLOW_ID = "lbslow-v1"
SLOW_SUITE = """\
# Replays of a toy env whose `sleep X` and `eat N` actions make a replay as slow or as hungry as a
# bundle wants.
name: lbslow
version: 1
description: slow replays
defaults: {episodes: 4, split: train, trials: 1}
entries:
  - name: crash
    env: lbtoy/Hungry-v0
    seeds: {start: 0, count: 4}
    max_turns: 6
"""
SANDBOXED_SUITE = """\
name: lbswe
version: 1
description: a suite whose replay runs shell commands
defaults: {episodes: 1, split: test, trials: 1}
entries:
  - name: swe
    env: envgym/SWE-v0
    seeds: [0]
    max_turns: 5
"""


# -- a real uvicorn in this process ----------------------------------------------------------------


class LiveServer:
    """``create_app(...)`` served by uvicorn on a free loopback port, in a thread of this process."""

    def __init__(self, app: Any) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.app = app
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)


@contextmanager
def serve(db: Path, **kwargs: Any) -> Iterator[LiveServer]:
    server = LiveServer(create_app(db, **kwargs))
    try:
        yield server
    finally:
        server.stop()


def _variant(bundle: Bundle, name: str, edit: Any = None) -> bytes:
    changed = Bundle(copy.deepcopy(bundle.manifest), copy.deepcopy(bundle.episodes))
    changed.manifest["agent"]["name"] = name
    changed.manifest["agent"]["spec"] = f"variant:{name}"  # another agent: the same run is ranked once
    if edit is not None:
        edit(changed)
    return bundle_bytes(changed.rehash())


def _post(url: str, data: bytes, headers: dict[str, str] | None = None, timeout: float = 120) -> Any:
    return httpx.post(url + "/api/submissions", content=data, headers={**GZIP, **(headers or {})}, timeout=timeout)


# -- fixtures --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def toy() -> Iterator[None]:
    sys.path.insert(0, str(SUPPORT))
    import gymnasium
    import hostile_toy_envs

    from envgym import registration

    hostile_toy_envs.register_toy()
    yield
    # The registry has no public "unregister": clean up the private tables this module filled.
    registration._single.pop(hostile_toy_envs.HUNGRY_ID, None)
    gymnasium.registry.pop(hostile_toy_envs.HUNGRY_ID, None)
    sys.path.remove(str(SUPPORT))


@pytest.fixture(scope="module")
def slow_bundle(suite_dir: Path, toy: None, tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    """A random agent's bundle of the toy suite: ``tick`` steps, turned into ``sleep X`` below."""
    from envgym.bench.run import run_suite

    (suite_dir / f"{SLOW_ID}.yaml").write_text(SLOW_SUITE, encoding="utf-8")
    (suite_dir / "lbswe-v1.yaml").write_text(SANDBOXED_SUITE, encoding="utf-8")
    out = tmp_path_factory.mktemp("slow") / "run"
    run_suite(suite_dir / f"{SLOW_ID}.yaml", "random", out=out, num_envs=1)
    bundle = make_bundle(out, name="slow")
    assert sum(t["action"] == "tick" for e in bundle.episodes for t in e["turns"]) >= 1
    return bundle


def _slowed(bundle: Bundle, name: str, seconds: float, action: str = "sleep") -> bytes:
    """The bundle with its ``tick`` actions as ``sleep S`` (or ``eat S``): the same transitions,
    replayed in about ``seconds`` (the claims were made by the fast action, as an attacker makes
    them)."""
    ticks = sum(t["action"] == "tick" for e in bundle.episodes for t in e["turns"])
    each = seconds / ticks if action == "sleep" else seconds

    def edit(changed: Bundle) -> None:
        for episode in changed.episodes:
            for turn in episode["turns"]:
                if turn["action"] == "tick":
                    turn["action"] = f"{action} {each:.3f}"

    return _variant(bundle, name, edit)


@pytest.fixture()
def db_file(tmp_path: Path) -> Path:
    return tmp_path / "board.db"


# -- 1. verification apart from the pages, a bounded queue, a deadline ------------------------------


def test_pages_answer_while_slow_uploads_verify_and_a_full_queue_answers_503(
    db_file: Path, slow_bundle: Bundle, bundles: dict[str, Bundle]
) -> None:
    pool = PoolConfig(workers=2, queue=2, timeout_s=120)
    with serve(db_file, pool=pool, anonymous_uploads_per_minute=1000) as server:
        assert _post(server.url, _variant(bundles["oracle"], "fast")).status_code == 201
        uploads = [_slowed(slow_bundle, f"slow {i:02d}", 4.0) for i in range(16)]
        latencies: list[float] = []
        errors: list[str] = []
        done = threading.Event()

        def read() -> None:
            with httpx.Client(timeout=30) as client:
                while not done.is_set():
                    for path in ("/api/suites", "/", f"/suites/{SUITE_ID}"):
                        start = time.monotonic()
                        try:
                            response = client.get(server.url + path)
                            if response.status_code != 200:
                                errors.append(f"{path}: {response.status_code}")
                        except httpx.HTTPError as err:
                            errors.append(f"{path}: {err!r}")
                        latencies.append(time.monotonic() - start)
                    time.sleep(0.05)

        reader = threading.Thread(target=read)
        reader.start()
        try:
            with ThreadPoolExecutor(len(uploads)) as executor:
                answers = list(executor.map(lambda data: _post(server.url, data), uploads))
        finally:
            done.set()
            reader.join()
    statuses = [a.status_code for a in answers]
    busy = [a for a in answers if a.status_code == 503]
    # 2 verifying + 2 waiting: the other uploads are turned away at once, with a time to retry.
    assert statuses.count(201) <= pool.workers + pool.queue and len(busy) >= len(uploads) - 6, statuses
    assert set(statuses) <= {201, 503}, [a.text for a in answers]
    for answer in busy:
        assert answer.json()["error"] == "busy" and 1 <= int(answer.headers["retry-after"]) <= 600
    # Pages never waited on a verification (before: 45 slow uploads made /api/suites take 57.7 s).
    assert not errors, errors[:5]
    assert len(latencies) >= 10 and max(latencies) < 2.0, sorted(latencies)[-5:]


def test_an_upload_past_its_time_budget_is_stopped_and_its_processes_killed(
    db_file: Path, slow_bundle: Bundle
) -> None:
    pool = PoolConfig(workers=1, queue=0, timeout_s=2.0)
    # The replay's own budget is left long: the pool's deadline must stop it.
    with serve(db_file, pool=pool, verify_config=VerifyConfig(), anonymous_uploads_per_minute=1000) as server:
        start = time.monotonic()
        answer = _post(server.url, _slowed(slow_bundle, "past its budget", 60.0))
        took = time.monotonic() - start
        assert answer.status_code == 422 and answer.json()["error"] == "over_budget", answer.text
        assert "took longer than the 2 s" in answer.json()["reason"]
        assert took < 15, took
        assert server.app.state.verify_pool.taken == 0
        time.sleep(0.5)
        assert _children_named(os.getpid(), "sleep") == []
        assert httpx.get(f"{server.url}/api/suites").json() == []


def _children_named(pid: int, word: str) -> list[int]:
    """Descendant pids of ``pid`` whose command line holds ``word`` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            ppid = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))
            if ppid == pid and word in cmdline:
                found.append(int(entry.name))
    return found


def test_an_upload_past_its_memory_limit_is_stopped_and_the_server_keeps_its_memory(
    db_file: Path, slow_bundle: Bundle
) -> None:
    # Every `tick` of the bundle replayed as `eat 300`: 300 MiB more each time, over the 256 MiB a
    # verifying process may write to.
    data = _slowed(slow_bundle, "hungry", 300, action="eat")
    pool = PoolConfig(workers=1, queue=0, memory_mb=256)
    with serve(db_file, pool=pool) as server:
        before = _rss_mb()
        answer = _post(server.url, data)
        assert answer.status_code in (413, 422), answer.text
        assert "memory" in answer.json()["reason"].lower() or "MemoryError" in answer.json()["reason"], answer.text
        assert _rss_mb() - before < 100  # the server never held it
        assert httpx.get(f"{server.url}/api/suites").json() == []
        # The same bundle with a small appetite verifies: the limit is per upload, not a ban.
        assert _post(server.url, _slowed(slow_bundle, "peckish", 8, action="eat")).status_code == 201


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


# -- 2. anonymous uploads per address ----------------------------------------------------------------


def test_anonymous_uploads_are_limited_per_client_address(db_file: Path) -> None:
    with Store(db_file) as store:
        alice = store.create_token("alice")
    with serve(db_file, anonymous_uploads_per_minute=3, uploads_per_minute=30) as server:
        junk = [_post(server.url, b"junk") for _ in range(4)]
        assert [a.status_code for a in junk] == [400, 400, 400, 429]
        limited = junk[-1].json()
        assert limited["error"] == "rate_limited" and "address 127.0.0.1" in limited["reason"]
        assert 1 <= int(junk[-1].headers["retry-after"]) <= 60
        # A token has its own window: the address's limit does not stop a named submitter.
        assert _post(server.url, b"junk", {"Authorization": f"Bearer {alice}"}).status_code == 400


# -- 3. admin delete over HTTP and the command line, with an audit -----------------------------------


def test_admin_delete_over_http_and_cli_with_an_audit(
    db_file: Path, bundles: dict[str, Bundle], tmp_path: Path
) -> None:
    with Store(db_file) as store:
        root = store.create_token("root", role="admin")
        alice = store.create_token("alice")
    token_file = tmp_path / "root.token"
    token_file.write_text(root + "\n")
    with serve(db_file) as server:
        answers = [_post(server.url, _variant(bundles["random"], f"doomed {i}")) for i in range(3)]
        ids = [a.json()["submission"]["id"] for a in answers]
        target = f"{server.url}/api/submissions/{ids[0]}"

        def delete(token: str | None, body: Any, url: str = target) -> Any:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            return httpx.request("DELETE", url, json=body, headers=headers, timeout=30)

        board = f"{server.url}/api/suites/{SUITE_ID}/entries"
        assert ids[0] in [b["id"] for b in httpx.get(board).json()]  # rendered and kept...
        assert delete(None, {"reason": "spam"}).status_code == 401
        assert delete(alice, {"reason": "spam"}).status_code == 403
        assert delete(root, {}).status_code == 400
        assert delete(root, {"reason": "spam"}, f"{server.url}/api/submissions/999999").status_code == 404
        done = delete(root, {"reason": "spam run"})
        assert done.status_code == 200, done.text
        assert done.json()["deleted"] is True and done.json()["audit"]["action"] == "delete"
        assert httpx.get(f"{server.url}/api/entries/{ids[0]}").status_code == 404
        assert ids[0] not in [b["id"] for b in httpx.get(board).json()]  # ...until the delete
        assert delete(root, {"reason": "again"}).status_code == 404

        # The command line, against the server with a token file...
        runner = CliRunner()
        remote = runner.invoke(
            cli_app,
            ["leaderboard", "delete", str(ids[1]), "--reason", "cli remote", "--url", server.url,
             "--token-file", str(token_file), "--json"],  # fmt: skip
            env={"ENVGYM_LEADERBOARD_TOKEN": ""},
        )
        assert remote.exit_code == 0, remote.output
        assert json.loads(remote.stdout)["audit"]["token_name"] == "root"
        refused = runner.invoke(
            cli_app,
            ["leaderboard", "delete", str(ids[2]), "--reason", "x", "--url", server.url],
            env={"ENVGYM_LEADERBOARD_TOKEN": alice},
        )
        assert refused.exit_code == 1 and "403" in refused.output
        audit = httpx.get(f"{server.url}/api/audit", headers={"Authorization": f"Bearer {root}"}).json()
    # ...and on the database directly.
    local = CliRunner().invoke(
        cli_app, ["leaderboard", "delete", str(ids[2]), "--reason", "cli local", "--db", str(db_file)]
    )
    assert local.exit_code == 0, local.output
    missing = CliRunner().invoke(cli_app, ["leaderboard", "delete", "424242", "--reason", "x", "--db", str(db_file)])
    assert missing.exit_code == 1 and "no submission 424242" in missing.output
    with Store(db_file) as store:
        assert store.count(include_hidden=True) == 0
        rows = store.audit()
    assert [(a["submission_id"], a["action"], a["reason"]) for a in rows] == [
        (ids[0], "delete", "spam run"),
        (ids[1], "delete", "cli remote"),
        (ids[2], "delete", "cli local"),
    ]
    assert rows[2]["token_name"].startswith("local:")
    assert all("doomed" in a["subject"] and "content hash" in a["subject"] for a in rows)
    assert audit[:2] == rows[:2]


# -- 4. integer path parameters ----------------------------------------------------------------------


def test_out_of_range_ids_answer_422_and_keep_the_connection(db_file: Path, bundles: dict[str, Bundle]) -> None:
    with serve(db_file) as server:
        sub = _post(server.url, _variant(bundles["oracle"], "kept")).json()["submission"]
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        paths = [
            f"/api/entries/{2**64}",
            f"/entries/{10**30}",
            f"/api/entries/{sub['id']}/episodes/{2**63}",
            f"/entries/{sub['id']}/episodes/{2**70}",
            "/api/entries/-1",
            "/api/entries/not-a-number",
        ]
        connection.request("GET", "/api/suites")
        first = connection.getresponse()
        first.read()
        sock = connection.sock
        for path in paths:
            connection.request("GET", path)
            response = connection.getresponse()
            body = response.read()
            assert response.status in (404, 422), (path, response.status, body[:200])
        # An unexpected error is a 500 that keeps the connection too.
        store = server.app.state.store
        original = store.episodes
        store.episodes = lambda submission_id: 1 / 0
        try:
            connection.request("GET", f"/api/entries/{sub['id']}/episodes")
            failed = connection.getresponse()
            assert failed.status == 500 and json.loads(failed.read())["error"] == "internal"
        finally:
            store.episodes = original
        connection.request("GET", f"/api/entries/{sub['id']}")
        last = connection.getresponse()
        assert last.status == 200 and json.loads(last.read())["agent_name"] == "kept"
        assert connection.sock is sock  # the same keep-alive connection all along
        connection.close()


# -- 5. lists never load the large columns ------------------------------------------------------------


def test_lists_never_read_the_large_columns(db_file: Path, bundles: dict[str, Bundle]) -> None:
    from sqlalchemy import event

    with serve(db_file) as server:
        sub = _post(server.url, _variant(bundles["oracle"], "heavy")).json()["submission"]
        _post(server.url, _variant(bundles["random"], "light"))
        # The largest fields a board may ever hold, whatever the caps: 30 MB of metadata and turns.
        with sqlite3.connect(db_file) as raw:
            raw.execute(
                "UPDATE submissions SET agent_metadata = ?, manifest = ? WHERE id = ?",
                (json.dumps({"blob": "m" * 30_000_000}), json.dumps({"blob": "x" * 30_000_000}), sub["id"]),
            )
            raw.execute(
                "UPDATE episodes SET record = ? WHERE submission_id = ?",
                (json.dumps({"turns": [], "final_observation": "o" * 5_000_000}), sub["id"]),
            )
        store = server.app.state.store
        statements: list[str] = []

        def seen(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
            statements.append(statement)

        event.listen(store.engine, "before_cursor_execute", seen)
        try:
            for path in ("/", f"/suites/{SUITE_ID}", "/api/suites", f"/api/suites/{SUITE_ID}/entries",
                         f"/api/entries/{sub['id']}/episodes"):  # fmt: skip
                response = httpx.get(server.url + path, timeout=30)
                assert response.status_code == 200, path
                assert len(response.content) < 200_000, (path, len(response.content))
        finally:
            event.remove(store.engine, "before_cursor_execute", seen)
        for statement in statements:
            assert "agent_metadata" not in statement and "manifest" not in statement, statement
            assert "episodes.record" not in statement, statement
        board = httpx.get(f"{server.url}/api/suites/{SUITE_ID}/entries").json()
        assert "agent_metadata" not in board[0]
        # The entry's own page still shows its metadata.
        entry = httpx.get(f"{server.url}/api/entries/{sub['id']}", timeout=60).json()
        assert entry["agent_metadata"]["blob"][:3] == "mmm"


def test_the_manifest_is_stored_without_the_agent_metadata(db_file: Path, bundles: dict[str, Bundle]) -> None:
    from envgym.leaderboard.verify import verify_bundle

    with Store(db_file) as store:
        stored, _ = store.add(verify_bundle(bundles["oracle"]))
    with sqlite3.connect(db_file) as raw:
        manifest, metadata = raw.execute(
            "SELECT manifest, agent_metadata FROM submissions WHERE id = ?", (stored["id"],)
        ).fetchone()
    assert json.loads(metadata) == {"model": "oracle"}
    assert "metadata" not in json.loads(manifest)["agent"] and json.loads(manifest)["agent"]["name"]


# -- 6. control, bidi and escape characters -------------------------------------------------------


EVIL = "evil\x1b[31mred\x1b[0m\u202egnp.exe\x00\x9b2J"


def test_escapes_in_names_are_neutralised_in_pages_and_the_terminal(
    db_file: Path, bundles: dict[str, Bundle]
) -> None:
    with serve(db_file) as server:
        sub = _post(server.url, _variant(bundles["oracle"], "to be renamed")).json()["submission"]
        # Whatever the bundle checks let through, the store may hold such text (older databases).
        with sqlite3.connect(db_file) as raw:
            raw.execute("UPDATE submissions SET agent_name = ? WHERE id = ?", (EVIL, sub["id"]))
            raw.execute("UPDATE entry_scores SET entry = ? WHERE submission_id = ? AND position = 0",
                        ("frozen\x1b]0;title\x07lake", sub["id"]))  # fmt: skip
        for path in ("/", f"/suites/{SUITE_ID}", f"/entries/{sub['id']}", f"/entries/{sub['id']}/episodes/0"):
            text = httpx.get(server.url + path).text
            for raw_char in ("\x1b", "\u202e", "\x00", "\x9b", "\x07"):
                assert raw_char not in text, (path, repr(raw_char))
        page = httpx.get(f"{server.url}/entries/{sub['id']}").text
        assert "evil\\x1b[31mred" in page and "\\u202egnp.exe" in page
    listed = CliRunner().invoke(cli_app, ["leaderboard", "list", "--db", str(db_file)])
    assert listed.exit_code == 0, listed.output
    for raw_char in ("\x1b", "\u202e", "\x00", "\x9b", "\x07"):
        assert raw_char not in listed.stdout, repr(raw_char)
    assert "evil\\x1b[31mred" in listed.stdout


def test_plain_makes_every_control_character_visible() -> None:
    assert plain("a\x1b[31mb") == "a\\x1b[31mb"
    assert plain("r\u202el \u2066x\u2069 \u200f") == "r\\u202el \\u2066x\\u2069 \\u200f"
    assert plain("\ud800 lone") == "\\ud800 lone"
    assert plain("two\nlines\tok") == "two\nlines\tok"
    assert plain("two\nlines\tok", newlines=False) == "two\\x0alines\\x09ok"
    assert plain("caf\u00e9 \U0001f44d\u200d x") == "caf\u00e9 \U0001f44d\u200d x"  # letters and emoji stay
    assert plain(None) == ""


# -- 7. Host allow-list, cross-site requests, docs, loopback warning ------------------------------------


def test_host_allow_list_and_cross_site_requests(db_file: Path) -> None:
    with Store(db_file) as store:
        root = store.create_token("root", role="admin")
    admin = {"Authorization": f"Bearer {root}"}
    with serve(db_file, allowed_hosts=["board.example.org"]) as server:
        url = server.url

        def get(path: str, host: str) -> Any:
            return httpx.get(url + path, headers={"Host": host})

        rebound = get("/api/suites", "attacker.example:8000")
        assert rebound.status_code == 400 and rebound.json()["error"] == "bad_host"
        assert "--allowed-host" in rebound.json()["reason"]
        for host in (f"127.0.0.1:{server.port}", "localhost", "board.example.org", "BOARD.example.org:443"):
            assert get("/api/suites", host).status_code == 200, host
        # State-changing requests from another origin, or with a body a cross-site form can send.
        cases = [
            ({**GZIP, "Origin": "http://attacker.example"}, 403),
            ({**GZIP, "Origin": "null"}, 403),
            ({**GZIP, "Sec-Fetch-Site": "cross-site"}, 403),
            ({**GZIP, "Sec-Fetch-Site": "same-site"}, 403),
            ({"Content-Type": "text/plain"}, 415),
            ({"Content-Type": "application/x-www-form-urlencoded"}, 415),
            ({**GZIP, "Origin": url}, 400),  # same origin: reaches the (junk) bundle
            ({**GZIP, "Sec-Fetch-Site": "same-origin"}, 400),
        ]
        for headers, status in cases:
            response = httpx.post(url + "/api/submissions", content=b"junk", headers=headers)
            assert response.status_code == status, (headers, response.text)
        hide = httpx.post(url + "/api/submissions/1/hide", content=b'{"reason": "x"}',
                          headers={**admin, "Content-Type": "text/plain"})  # fmt: skip
        assert hide.status_code == 415
        delete = httpx.request("DELETE", url + "/api/submissions/1", json={"reason": "x"},
                               headers={**admin, "Origin": "http://attacker.example"})  # fmt: skip
        assert delete.status_code == 403
        # No Swagger page (it would load assets from a CDN) and no schema unless asked.
        for path in ("/api/docs", "/docs", "/api/openapi.json", "/redoc"):
            assert httpx.get(url + path).status_code == 404, path
    with serve(db_file, openapi=True) as server:
        schema = httpx.get(server.url + "/api/openapi.json")
        assert schema.status_code == 200 and "/api/submissions/{submission_id}" in schema.json()["paths"]
        assert httpx.get(server.url + "/api/docs").status_code == 404


def test_serving_beyond_loopback_without_a_token_warns(monkeypatch: pytest.MonkeyPatch, db_file: Path) -> None:
    assert not beyond_loopback("127.0.0.1") and not beyond_loopback("localhost") and not beyond_loopback("::1")
    assert beyond_loopback("0.0.0.0") and beyond_loopback("192.168.1.5") and beyond_loopback("board.example.org")
    started: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: started.append((app, kwargs)))
    runner = CliRunner()
    args = ["leaderboard", "serve", "--db", str(db_file)]
    wide = runner.invoke(cli_app, [*args, "--host", "0.0.0.0"])
    assert wide.exit_code == 0, wide.output
    assert "without --require-token" in " ".join(wide.output.split()) and "--allowed-host" in wide.output
    tokened = runner.invoke(cli_app, [*args, "--host", "0.0.0.0", "--require-token", "--allowed-host", "lb.example"])
    assert tokened.exit_code == 0 and "without --require-token" not in " ".join(tokened.output.split())
    local = runner.invoke(cli_app, args)
    assert local.exit_code == 0 and "warning" not in local.output
    assert len(started) == 3 and started[1][1]["host"] == "0.0.0.0"


# -- 8. a hidden entry stays hidden --------------------------------------------------------------------


def test_reuploading_a_hidden_bundle_neither_reveals_nor_restores_it(
    db_file: Path, bundles: dict[str, Bundle]
) -> None:
    with Store(db_file) as store:
        root = store.create_token("root", role="admin")
    data = _variant(bundles["random"], "hidden run")
    with serve(db_file) as server:
        first = _post(server.url, data).json()["submission"]
        hidden = httpx.post(f"{server.url}/api/submissions/{first['id']}/hide", json={"reason": "cheating"},
                            headers={"Authorization": f"Bearer {root}"})  # fmt: skip
        assert hidden.status_code == 200
        again = _post(server.url, data)
        assert again.status_code == 409, again.text
        assert again.json()["error"] == "withdrawn" and "submission" not in again.json()
        assert str(first["id"]) not in again.text and first["content_hash"] not in again.text
        assert httpx.get(f"{server.url}/api/entries/{first['id']}").status_code == 404
        assert httpx.get(f"{server.url}/api/suites/{SUITE_ID}/entries").json() == []
    with Store(db_file) as store:
        assert store.submission(first["id"], include_hidden=True)["hidden"] is True


# -- sandboxed suites, anonymous -------------------------------------------------------------------------


def test_anonymous_uploads_of_sandboxed_suites_are_refused(
    db_file: Path, bundles: dict[str, Bundle], slow_bundle: Bundle
) -> None:
    def to_sandboxed_suite(changed: Bundle) -> None:
        changed.manifest["suite"]["id"] = "lbswe-v1"

    data = _variant(bundles["random"], "sandboxed", to_sandboxed_suite)
    with Store(db_file) as store:
        alice = store.create_token("alice")
    with serve(db_file) as server:
        anonymous = _post(server.url, data)
        assert anonymous.status_code == 403 and anonymous.json()["error"] == "sandboxed_suite", anonymous.text
        named = _post(server.url, data, {"Authorization": f"Bearer {alice}"})
        assert named.status_code in (400, 422), named.text  # on to verification (which rejects this edit)
    with serve(db_file, allow_anonymous_sandboxed=True) as server:
        assert _post(server.url, data).status_code in (400, 422)


# -- 9. tokens from a file or the environment ----------------------------------------------------------


def test_submit_reads_its_token_from_a_file_and_warns_about_one_on_the_command_line(
    db_file: Path, runs: dict[str, Path], tmp_path: Path
) -> None:
    runner = CliRunner()
    made = runner.invoke(cli_app, ["leaderboard", "token", "create", "alice", "--db", str(db_file),
                                   "--out", str(tmp_path / "alice.token")])  # fmt: skip
    assert made.exit_code == 0, made.output
    token_file = tmp_path / "alice.token"
    assert token_file.stat().st_mode & 0o777 == 0o600
    token = token_file.read_text().strip()
    assert token not in made.output
    again = runner.invoke(cli_app, ["leaderboard", "token", "create", "bob", "--db", str(db_file),
                                    "--out", str(token_file)])  # fmt: skip
    assert again.exit_code == 2 and "exists" in again.output
    with serve(db_file, require_token=True) as server:
        args = ["leaderboard", "submit", str(runs["oracle"]), "--url", server.url, "--out", str(tmp_path / "b.gz")]
        from_file = runner.invoke(cli_app, [*args, "--token-file", str(token_file), "--json"],
                                  env={"ENVGYM_LEADERBOARD_TOKEN": ""})  # fmt: skip
        assert from_file.exit_code == 0, from_file.output
        assert json.loads(from_file.stdout)["submission"]["submitter"] == "alice"
        assert "visible to every user" not in from_file.output
        on_line = runner.invoke(cli_app, [*args, "--token", token, "--json"])
        assert on_line.exit_code == 0 and "visible to every user of this machine" in " ".join(on_line.output.split())
        both = runner.invoke(cli_app, [*args, "--token", token, "--token-file", str(token_file)])
        assert both.exit_code == 2 and "not both" in both.output
        empty = tmp_path / "empty.token"
        empty.write_text("\n")
        blank = runner.invoke(cli_app, [*args, "--token-file", str(empty)], env={"ENVGYM_LEADERBOARD_TOKEN": ""})
        assert blank.exit_code == 2 and "is empty" in blank.output
