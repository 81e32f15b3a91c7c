"""Tokens, submitters, moderation and upload limits of the leaderboard, over a real SQLite file.

The app runs in-process under FastAPI's TestClient (real routing, real store, real verification
by replay) so that ``caplog`` sees its logs; the token commands run through their Typer app.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_leaderboard_support import SUITE_ID, bundles_fixture, runs_fixture, suite_dir_fixture  # noqa: F401 - fixtures
from typer.testing import CliRunner

from envgym.errors import ConfigError
from envgym.leaderboard.bundle import Bundle, bundle_bytes

pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("sqlalchemy")

from fastapi.testclient import TestClient

from envgym.cli._tokens import token_app
from envgym.leaderboard.app import UploadLimiter, create_app
from envgym.leaderboard.pages import export_site
from envgym.leaderboard.store import Store
from envgym.leaderboard.verify import verify_bundle

GZIP = {"Content-Type": "application/gzip"}


def _auth(token: str) -> dict[str, str]:
    return {**GZIP, "Authorization": f"Bearer {token}"}


def _variant(bundle: Bundle, name: str) -> bytes:
    changed = Bundle(copy.deepcopy(bundle.manifest), bundle.episodes)
    changed.manifest["agent"]["name"] = name
    changed.manifest["agent"]["spec"] = f"variant:{name}"  # another agent: the same run is ranked once
    return bundle_bytes(changed.rehash())


@pytest.fixture()
def db(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "leaderboard.db") as store:
        yield store


def _client(store: Store, **kwargs: Any) -> TestClient:
    # A loopback host name: the app answers only to the names it is told (DNS rebinding).
    return TestClient(create_app(store, **kwargs), base_url="http://127.0.0.1")


def _stored(store: Store) -> int:
    return store.count(include_hidden=True)


# -- the store -------------------------------------------------------------------------------------


def test_the_store_keeps_only_the_hash_of_a_token(db: Store, tmp_path: Path) -> None:
    alice = db.create_token("alice")
    root = db.create_token("root", role="admin")
    assert alice != root and len(alice) >= 43 and alice.replace("-", "").replace("_", "").isalnum()
    assert db.resolve_token(alice) == {"name": "alice", "role": "submitter"}
    assert db.resolve_token(root) == {"name": "root", "role": "admin"}
    assert db.resolve_token(alice + "x") is None and db.resolve_token("") is None
    listed = db.tokens()
    assert [(t["name"], t["role"], t["revoked"]) for t in listed] == [
        ("alice", "submitter", False),
        ("root", "admin", False),
    ]
    assert set(listed[0]) == {"name", "role", "created_at", "revoked"}
    with sqlite3.connect(tmp_path / "leaderboard.db") as raw:
        rows = raw.execute("SELECT name, token_hash FROM tokens ORDER BY id").fetchall()
    assert rows == [
        ("alice", hashlib.sha256(alice.encode()).hexdigest()),
        ("root", hashlib.sha256(root.encode()).hexdigest()),
    ]
    for suffix in ("", "-wal"):
        file = tmp_path / f"leaderboard.db{suffix}"
        if file.exists():
            assert alice.encode() not in file.read_bytes() and root.encode() not in file.read_bytes()

    assert db.revoke_token("alice") is True
    assert db.resolve_token(alice) is None
    assert db.revoke_token("alice") is False and db.revoke_token("nobody") is False
    assert [t["revoked"] for t in db.tokens()] == [True, False]


def test_token_names_and_roles_are_checked(db: Store) -> None:
    db.create_token("alice")
    with pytest.raises(ConfigError, match="a token named 'alice' exists already"):
        db.create_token("alice", role="admin")
    for bad in ("", "a b", "-dash", "x" * 101, "<script>"):
        with pytest.raises(ConfigError, match="a token name is 1 to 100 characters"):
            db.create_token(bad)
    with pytest.raises(ConfigError, match="role is one of submitter, admin, got 'owner'"):
        db.create_token("bob", role="owner")
    assert [t["name"] for t in db.tokens()] == ["alice"]


# -- uploads ---------------------------------------------------------------------------------------


def test_a_board_that_requires_tokens_turns_others_away(db: Store, bundles: dict[str, Bundle]) -> None:
    alice = db.create_token("alice")
    gone = db.create_token("gone")
    db.revoke_token("gone")
    client = _client(db, require_token=True)
    data = _variant(bundles["random"], "token upload")

    missing = client.post("/api/submissions", content=data, headers=GZIP)
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    assert missing.json()["error"] == "unauthorized" and "Authorization: Bearer" in missing.json()["reason"]
    not_bearer = client.post("/api/submissions", content=data, headers={**GZIP, "Authorization": f"Basic {alice}"})
    assert not_bearer.status_code == 401 and "must be 'Bearer <token>'" in not_bearer.json()["reason"]
    for token in ("not-a-token", gone):
        refused = client.post("/api/submissions", content=data, headers=_auth(token))
        assert refused.status_code == 403 and refused.json() == {
            "error": "forbidden",
            "reason": "the token is unknown or revoked; ask the board's admin for a new one.",
        }
    assert _stored(db) == 0

    created = client.post("/api/submissions", content=data, headers=_auth(alice))
    assert created.status_code == 201, created.text
    sub = created.json()["submission"]
    assert sub["submitter"] == "alice" and sub["hidden"] is False
    assert client.get(f"/api/entries/{sub['id']}").json()["submitter"] == "alice"
    assert [b["submitter"] for b in client.get(f"/api/suites/{SUITE_ID}/entries").json()] == ["alice"]
    assert "<td class='submitter'>alice</td>" in client.get(f"/suites/{SUITE_ID}").text
    assert "<dt>submitted by</dt><dd>alice</dd>" in client.get(f"/entries/{sub['id']}").text
    # Reading stays open.
    assert client.get("/api/suites").status_code == 200


def test_an_open_board_takes_anonymous_uploads_and_names_token_holders(db: Store, bundles: dict[str, Bundle]) -> None:
    bob = db.create_token("bob")
    client = _client(db)
    anonymous = client.post("/api/submissions", content=_variant(bundles["random"], "anon"), headers=GZIP)
    named = client.post("/api/submissions", content=_variant(bundles["oracle"], "named"), headers=_auth(bob))
    wrong = client.post("/api/submissions", content=_variant(bundles["oracle"], "wrong"), headers=_auth("nope"))
    assert (anonymous.status_code, named.status_code, wrong.status_code) == (201, 201, 403)
    assert anonymous.json()["submission"]["submitter"] is None
    assert named.json()["submission"]["submitter"] == "bob"
    board = client.get(f"/api/suites/{SUITE_ID}/entries").json()
    assert [(b["agent_name"], b["submitter"]) for b in board] == [("named", "bob"), ("anon", None)]
    assert "<td class='submitter'>anonymous</td>" in client.get(f"/suites/{SUITE_ID}").text


# -- moderation ------------------------------------------------------------------------------------


def test_hide_and_unhide_with_an_audit(db: Store, bundles: dict[str, Bundle], tmp_path: Path) -> None:
    root = db.create_token("root", role="admin")
    alice = db.create_token("alice")
    client = _client(db, require_token=True)
    ids = [
        client.post("/api/submissions", content=_variant(bundles[a], f"{a} entry"), headers=_auth(alice)).json()[
            "submission"
        ]["id"]
        for a in ("oracle", "random")
    ]
    hidden, kept = ids[1], ids[0]

    def hide(token: str | None, body: Any, submission: int = hidden, action: str = "hide") -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return client.post(f"/api/submissions/{submission}/{action}", json=body, headers=headers)

    assert hide(None, {"reason": "spam"}).status_code == 401
    as_submitter = hide(alice, {"reason": "spam"})
    assert as_submitter.status_code == 403 and "token 'alice' is a submitter token" in as_submitter.json()["reason"]
    for body in ({}, {"reason": "   "}, {"reason": 3}, ["spam"], {"reason": "x" * 1001}):
        refused = hide(root, body)
        assert refused.status_code == 400 and refused.json()["error"] == "bad_request", body
    assert hide(root, {"reason": "spam"}, submission=999_999).status_code == 404
    assert client.get("/api/audit", headers={"Authorization": f"Bearer {root}"}).json() == []

    done = hide(root, {"reason": "duplicate of an earlier run"})
    assert done.status_code == 200, done.text
    assert done.json()["hidden"] is True and done.json()["audit"]["action"] == "hide"

    # Gone from the board, the listings and its pages...
    assert [b["id"] for b in client.get(f"/api/suites/{SUITE_ID}/entries").json()] == [kept]
    assert client.get("/api/suites").json()[0]["submissions"] == 1
    for path in (f"/entries/{hidden}", f"/entries/{hidden}/episodes/0", f"/api/entries/{hidden}",
                 f"/api/entries/{hidden}/episodes", f"/api/entries/{hidden}/episodes/0"):  # fmt: skip
        assert client.get(path).status_code == 404, path
    assert "random entry" not in client.get(f"/suites/{SUITE_ID}").text
    written = {p.relative_to(tmp_path / "site").as_posix() for p in export_site(db, tmp_path / "site")}
    assert f"entries/{kept}.html" in written and f"entries/{hidden}.html" not in written
    # ...but still in the database.
    assert _stored(db) == 2 and db.submission(hidden, include_hidden=True)["hidden"] is True

    audit_as_submitter = client.get("/api/audit", headers={"Authorization": f"Bearer {alice}"})
    assert audit_as_submitter.status_code == 403
    assert client.get("/api/audit").status_code == 401

    shown = hide(root, {}, action="unhide")
    assert shown.status_code == 200 and shown.json()["hidden"] is False
    assert sorted(b["id"] for b in client.get(f"/api/suites/{SUITE_ID}/entries").json()) == sorted(ids)
    assert client.get(f"/entries/{hidden}").status_code == 200
    audit = client.get("/api/audit", headers={"Authorization": f"Bearer {root}"}).json()
    assert [(a["submission_id"], a["action"], a["reason"], a["token_name"]) for a in audit] == [
        (hidden, "hide", "duplicate of an earlier run", "root"),
        (hidden, "unhide", "", "root"),
    ]
    assert all(a["at"] for a in audit)


# -- rate limit ------------------------------------------------------------------------------------


def test_uploads_per_token_are_limited(db: Store) -> None:
    alice, bob = db.create_token("alice"), db.create_token("bob")
    client = _client(db, uploads_per_minute=2)
    junk = b"not a bundle"
    answers = [client.post("/api/submissions", content=junk, headers=_auth(alice)) for _ in range(3)]
    assert [a.status_code for a in answers] == [400, 400, 429]
    limited = answers[2]
    assert limited.json()["error"] == "rate_limited" and "more than 2 uploads in a minute" in limited.json()["reason"]
    assert 1 <= int(limited.headers["retry-after"]) <= 60
    # Another token has its own window; anonymous uploads have their address's own window.
    assert client.post("/api/submissions", content=junk, headers=_auth(bob)).status_code == 400
    assert all(client.post("/api/submissions", content=junk, headers=GZIP).status_code == 400 for _ in range(3))
    assert _stored(db) == 0
    with pytest.raises(ConfigError, match="uploads_per_minute must be an integer >= 1"):
        create_app(db, uploads_per_minute=0)


def test_the_upload_window_slides() -> None:
    now = [1000.0]
    limiter = UploadLimiter(3, clock=lambda: now[0])
    admitted = []
    for _ in range(3):  # at 1000, 1010 and 1020
        admitted.append(limiter.admit("a"))
        now[0] += 10
    assert admitted == [None, None, None]
    assert limiter.admit("a") == 30  # at 1030: the upload of 1000 leaves the window at 1060
    assert limiter.admit("b") is None  # each token has its own window
    now[0] = 1060
    assert limiter.admit("a") is None  # the slot of 1000 is free again
    assert limiter.admit("a") == 10  # full again: the upload of 1010 leaves at 1070


# -- tokens never leak -----------------------------------------------------------------------------


def test_tokens_appear_in_no_page_document_or_log(
    db: Store, bundles: dict[str, Bundle], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    root = db.create_token("root", role="admin")
    alice = db.create_token("alice")
    client = _client(db, require_token=True)
    sub = client.post("/api/submissions", content=_variant(bundles["oracle"], "leak check"), headers=_auth(alice))
    other = client.post("/api/submissions", content=_variant(bundles["random"], "hidden one"), headers=_auth(alice))
    assert sub.status_code == other.status_code == 201
    n, m = sub.json()["submission"]["id"], other.json()["submission"]["id"]
    admin = {"Authorization": f"Bearer {root}"}
    texts = [
        sub.text,
        other.text,
        client.post(f"/api/submissions/{m}/hide", json={"reason": "test"}, headers=admin).text,
        client.post("/api/submissions", content=b"junk", headers=_auth(alice)).text,
        client.post("/api/submissions", content=b"junk", headers=_auth(alice + "x")).text,
        client.get("/api/audit", headers=admin).text,
    ]
    for path in ("/", f"/suites/{SUITE_ID}", f"/entries/{n}", f"/entries/{n}/episodes/0", "/api/suites",
                 f"/api/suites/{SUITE_ID}/entries", f"/api/entries/{n}", f"/api/entries/{n}/episodes/0"):  # fmt: skip
        response = client.get(path, headers=admin)
        assert response.status_code == 200, path
        texts.append(response.text)
    runner = CliRunner()
    texts.append(runner.invoke(token_app, ["list", "--db", db.url, "--json"]).output)
    assert "alice" in texts[0] and "leak check" in texts[0]
    assert any("from alice" in r.getMessage() for r in caplog.records)  # the name is logged...
    for token in (root, alice):  # ...the token never
        assert all(token not in text for text in texts)
        assert token not in caplog.text


# -- an older database ------------------------------------------------------------------------------


def test_a_database_from_before_tokens_gains_the_new_columns(tmp_path: Path, bundles: dict[str, Bundle]) -> None:
    path = tmp_path / "old.db"
    with Store(path) as store:
        store.add(verify_bundle(bundles["random"]))
    # Take the database back to the schema of the first release.
    with sqlite3.connect(path) as raw:
        raw.execute("ALTER TABLE submissions DROP COLUMN submitter")
        raw.execute("ALTER TABLE submissions DROP COLUMN hidden")
        raw.execute("DROP TABLE tokens")
        raw.execute("DROP TABLE audit")
        columns = {row[1] for row in raw.execute("PRAGMA table_info(submissions)")}
    assert "submitter" not in columns and "hidden" not in columns

    with Store(path) as store:
        with sqlite3.connect(path) as raw:
            columns = {row[1] for row in raw.execute("PRAGMA table_info(submissions)")}
        assert {"submitter", "hidden"} <= columns
        board = store.leaderboard(SUITE_ID)
        assert [(b["agent_name"], b["submitter"], b["hidden"]) for b in board] == [("random baseline", None, False)]
        token = store.create_token("carol")
        client = _client(store, require_token=True)
        response = client.post("/api/submissions", content=_variant(bundles["oracle"], "after"), headers=_auth(token))
        assert response.status_code == 201 and response.json()["submission"]["submitter"] == "carol"
    with Store(path) as again:  # opening a migrated database changes nothing
        assert [b["submitter"] for b in again.leaderboard(SUITE_ID)] == ["carol", None]


# -- envgym leaderboard token ... ------------------------------------------------------------------


def test_token_commands(tmp_path: Path) -> None:
    db = str(tmp_path / "lb.db")
    runner = CliRunner()

    created = runner.invoke(token_app, ["create", "alice", "--db", db])
    assert created.exit_code == 0, created.output
    token = created.stdout.strip()
    assert "\n" not in token and "will not be shown again" in created.stderr and token not in created.stderr
    admin = runner.invoke(token_app, ["create", "root", "--admin", "--db", db])
    assert admin.exit_code == 0, admin.output
    with Store(db) as store:
        assert store.resolve_token(token) == {"name": "alice", "role": "submitter"}
        assert store.resolve_token(admin.stdout.strip()) == {"name": "root", "role": "admin"}

    listed = runner.invoke(token_app, ["list", "--db", db, "--json"])
    assert listed.exit_code == 0
    assert [(t["name"], t["role"], t["revoked"]) for t in json.loads(listed.stdout)] == [
        ("alice", "submitter", False),
        ("root", "admin", False),
    ]
    table = runner.invoke(token_app, ["list", "--db", db])
    assert table.exit_code == 0 and "alice" in table.stdout and "admin" in table.stdout and token not in table.stdout

    assert runner.invoke(token_app, ["revoke", "alice", "--db", db]).exit_code == 0
    with Store(db) as store:
        assert store.resolve_token(token) is None
    again = runner.invoke(token_app, ["revoke", "alice", "--db", db])
    assert again.exit_code == 1 and "revoked already" in again.output
    unknown = runner.invoke(token_app, ["revoke", "nobody", "--db", db])
    assert unknown.exit_code == 1 and "no token named 'nobody'; active tokens: root." in unknown.output
    taken = runner.invoke(token_app, ["create", "alice", "--db", db])
    assert taken.exit_code == 2 and "exists already" in taken.output
    bad = runner.invoke(token_app, ["create", "a b", "--db", db])
    assert bad.exit_code == 2 and "a token name is 1 to 100 characters" in bad.output
    assert "revoked" in runner.invoke(token_app, ["list", "--db", db]).stdout


def test_serve_require_token_and_submit_token_end_to_end(
    tmp_path: Path, suite_dir: Path, runs: dict[str, Path]
) -> None:
    """`envgym leaderboard serve --require-token` (a real uvicorn) refuses `submit --url` without a
    token and takes it with `--token` or $ENVGYM_LEADERBOARD_TOKEN."""
    from test_leaderboard_support import Server

    from envgym.cli import app

    db_file = tmp_path / "board.db"
    made = CliRunner().invoke(app, ["leaderboard", "token", "create", "alice", "--db", str(db_file)])
    assert made.exit_code == 0, made.output
    token = made.stdout.strip().splitlines()[-1]
    server = Server(db_file, suite_dir, "--require-token")
    try:
        args = ["leaderboard", "submit", str(runs["oracle"]), "--url", server.url, "--out", str(tmp_path / "b.gz")]
        refused = CliRunner().invoke(app, args, env={"ENVGYM_LEADERBOARD_TOKEN": ""})
        assert refused.exit_code == 1 and "401" in refused.output
        wrong = CliRunner().invoke(app, [*args, "--token", "not-a-token"])
        assert wrong.exit_code == 1 and "403" in wrong.output
        taken = CliRunner().invoke(app, [*args, "--json"], env={"ENVGYM_LEADERBOARD_TOKEN": token})
        assert taken.exit_code == 0, taken.output
        document = json.loads(taken.stdout)
        assert document["status"] == "created" and document["submission"]["submitter"] == "alice"
        assert token not in server.log.read_text()
    finally:
        server.stop()
