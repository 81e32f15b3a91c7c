"""The same run is ranked once: a bundle of episodes already on the board (the run bundled again
under another ``--name``, or with another text cap) is refused with the entry it duplicates, and an
entry's name changes by ``rename`` (command line and ``POST /api/submissions/ID/rename``)."""

from __future__ import annotations

import copy
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_leaderboard_support import SUITE_ID, bundles_fixture, runs_fixture, suite_dir_fixture  # noqa: F401 - fixtures
from typer.testing import CliRunner

from envgym.cli import app
from envgym.leaderboard.bundle import Bundle, bundle_bytes, episodes_key, make_bundle

pytest.importorskip("fastapi")
pytest.importorskip("sqlalchemy")

from fastapi.testclient import TestClient

from envgym.leaderboard.app import create_app
from envgym.leaderboard.store import DuplicateEpisodes, Store
from envgym.leaderboard.verify import verify_bundle


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["leaderboard", *args])


def test_episodes_key_ignores_the_name_and_the_text_cap_but_not_the_actions(runs: dict[str, Path]) -> None:
    a = make_bundle(runs["random"], name="first name")
    b = make_bundle(runs["random"], name="second name", metadata={"model": "x"}, text_cap=50)
    assert a.content_hash != b.content_hash  # two bundles...
    key = episodes_key(SUITE_ID, "random", a.episodes)
    assert episodes_key(SUITE_ID, "random", b.episodes) == key  # ...of one run
    assert episodes_key(SUITE_ID, "random", list(reversed(a.episodes))) == key  # order does not matter
    changed = copy.deepcopy(a.episodes)
    changed[0]["turns"][0]["action"] = "dance"
    assert episodes_key(SUITE_ID, "random", changed) != key
    assert episodes_key(SUITE_ID, "oracle", a.episodes) != key  # another agent's identical play
    assert episodes_key("other-v1", "random", a.episodes) != key


def test_cli_refuses_the_same_run_under_a_new_name_and_renames(runs: dict[str, Path], tmp_path: Path) -> None:
    db = str(tmp_path / "lb.db")
    first = _invoke("submit", str(runs["random"]), "--name", "random A", "--db", db, "--out", str(tmp_path / "a.gz"),
                    "--json")  # fmt: skip
    assert first.exit_code == 0, first.output
    stored = json.loads(first.stdout)["submission"]
    again = _invoke("submit", str(runs["random"]), "--name", "random B", "--db", db, "--out", str(tmp_path / "b.gz"),
                    "--text-cap", "100")  # fmt: skip
    assert again.exit_code == 1
    message = " ".join(again.output.split())
    assert f"already on the board as submission {stored['id']} ('random A' on {SUITE_ID}" in message
    assert f"envgym leaderboard rename {stored['id']} NEW_NAME" in message
    # The second bundle file is written; the board is unchanged.
    assert (tmp_path / "b.gz").is_file()
    board = json.loads(_invoke("list", "--db", db, "--json").stdout)[SUITE_ID]
    assert [b["agent_name"] for b in board] == ["random A"]

    renamed = _invoke("rename", str(stored["id"]), "random B", "--reason", "typo", "--db", db, "--json")
    assert renamed.exit_code == 0, renamed.output
    audit = json.loads(renamed.stdout)["audit"]
    assert audit["action"] == "rename" and audit["reason"] == "renamed 'random A' to 'random B': typo"
    board = json.loads(_invoke("list", "--db", db, "--json").stdout)[SUITE_ID]
    assert [(b["id"], b["agent_name"]) for b in board] == [(stored["id"], "random B")]
    # The other run of the suite is another entry.
    other = _invoke("submit", str(runs["oracle"]), "--db", db, "--out", str(tmp_path / "o.gz"))
    assert other.exit_code == 0, other.output

    for args, code, text in (
        (("rename", "999", "x", "--db", db), 1, "no submission 999"),
        (("rename", str(stored["id"]), "   ", "--db", db), 2, "text of 1 to 200 characters"),
        (("rename", str(stored["id"]), "a\x1b[31mb", "--db", db), 2, "control or bidirectional"),
        (("rename", str(stored["id"]), "x", "--db", db, "--url", "http://127.0.0.1:9"), 2, "not both"),
    ):
        result = _invoke(*args)
        assert result.exit_code == code and text in result.output, (args, result.output)


