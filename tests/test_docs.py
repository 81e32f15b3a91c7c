"""The documentation: the MkDocs site builds with ``--strict`` (no broken link or anchor, every page
in the nav), every family page renders the cards ``envgym info`` prints, and the README keeps the
two commands CI runs and links only to what exists."""

from __future__ import annotations

import html
import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

import pytest

from envgym.cli._catalog import _card, load_entry_point
from envgym.registration import list_envs

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
LINK = re.compile(r"(?<!!)\[[^\]]*\]\((?P<target>[^)\s]+)\)")


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("envgym_docs_cards", ROOT / "docs" / "_hooks" / "cards.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _text(page: Path) -> str:
    """A built page's text: tags dropped, entities decoded, whitespace removed (a tag may or may
    not stand between two words)."""
    raw = re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8"))
    return re.sub(r"\s+", "", html.unescape(raw))


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mkdocs", reason="the docs extra (pip install 'envgym[docs]') builds the site")
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    out = tmp_path_factory.mktemp("site")
    # strict: every warning (a link to a missing page or anchor, a page outside the nav) aborts.
    build(load_config(str(ROOT / "mkdocs.yml"), strict=True, site_dir=str(out)))
    return out


@pytest.mark.slow
def test_site_builds_strict_with_every_page(site: Path) -> None:
    pages = sorted(p.relative_to(ROOT / "docs").with_suffix(".html") for p in (ROOT / "docs").rglob("*.md"))
    assert len(pages) >= 20
    for page in pages:
        assert (site / page).is_file(), page
    # the hook's own source is not published
    assert not list(site.rglob("*.py"))


@pytest.mark.slow
def test_every_family_page_shows_the_cards_envgym_info_prints(site: Path) -> None:
    markers = {
        match.group("family"): path.stem
        for path in (ROOT / "docs" / "environments").glob("*.md")
        for match in _hook().MARKER.finditer(path.read_text(encoding="utf-8"))
    }
    # the "test" family: toy ids that test modules register (a worker may have imported one)
    specs = [spec for spec in list_envs(variants=False) if spec.family != "test"]
    families = {spec.family for spec in list_envs() if spec.family != "test"}
    assert set(markers) == families, "every registered family needs a page with its cards marker"
    for spec in specs:
        page = _text(site / "environments" / f"{markers[spec.family]}.html")
        card = _card(load_entry_point(spec), spec)
        first_line = card.splitlines()[0]
        assert spec.id in page, spec.id
        assert _squeeze(html.unescape(_hook()._inline(first_line)).replace("`", "")) in page, (spec.id, first_line)
    gui = _text(site / "environments" / "gui.html")
    assert _squeeze("130 ids share this card") in gui
    assert "``" not in gui and ":class:" not in gui  # no raw reStructuredText left


def test_cards_markdown_from_restructuredtext() -> None:
    card = (
        "Title.\n\n"
        "**Actions.** ``up`` or ``fill(id,\n"
        '"text")``, as :class:`~envgym.core.TextEnv` and :func:`envgym.make` take <action>x</action>.\n'
        "Example::\n\n"
        "    [1] button\n"
        "      [2] text\n\n"
        "* ``a``: one\n"
        "  more\n"
        "  * nested\n"
        "* two\n"
    )
    assert _hook().rst_to_markdown(card) == (
        "Title.\n\n"
        '**Actions.** `up` or `fill(id, "text")`, as `TextEnv` and `envgym.make()` take '
        "&lt;action&gt;x&lt;/action&gt;.\nExample:\n\n"
        "```text\n[1] button\n  [2] text\n```\n\n"
        "* `a`: one\n  more\n\n"
        "    * nested\n\n"
        "* two\n"
    )


def test_cards_title_names_the_ids_that_share_a_card() -> None:
    title = _hook()._title
    assert title(["envgym/Sokoban-v0"]) == "envgym/Sokoban-v0"
    assert title(["envgym/MiniWoB-click-tab-v0", "envgym/MiniWoB-enter-text-v0"]) == "envgym/MiniWoB-*-v0"
    assert title(["envgym/Coop-SLCD-Text-v0", "envgym/Coop-PublicGoods-Text-v0"]) == "envgym/Coop-*-Text-v0"


def _github_slug(heading: str) -> str:
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_readme_relative_links_and_anchors_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    targets = [m.group("target") for m in LINK.finditer(text)]
    relative = [t for t in targets if not re.match(r"[a-z]+:", t)]
    assert any(t.startswith("docs/") for t in relative)
    for target in relative:
        path, _, anchor = target.partition("#")
        file = (README.parent / path) if path else README
        assert file.exists(), f"README links to {target!r}, which does not exist"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", file.read_text(encoding="utf-8"), re.MULTILINE)
            assert anchor in {_github_slug(h) for h in headings}, f"README links to a missing anchor: {target!r}"


def test_readme_keeps_the_two_commands_ci_runs() -> None:
    text = README.read_text(encoding="utf-8")
    block = re.search(r"## The two commands\n.*?```bash\n(?P<body>.*?)```", text, re.DOTALL)
    assert block is not None
    commands = [line.split("#")[0].strip() for line in block.group("body").splitlines()]
    assert commands == ["bash scripts/run.sh", "bash scripts/test.sh"]
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert (ROOT / "scripts" / "run.sh").is_file() and (ROOT / "scripts" / "test.sh").is_file()


def test_the_architecture_cited_is_in_the_repository() -> None:
    cited = [ROOT / "README.md", ROOT / "tests" / "test_layering.py", *(ROOT / "docs").rglob("*.md")]
    for path in cited:
        assert "ARCHITECTURE.md" not in path.read_text(encoding="utf-8"), f"{path} cites a missing ARCHITECTURE.md"
    assert "docs/architecture.md" in (ROOT / "tests" / "test_layering.py").read_text(encoding="utf-8")
    architecture = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for folder in ("envgym", "environments", "agents", "benchmarks", "leaderboards", "tests"):
        assert f"| `{folder}/` |" in architecture, f"the layout table has no row for {folder}/"


def test_gui_oracle_figure_states_the_turn_limit_it_was_measured_with() -> None:
    results = json.loads((ROOT / "benchmarks" / "perf" / "results" / "gui_oracle.json").read_text(encoding="utf-8"))
    page = (ROOT / "docs" / "environments" / "gui.md").read_text(encoding="utf-8")
    claim = re.search(r">= 98 % over (?P<seeds>\d+) test-split seeds with a turn limit of (?P<turns>\d+)", page)
    assert claim is not None, "the oracle's figure must name the turn limit it was measured with"
    assert int(claim.group("turns")) == results["oracle"]["max_turns"]
    assert int(claim.group("seeds")) == results["oracle"]["seeds"]
    supported = results["supported"]
    assert min(results["tasks"][t]["oracle"]["success"] for t in supported) >= 0.98
    perfect = sum(results["tasks"][t]["oracle"]["success"] == 1.0 for t in supported)
    assert f"{perfect} at 100 %" in page


def _readme_examples() -> dict[str, str]:
    """The README's per-family Python examples, by family name (the bold title before each)."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## One example per family", 1)[1].split("\n## ", 1)[0]
    found = re.findall(r"\*\*(?P<family>[^*]+)\*\* \(\[page\].*?```python\n(?P<code>.*?)```", section, re.DOTALL)
    return dict(found)


def test_readme_has_an_example_for_every_family() -> None:
    pages = {p.stem for p in (ROOT / "docs" / "environments").glob("*.md")} - {"index"}
    examples = _readme_examples()
    assert len(examples) == len(pages) == len({spec.family for spec in list_envs() if spec.family != "test"})


# The examples that need a browser, a sandbox, highway-env or a search index built are run by
# their families' own tests; these four run here as written.
@pytest.mark.parametrize("family", ["Games", "Household", "Coopetition", "Customer service"])
def test_readme_example_runs(family: str) -> None:
    code = _readme_examples()[family]
    namespace: dict[str, object] = {}
    exec(compile(code, f"README.md ({family})", "exec"), namespace)  # noqa: S102 (the README's own example)
    env = namespace["env"]
    env.close()  # type: ignore[attr-defined]


def test_the_site_settings_refuse_a_broken_anchor(tmp_path: Path) -> None:
    """The strictness the site build relies on: mkdocs.yml's validation settings turn a link to a
    missing anchor (MkDocs only logs those by default) into a failed build; a two-page site,
    without the cards hook."""
    pytest.importorskip("mkdocs", reason="the docs extra (pip install 'envgym[docs]') builds the site")
    import yaml
    from mkdocs.commands.build import build
    from mkdocs.config import load_config
    from mkdocs.exceptions import Abort

    settings = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [the page](page.md#no-such-heading).\n", encoding="utf-8")
    (docs / "page.md").write_text("# Page\n\n## A heading\n", encoding="utf-8")
    config = {
        "site_name": "t",
        "docs_dir": str(docs),
        "validation": settings["validation"],
        "markdown_extensions": settings["markdown_extensions"],
    }
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    with pytest.raises(Abort):
        build(load_config(str(tmp_path / "mkdocs.yml"), strict=True, site_dir=str(tmp_path / "site")))
    (docs / "index.md").write_text("# Home\n\nSee [the page](page.md#a-heading).\n", encoding="utf-8")
    build(load_config(str(tmp_path / "mkdocs.yml"), strict=True, site_dir=str(tmp_path / "site")))
    assert (tmp_path / "site" / "page" / "index.html").is_file()


def test_the_command_line_page_lists_every_short_flag() -> None:
    """Every short flag of the CLI (walked from the live command tree) has its row, with its one
    long name, in docs/cli.md's table."""
    import typer

    from envgym.cli import app

    def walk(command: object) -> list[object]:
        return [command, *(c for sub in getattr(command, "commands", {}).values() for c in walk(sub))]

    shorts: dict[str, set[str]] = {}
    for command in walk(typer.main.get_command(app)):
        for param in getattr(command, "params", []):
            names = [*getattr(param, "opts", []), *getattr(param, "secondary_opts", [])]
            for name in names:
                if re.fullmatch(r"-\w", name):
                    shorts.setdefault(name, set()).add(max(param.opts, key=len))
    assert len(shorts) >= 10
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8").split("## Short flags", 1)[1]
    rows = dict(re.findall(r"^\| `(-\w)` \| `(--[\w-]+)` \|", page, re.MULTILINE))
    for short, longs in shorts.items():
        assert short in rows, f"docs/cli.md's short flags table has no row for {short}"
        assert longs == {rows[short]}, (short, longs, rows[short])
