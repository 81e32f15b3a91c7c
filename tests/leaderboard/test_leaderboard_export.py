"""``envgym leaderboard export DIR``: the static site (pages, the JSON API as files, the assets).

Every link in every exported page must resolve to a file of the export, and every exported JSON
document must be exactly what a running server (a real uvicorn on loopback) answers at that path.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from test_leaderboard_support import SUITE_ID, Server, bundles_fixture, runs_fixture, suite_dir_fixture  # noqa: F401 - fixtures
from typer.testing import CliRunner

from envgym.cli import app

pytest.importorskip("sqlalchemy")
pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")


class Links(HTMLParser):
    """Collects every href/src, and the option values of the episode picker (links too)."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is not None and (name in ("href", "src") or (tag == "option" and name == "value")):
                self.links.append(value)


@pytest.fixture(scope="module")
def db_file(bundles: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    from envgym.leaderboard.store import Store
    from envgym.leaderboard.verify import verify_bundle

    path = tmp_path_factory.mktemp("db") / "leaderboard.db"
    with Store(path) as store:
        for agent in ("random", "oracle"):
            store.add(verify_bundle(bundles[agent]))
    return path


@pytest.fixture(scope="module")
def site(db_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export") / "site"
    result = CliRunner().invoke(app, ["leaderboard", "export", str(out), "--db", str(db_file), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    # index + suite + 2 entry pages + 2 x 8 episode pages; suites + board + 2 x (entry + list + 8 episodes)
    assert (summary["pages"], summary["api_documents"], summary["files"]) == (20, 22, 44)
    return out


@pytest.fixture(scope="module")
def server(db_file: Path, suite_dir: Path) -> Iterator[Server]:
    srv = Server(db_file, suite_dir)
    yield srv
    srv.stop()


def test_the_export_holds_pages_api_documents_and_assets(site: Path) -> None:
    for name in ("index.html", f"suites/{SUITE_ID}.html", "api/suites.json", f"api/suites/{SUITE_ID}/entries.json",
                 "static/leaderboard.css", "static/leaderboard.js"):  # fmt: skip
        assert (site / name).is_file(), name
    board = json.loads((site / "api" / "suites" / SUITE_ID / "entries.json").read_text())
    assert [b["agent_name"] for b in board] == ["oracle baseline", "random baseline"]
    for entry in board:
        assert (site / "entries" / f"{entry['id']}.html").is_file()
        episodes = json.loads((site / "api" / "entries" / str(entry["id"]) / "episodes.json").read_text())
        assert len(episodes) == 8
        for ep in episodes:
            assert (site / "entries" / str(entry["id"]) / "episodes" / f"{ep['ordinal']}.html").is_file()
            full = json.loads(
                (site / "api" / "entries" / str(entry["id"]) / "episodes" / f"{ep['ordinal']}.json").read_text()
            )
            assert full["num_turns"] == len(full["turns"]) == ep["num_turns"]
    # Pages link the assets once instead of inlining them.
    index = (site / "index.html").read_text()
    assert "href='static/leaderboard.css'" in index and "<style>" not in index


def test_every_link_resolves_to_an_exported_file(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    assert len(pages) == 20
    checked = 0
    for page in pages:
        parser = Links()
        parser.feed(page.read_text(encoding="utf-8"))
        assert parser.links, page
        for link in parser.links:
            parts = urlsplit(link)
            assert not parts.scheme and not parts.netloc and not link.startswith("/"), (page, link)
            target = (page.parent / unquote(parts.path)).resolve()
            assert target.is_file() and target.is_relative_to(site.resolve()), (page, link)
            checked += 1
    assert checked > 200
    # Each page links its JSON twin.
    assert "href='../api/suites/lbtest-v1/entries.json'" in (site / "suites" / f"{SUITE_ID}.html").read_text()


def test_api_documents_equal_what_the_server_answers(site: Path, server: Server) -> None:
    documents = sorted((site / "api").rglob("*.json"))
    assert len(documents) == 22
    for document in documents:
        path = "/" + document.relative_to(site).with_suffix("").as_posix()
        served = httpx.get(server.url + path, timeout=10)
        assert served.status_code == 200, path
        assert json.loads(document.read_text(encoding="utf-8")) == served.json(), path


def test_export_again_and_usage_errors(site: Path, db_file: Path, tmp_path: Path) -> None:
    before = {p: p.read_bytes() for p in site.rglob("*") if p.is_file()}
    result = CliRunner().invoke(app, ["leaderboard", "export", "--out", str(site), "--db", str(db_file)])
    assert result.exit_code == 0, result.output
    assert "wrote 20 pages and 22 JSON documents" in result.output
    assert {p: p.read_bytes() for p in site.rglob("*") if p.is_file()} == before  # the same bytes again

    runner = CliRunner()
    result = runner.invoke(app, ["leaderboard", "export", str(tmp_path / "a"), "--out", str(tmp_path / "b")])
    assert result.exit_code == 2 and "give the folder once" in result.output
    result = runner.invoke(app, ["leaderboard", "export", "--db", str(db_file)])
    assert result.exit_code == 2 and "envgym leaderboard export DIR" in result.output
    a_file = tmp_path / "file"
    a_file.write_text("x")
    result = runner.invoke(app, ["leaderboard", "export", str(a_file), "--db", str(db_file)])
    assert result.exit_code == 2 and "is not a folder" in result.output
