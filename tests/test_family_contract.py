"""The family contract (``envgym.families``): every family keeps it, the checks catch what they
claim to catch, and ``docs/family-contract.md`` lists exactly the checks the code runs."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from envgym.errors import EnvgymError
from envgym.families import (
    CARD_SECTIONS,
    CHECKS,
    card_sections,
    check_family,
    contract_table,
    family_names,
    load_family,
)
from envgym.registration import list_envs

ROOT = Path(__file__).resolve().parents[1]


def test_every_registered_family_is_a_contract_family() -> None:
    # (toy environments other tests register live outside envgym.environments)
    built_in = {s.family for s in list_envs() if s.entry_point.startswith("envgym.environments.")}
    assert built_in == set(family_names())
    assert {"games", "household", "webshop", "swe", "gui", "coopetition", "driving", "service"} <= set(family_names())


@pytest.mark.parametrize("family", family_names())
def test_the_family_keeps_the_contract(family: str) -> None:
    problems = check_family(family)
    assert not problems, "\n".join(map(str, problems))


def test_the_docs_page_lists_exactly_the_checks_the_code_runs() -> None:
    page = (ROOT / "docs" / "family-contract.md").read_text(encoding="utf-8")
    assert contract_table() in page
    checks_section = page.split("## The checks", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `(\w+)` \|", checks_section, flags=re.MULTILINE)
    assert listed == [c.name for c in CHECKS]
    for section in CARD_SECTIONS:
        assert section in page


def test_card_sections_reads_both_title_forms() -> None:
    card = "Title line.\n\n**Description.** one\ntwo\n\n**Reward components** (all):\n* ``a``\n**Version history.** v0"
    sections = card_sections(card)
    assert list(sections) == ["Description", "Reward components", "Version history"]
    assert sections["Description"].split() == ["one", "two"]
    assert "``a``" in sections["Reward components"]


# ------------------------------------------------------------------ the checks catch breakage
@pytest.fixture
def games_copy(tmp_path: Path) -> Path:
    """A checkout root holding the games family's files (suite, bundles, perf script, tests)."""
    for rel in ("benchmarks/games-v1.yaml", "benchmarks/perf/envs.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    shutil.copytree(ROOT / "leaderboards" / "games-v1", tmp_path / "leaderboards" / "games-v1")
    shutil.copytree(ROOT / "tests" / "environments" / "games", tmp_path / "tests" / "environments" / "games")
    return tmp_path


def _checks_failing(family: str, root: Path) -> set[str]:
    return {p.check for p in check_family(family, root=root)}


def test_a_copy_of_a_family_root_passes(games_copy: Path) -> None:
    assert check_family("games", root=games_copy) == []


def test_missing_files_are_found(games_copy: Path) -> None:
    (games_copy / "benchmarks" / "perf" / "envs.py").unlink()
    shutil.rmtree(games_copy / "leaderboards" / "games-v1")
    for test in (games_copy / "tests" / "environments" / "games").glob("test_*.py"):
        test.unlink()
    (games_copy / "benchmarks" / "games-v1.yaml").unlink()
    assert _checks_failing("games", games_copy) == {"perf", "baselines", "tests", "suite"}


def test_a_suite_playing_another_familys_id_is_found(games_copy: Path) -> None:
    suite = games_copy / "benchmarks" / "games-v1.yaml"
    suite.write_text(suite.read_text().replace("envgym/Sokoban-v0", "envgym/Household-v0", 1))
    problems = [p for p in check_family("games", root=games_copy) if p.check == "suite"]
    assert len(problems) == 1 and "envgym/Household-v0" in problems[0].message


def test_a_perf_script_that_measures_nothing_named_is_found(games_copy: Path) -> None:
    (games_copy / "benchmarks" / "perf" / "envs.py").write_text('"""Prints a greeting."""\n')
    problems = [p for p in check_family("games", root=games_copy) if p.check == "perf"]
    assert len(problems) == 1 and "reset" in problems[0].message


def test_the_old_card_signature_and_a_card_without_sections_are_found(monkeypatch: pytest.MonkeyPatch) -> None:
    from envgym.environments.games.sokoban import SokobanEnv

    monkeypatch.setattr(SokobanEnv, "env_card", classmethod(lambda cls: "Sokoban."))
    found = {p.check: p.message for p in check_family("games")}
    assert "env_card(cls, kwargs=None)" in found["env_card"]
    assert "SokobanEnv" in found["env_card"]


def test_a_card_missing_a_section_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    from envgym.environments.games.sokoban import SokobanEnv

    card = SokobanEnv.env_card()
    monkeypatch.setattr(SokobanEnv, "__doc__", card.replace("**Version history.**", "Version history:"))
    problems = [p for p in check_family("games") if p.check == "card_sections"]
    assert len(problems) == 1
    assert "envgym/Sokoban-v0 (gymnasium) and 3 more" in problems[0].message
    assert problems[0].message.endswith("lacks the section(s) Version history (**<Section>.** paragraphs)")


def test_an_undeclared_or_wrong_reward_basis_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    from envgym.environments.games.sokoban import SokobanEnv

    monkeypatch.delattr(SokobanEnv, "reward_basis")  # falls back to TextEnv's, which omits box_on_target_reward
    messages = [p.message for p in check_family("games") if p.check == "reward_basis"]
    assert messages == [
        (
            "envgym.environments.games.sokoban:SokobanEnv inherits reward_basis from TextEnv but its reward_components "
            "from SokobanEnv: declare reward_basis beside reward_components"
        ),
        (
            "the Reward basis section of envgym.environments.games.sokoban:SokobanEnv's card does not mark "
            "box_on_target_reward as diagnostic"
        ),
    ]
    monkeypatch.setattr(SokobanEnv, "reward_basis", ("success_reward", "win_reward"), raising=False)
    messages = [p.message for p in check_family("games") if p.check == "reward_basis"]
    assert messages[0] == (
        "envgym.environments.games.sokoban:SokobanEnv.reward_basis names ['win_reward'], which are not in its "
        "reward_components"
    )
    monkeypatch.setattr(SokobanEnv, "reward_basis", ("success_reward",), raising=False)
    messages = [p.message for p in check_family("games") if p.check == "reward_basis"]
    assert messages == [
        (
            "the Reward basis section of envgym.environments.games.sokoban:SokobanEnv's card does not mark "
            "box_on_target_reward, invalid_action_reward, step_cost_reward as diagnostic"
        )
    ]


def test_an_oracle_without_a_waiver_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    from envgym.environments.household import CONTRACT

    monkeypatch.setitem(CONTRACT, "oracle_waivers", {})
    messages = [p.message for p in check_family("household") if p.check == "oracle"]
    assert messages == [
        (
            "envgym.environments.household.textworld_env:TextWorldEnv: no oracle solver envgym.agents.solvers.textworld "
            "(agents/solvers/textworld.py), no waiver"
        )
    ]


def test_bad_contract_data_is_refused_with_the_valid_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    from envgym.environments.games import CONTRACT

    with pytest.raises(EnvgymError, match="unknown family 'gmaes'. Did you mean 'games'"):
        load_family("gmaes")
    monkeypatch.setitem(CONTRACT, "suit", "games-v1")
    with pytest.raises(EnvgymError, match="unknown key 'suit'. Did you mean 'suite'"):
        load_family("games")
    monkeypatch.delitem(CONTRACT, "suit")
    monkeypatch.setitem(CONTRACT, "baselines_waiver", "  ")
    with pytest.raises(EnvgymError, match="must be a written reason"):
        load_family("games")


def _late_imports(path: Path) -> list[int]:
    """Lines of module-level imports that come after a function or class (a bottom-of-module import
    holding an import cycle together)."""
    import ast

    body = ast.parse(path.read_text(encoding="utf-8")).body
    first = next((n.lineno for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef))), None)
    if first is None:
        return []
    return [n.lineno for n in body if isinstance(n, (ast.Import, ast.ImportFrom)) and n.lineno > first]


def test_no_family_module_imports_at_its_bottom() -> None:
    late = {
        str(p.relative_to(ROOT)): lines
        for p in sorted((ROOT / "environments").rglob("*.py"))
        if "__pycache__" not in p.parts and (lines := _late_imports(p))
    }
    assert late == {}
