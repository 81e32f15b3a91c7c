"""The published leaderboard entries in ``leaderboards/`` (made by ``scripts/publish_baselines.sh``).

Every published bundle must verify by replay against the installed suite, and the static site
built from them (generated, never committed: the publish script writes ``leaderboards/site/``,
this test its own copy under a temporary folder) must show exactly those bundles with the
replayed scores, with links that resolve. Replay steps the recorded actions in the environments:
the bundled LLM's entry verifies without torch or transformers (checked in a fresh interpreter).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

pytest.importorskip("sqlalchemy")

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "leaderboards"
SUITE_ID = "core-v1"
AGENTS = {"random", "oracle", "hf:smollm2", "hf:smollm2+frozenlake-local"}
BUNDLES = sorted((PUBLISHED / SUITE_ID).glob("*.envgym.jsonl.gz"))

# Verify every bundle, store the verified ones in a fresh board and export it as the publish
# script does (one replay serves both checks).
VERIFY_ALL = """
import json, os, sys
from pathlib import Path
from envgym.leaderboard.pages import export_site
from envgym.leaderboard.store import Store
from envgym.leaderboard.verify import verify_bundle
site = Path(sys.argv[1])
out = {}
with Store(site.parent / "board.db") as store:
    for path in sys.argv[2:]:
        verified = verify_bundle(path)
        out[path] = {"hash": verified.bundle.content_hash, "agent": verified.bundle.manifest["agent"]["spec"],
                     "scores": verified.scores.to_dict()}
        store.add(verified, bundle_size=os.path.getsize(path))
    export_site(store, site)
out["modules"] = sorted(m for m in ("torch", "transformers") if m in sys.modules)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """Every published bundle verified in a fresh interpreter, and the static site of a board of them."""
    site = tmp_path_factory.mktemp("published") / "site"
    env = {k: v for k, v in os.environ.items() if k != "ENVGYM_BENCHMARKS"}  # the installed suites decide
    done = subprocess.run(
        [sys.executable, "-c", VERIFY_ALL, str(site), *map(str, BUNDLES)],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout), site


@pytest.fixture(scope="module")
def replayed(built: tuple[dict[str, Any], Path]) -> dict[str, Any]:
    return dict(built[0])


@pytest.fixture(scope="module")
def site(built: tuple[dict[str, Any], Path]) -> Path:
    return built[1]


def test_the_three_baselines_are_published() -> None:
    from envgym.bench.suite import load_suite
    from envgym.leaderboard.bundle import read_bundle

    suite = load_suite(SUITE_ID, check_envs=False)
    specs = set()
    for path in BUNDLES:
        bundle = read_bundle(path)
        manifest = bundle.manifest
        specs.add(manifest["agent"]["spec"])
        slug = re.sub(r"[^a-z0-9]+", "-", manifest["agent"]["spec"].lower()).strip("-")  # scripts/_agents.sh
        assert path.name.endswith(f"_{slug}.envgym.jsonl.gz")
        assert path.name[:8] == manifest["created"][:10].replace("-", "")  # <run date>_<agent>
        assert manifest["suite"]["sha256"] == suite.sha256
        assert manifest["suite_spec"]["prompt"] == dict(suite.prompt)  # the reply limits the run was held to
        assert manifest["episodes"] == len(bundle.episodes) == sum(e.episodes for e in suite.entries)
    assert specs == AGENTS
    assert sum(p.stat().st_size for p in BUNDLES) < 1_000_000


def test_every_published_bundle_verifies_by_replay_without_a_model(replayed: dict[str, Any]) -> None:
    assert replayed.pop("modules") == []  # no torch, no transformers: the actions are replayed, not regenerated
    by_agent = {r["agent"]: r["scores"] for r in replayed.values()}
    assert set(by_agent) == AGENTS
    assert by_agent["oracle"]["success_rate"] == 1.0  # the solvers win every task
    assert all(e["scored"] == e["episodes"] == 5 for s in by_agent.values() for e in s["entries"])
    # The bundled LLM's turns carry its replies (what the viewer shows), and it scores no higher than the oracle.
    from envgym.leaderboard.bundle import read_bundle

    hf = next(read_bundle(p) for p in BUNDLES if read_bundle(p).manifest["agent"]["spec"] == "hf:smollm2")
    completions = [t["completion"] for e in hf.episodes for t in e["turns"]]
    assert completions and all(isinstance(c, str) for c in completions)
    assert by_agent["hf:smollm2"]["success_rate"] <= by_agent["oracle"]["success_rate"]


def test_the_site_shows_the_published_bundles_with_their_replayed_scores(
    replayed: dict[str, Any], site: Path
) -> None:
    replayed = {k: v for k, v in replayed.items() if k != "modules"}
    board = json.loads((site / "api" / "suites" / SUITE_ID / "entries.json").read_text(encoding="utf-8"))
    assert sorted(b["content_hash"] for b in board) == sorted(r["hash"] for r in replayed.values())
    for row in board:
        claimed = next(r["scores"] for r in replayed.values() if r["hash"] == row["content_hash"])
        assert row["success_rate"] == pytest.approx(claimed["success_rate"], abs=1e-12)
        assert row["mean_reward"] == pytest.approx(claimed["mean_reward"], abs=1e-12)
        assert (site / "entries" / f"{row['id']}.html").is_file()
    assert [b["rank"] for b in board] == list(range(1, len(board) + 1))


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.links += [
            v for k, v in attrs if v is not None and (k in ("href", "src") or (tag, k) == ("option", "value"))
        ]


def test_the_site_links_resolve_and_its_json_parses(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    assert (site / "index.html") in pages and (site / "suites" / f"{SUITE_ID}.html") in pages
    for page in pages:
        parser = _Links()
        parser.feed(page.read_text(encoding="utf-8"))
        for link in parser.links:
            parts = urlsplit(link)
            assert not parts.scheme and not link.startswith("/"), (page, link)
            assert (page.parent / unquote(parts.path)).resolve().is_file(), (page, link)
    documents = sorted((site / "api").rglob("*.json"))
    assert len(documents) >= 3
    for document in documents:
        json.loads(document.read_text(encoding="utf-8"))