def test_a_database_from_before_gets_its_runs_keyed(runs: dict[str, Path], tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with Store(path) as store:
        store.add(verify_bundle(make_bundle(runs["random"], name="old entry")))
    with sqlite3.connect(path) as connection:  # as a database made before the column existed
        connection.execute("DROP INDEX ix_submissions_episodes_key")
        connection.execute("ALTER TABLE submissions DROP COLUMN episodes_key")
    with Store(path) as store:
        with pytest.raises(DuplicateEpisodes, match="submission 1 \\('old entry'"):
            store.add(verify_bundle(make_bundle(runs["random"], name="new name")))
        assert [b["agent_name"] for b in store.leaderboard(SUITE_ID)] == ["old entry"]


@pytest.fixture()
def db(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "leaderboard.db") as store:
        yield store


def _renamed(bundle: Bundle, name: str) -> bytes:
    changed = Bundle(copy.deepcopy(bundle.manifest), bundle.episodes)
    changed.manifest["agent"]["name"] = name
    return bundle_bytes(changed.rehash())


def test_server_answers_409_with_the_entry_and_renames_for_admins(db: Store, bundles: dict[str, Bundle]) -> None:
    root, alice = db.create_token("root", role="admin"), db.create_token("alice")
    client = TestClient(create_app(db, require_token=True), base_url="http://127.0.0.1")
    gzip = {"Content-Type": "application/gzip"}
    first = client.post("/api/submissions", content=_renamed(bundles["random"], "mine"),
                        headers={**gzip, "Authorization": f"Bearer {alice}"})  # fmt: skip
    assert first.status_code == 201, first.text
    sid = first.json()["submission"]["id"]
    twin = client.post("/api/submissions", content=_renamed(bundles["random"], "mine, again"),
                       headers={**gzip, "Authorization": f"Bearer {alice}"})  # fmt: skip
    assert twin.status_code == 409 and twin.json()["error"] == "duplicate"
    assert f"submission {sid} ('mine' on {SUITE_ID}" in twin.json()["reason"]
    assert f"/api/submissions/{sid}/rename" in twin.json()["reason"]
    assert [b["agent_name"] for b in client.get(f"/api/suites/{SUITE_ID}/entries").json()] == ["mine"]

    def rename(token: str | None, body: Any, submission: int = sid) -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return client.post(f"/api/submissions/{submission}/rename", json=body, headers=headers)

    assert rename(None, {"name": "x"}).status_code == 401
    assert rename(alice, {"name": "x"}).status_code == 403
    for body in ({}, {"name": ""}, {"name": 3}, {"name": "y" * 201}, ["x"], {"name": "x", "reason": 5}):
        refused = rename(root, body)
        assert refused.status_code == 400 and refused.json()["error"] == "bad_request", (body, refused.text)
    assert rename(root, {"name": "x"}, submission=999_999).status_code == 404
    done = rename(root, {"name": "random, renamed", "reason": "clearer"})
    assert done.status_code == 200, done.text
    assert done.json()["audit"]["reason"] == "renamed 'mine' to 'random, renamed': clearer"
    assert client.get(f"/api/entries/{sid}").json()["agent_name"] == "random, renamed"
    assert "random, renamed" in client.get(f"/suites/{SUITE_ID}").text  # the cached page is dropped
    audit = client.get("/api/audit", headers={"Authorization": f"Bearer {root}"}).json()
    assert [(a["submission_id"], a["action"], a["token_name"]) for a in audit] == [(sid, "rename", "root")]

    # A twin of a hidden entry is told only that the content was withdrawn.
    client.post(f"/api/submissions/{sid}/hide", json={"reason": "spam"}, headers={"Authorization": f"Bearer {root}"})
    hidden_twin = client.post("/api/submissions", content=_renamed(bundles["random"], "third try"),
                              headers={**gzip, "Authorization": f"Bearer {alice}"})  # fmt: skip
    assert hidden_twin.status_code == 409 and hidden_twin.json()["error"] == "withdrawn"
    assert str(sid) not in hidden_twin.json()["reason"]


def test_a_run_stored_twice_before_refusal_keeps_both_rows_and_the_first_its_key(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    path = tmp_path / "old.db"
    with Store(path) as store:
        store.add(verify_bundle(make_bundle(runs["random"], name="first upload")))
    with sqlite3.connect(path) as connection:  # unkeyed, as the rows of a database from before
        connection.execute("UPDATE submissions SET episodes_key = NULL")
    with Store(path) as store:
        store.add(verify_bundle(make_bundle(runs["random"], name="second upload")))
    with sqlite3.connect(path) as connection:
        connection.execute("DROP INDEX ix_submissions_episodes_key")
        connection.execute("ALTER TABLE submissions DROP COLUMN episodes_key")
    with Store(path) as store:  # keyed on opening: the unique key goes to the first
        with pytest.raises(DuplicateEpisodes, match="submission 1 \\('first upload'"):
            store.add(verify_bundle(make_bundle(runs["random"], name="third upload")))
        assert sorted(b["agent_name"] for b in store.leaderboard(SUITE_ID)) == ["first upload", "second upload"]
    with sqlite3.connect(path) as connection:
        keys = dict(connection.execute("SELECT id, episodes_key FROM submissions").fetchall())
        unique = connection.execute(
            "SELECT [unique] FROM pragma_index_list('submissions') WHERE name = 'ix_submissions_episodes_key'"
        ).fetchone()
    assert keys[1] is not None and keys[2] is None and unique == (1,)


def test_the_same_bundle_stored_by_a_concurrent_upload_is_a_200_not_a_409(
    db: Store, bundles: dict[str, Bundle], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two identical uploads at once: the second can miss the first in its content-hash check and
    meet it in the same-run check (or at the store's unique key); it is a re-upload, not a twin."""
    from envgym.leaderboard.intake import Upload, process_upload
    from envgym.leaderboard.verify import VerifyConfig

    data = _renamed(bundles["oracle"], "racing")

    def upload() -> Any:
        return process_upload(
            Upload(
                data=data, submitter=None, store_url="unused", max_unpacked_bytes=64 << 20, verify_config=VerifyConfig()
            ),
            db,
        )

    first = upload()
    assert first.status == 201, first.body
    monkeypatch.setattr(db, "find", lambda content_hash: None)  # the window before the first was stored
    again = upload()
    assert again.status == 200 and again.body["status"] == "exists", again.body
    assert again.body["submission"]["id"] == first.body["submission"]["id"]
    monkeypatch.setattr(db, "find_episodes", lambda key: None)  # ... and before its run key was
    late = upload()
    assert late.status == 200 and late.body["submission"]["id"] == first.body["submission"]["id"], late.body
    # Another bundle of the same run (another name) is still the 409 of a twin.
    twin = process_upload(
        Upload(
            data=_renamed(bundles["oracle"], "racing, renamed"),
            submitter=None,
            store_url="unused",
            max_unpacked_bytes=64 << 20,
            verify_config=VerifyConfig(),
        ),
        db,
    )
    assert twin.status == 409 and twin.body["error"] == "duplicate"
