"""The leaderboard pages in a real headless Chromium (Debian's, driven by Playwright).

Sort the suite table by clicking a header, open a submission, open an episode in the viewer, pick
another episode, take a screenshot; then the static export, opened from disk. No request may leave
the server (no CDN, no fonts, no network).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_leaderboard_support import SUITE_ID, Server, bundles_fixture, runs_fixture, suite_dir_fixture  # noqa: F401 - fixtures

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytest.importorskip("fastapi")
pytest.importorskip("sqlalchemy")
sync_api = pytest.importorskip("playwright.sync_api", reason="the browser tests need `pip install playwright`")
if shutil.which(CHROMIUM) is None:
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)


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
def server(db_file: Path, suite_dir: Path) -> Iterator[Server]:
    srv = Server(db_file, suite_dir)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from envgym.browser.pool import shutdown_browsers

    # A browser env an earlier test in this worker used keeps its Chromium (and the thread's
    # Playwright loop) a while for reuse; Playwright refuses a second sync instance in the thread.
    shutdown_browsers()
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


def _agents(page: Any) -> list[str]:
    return page.locator("#board tbody tr td:nth-child(2)").all_inner_texts()


def test_sort_open_entry_view_episode_and_screenshot(
    server: Server, browser: Any, bundles: dict[str, Any], tmp_path: Path
) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))

    page.goto(f"{server.url}/suites/{SUITE_ID}")
    assert _agents(page) == ["oracle baseline", "random baseline"]  # ranked: the oracle first
    assert page.locator("#ci-plot circle").count() == 2

    rank = page.locator("#board thead th", has_text="rank")
    rank.click()  # numbers sort high-to-low on the first click
    assert _agents(page) == ["random baseline", "oracle baseline"]
    assert rank.get_attribute("aria-sort") == "descending"
    rank.click()
    assert _agents(page) == ["oracle baseline", "random baseline"]
    page.locator("#board thead th", has_text="success").first.click()
    assert page.locator("#board tbody tr td:nth-child(3)").all_inner_texts()[0] == "1.000"

    page.get_by_role("link", name="random baseline").click()
    page.wait_for_url(f"{server.url}/entries/*")
    assert page.locator("h1").inner_text() == "random baseline"
    assert page.locator("#episodes tbody tr").count() == 8

    page.locator("#episodes a.view").nth(5).click()
    page.wait_for_url("**/episodes/5")
    episode = bundles["random"].episodes[5]
    assert page.locator("h1").inner_text() == f"{episode['entry']} seed {episode['seed']} trial {episode['trial']}"
    assert page.locator("section.turn[id^='turn-']").count() == len(episode["turns"])
    actions = page.locator("code.action").all_inner_texts()
    assert actions == [turn["action"] for turn in episode["turns"]]
    # Turns are numbered from 1, as `envgym play` numbers them.
    assert page.locator("#turn-1 .observation pre").inner_text() == episode["turns"][0]["observation"]
    assert page.locator("section.turn h3").first.inner_text().startswith("Turn 1")
    assert page.locator("#turn-0").count() == 0

    shot = tmp_path / "episode.png"
    page.screenshot(path=str(shot), full_page=True)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000

    page.select_option("#episode-picker", index=0)  # the picker navigates to another episode
    page.wait_for_url("**/episodes/0")
    first = bundles["random"].episodes[0]
    assert page.locator("h1").inner_text() == f"{first['entry']} seed {first['seed']} trial {first['trial']}"

    assert errors == []
    assert requests and all(url.startswith(server.url) for url in requests), requests
    page.close()


def test_static_export_works_from_disk(db_file: Path, browser: Any, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from envgym.cli import app

    out = tmp_path / "site"
    result = CliRunner().invoke(app, ["leaderboard", "export", "--out", str(out), "--db", str(db_file)])
    assert result.exit_code == 0, result.output
    assert (out / "index.html").is_file() and (out / "suites" / f"{SUITE_ID}.html").is_file()
    assert len(list((out / "entries").rglob("*.html"))) == 2 + 16  # two submissions, eight episodes each

    page = browser.new_page()
    page.goto((out / "index.html").as_uri())
    page.get_by_role("link", name=SUITE_ID).click()
    page.wait_for_url("**/suites/*.html")
    page.locator("#board thead th", has_text="rank").click()
    assert page.locator("#board tbody tr td:nth-child(2)").all_inner_texts() == ["random baseline", "oracle baseline"]
    page.get_by_role("link", name="oracle baseline").click()
    page.locator("#episodes a.view").first.click()
    page.wait_for_url("**/episodes/0.html")
    assert page.locator("section.turn").count() >= 2
    page.close()


def _wide_board(entries: int, agents: int) -> list[dict[str, Any]]:
    """A suite's board as :meth:`Store.leaderboard` returns it, with ``entries`` environments (the
    gui-v1 suite has 62) and long agent names: the widest page a real board makes."""
    names = [f"entry-with-a-long-name-{i:02d}" for i in range(entries)]
    board = []
    for rank in range(1, agents + 1):
        rate = 1.0 / rank
        board.append({
            "id": rank, "rank": rank, "agent_name": f"hf:smollm2+adapter-number-{rank}-with-a-long-descriptive-name",
            "agent_spec": f"hf:smollm2+adapter-{rank}", "suite_name": "wide", "suite_version": "1",
            "success_rate": rate, "ci_low": rate / 2, "ci_high": min(1.0, rate * 1.5), "mean_reward": rate,
            "pass_k": {"1": rate, "2": rate / 2, "3": rate / 3}, "trials": 3, "infra": 0, "episodes": 10 * entries,
            "submitted_at": "2026-11-29T03:47:25+00:00", "submitter": f"submitter-token-{rank}",
            "entries": [{"entry": n, "success_rate": rate} for n in names],
        })  # fmt: skip
    return board


def test_suite_page_fits_a_1280_px_screen(browser: Any) -> None:
    from envgym.leaderboard.pages import suite_page

    page = browser.new_page(viewport={"width": 1280, "height": 800})
    for entries, agents in ((2, 2), (14, 4), (62, 6)):
        page.set_content(suite_page("wide-v1", _wide_board(entries, agents), lambda link: link))
        widths = page.evaluate(
            """() => ({page: document.documentElement.scrollWidth,
                       board: document.getElementById('board').getBoundingClientRect().right})"""
        )
        assert widths["page"] <= 1280 and widths["board"] <= 1280, (entries, agents, widths)
        # Every environment is still on the page, as a row of the per-environment table.
        assert page.locator("#per-entry tbody tr").count() == entries
        assert page.locator("#board tbody tr").count() == agents
    page.close()


def test_filter_box_and_q_filter_the_rows(server: Server, browser: Any) -> None:
    import httpx

    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(f"{server.url}/suites/{SUITE_ID}")
    box = page.locator("input[data-table='board']")
    box.fill("ORACLE")  # as one types: rows holding every word, any case
    assert page.locator("#board tbody tr:not([hidden])").all_inner_texts()[0].split("\t")[1] == "oracle baseline"
    assert page.locator("#board tbody tr:not([hidden])").count() == 1
    box.fill("")
    assert page.locator("#board tbody tr:not([hidden])").count() == 2
    box.fill("random")
    box.press("Enter")  # the form asks the server: ?q=random
    page.wait_for_url("**?q=random")
    assert _agents(page) == ["random baseline"] and box.input_value() == "random"

    # The server's ?q= on every page with a list.
    assert "oracle baseline" not in httpx.get(f"{server.url}/suites/{SUITE_ID}", params={"q": "random"}).text
    both = httpx.get(f"{server.url}/suites/{SUITE_ID}", params={"q": "baseline"}).text
    assert "oracle baseline" in both and "random baseline" in both
    assert httpx.get(f"{server.url}/suites/{SUITE_ID}", params={"q": "x" * 201}).status_code == 422
    assert SUITE_ID not in httpx.get(f"{server.url}/", params={"q": "no-such-suite"}).text.split("<table")[1]
    assert SUITE_ID in httpx.get(f"{server.url}/", params={"q": "lbtest"}).text.split("<table")[1]
    entry = httpx.get(f"{server.url}/api/suites/{SUITE_ID}/entries").json()[0]["id"]
    listed = httpx.get(f"{server.url}/entries/{entry}", params={"q": "sokoban"}).text
    rows = listed.split("id='episodes'")[1]
    assert rows.count("<tr>") - 1 == 4 and "frozenlake" not in rows  # the header row, then 4 sokoban episodes
    page.close()
