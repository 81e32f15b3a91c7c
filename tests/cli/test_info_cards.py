"""``envgym info`` shows env cards as readable text, not as reStructuredText source.

The cards of every registered id are rendered without building an environment (the card is a
class attribute), so the sweep over all ids stays fast; two ids go through the real command.
"""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from envgym.cli import app
from envgym.cli._catalog import _card, load_entry_point
from envgym.cli._rst import render_rst
from envgym.registration import list_envs

# Markup that must not survive rendering: a run of exactly two backquotes (a literal's fence; a
# literal may itself hold backquotes, e.g. SWE's ```bash), ** next to a word (strong; the
# power operator inside literals is written with spaces), Sphinx roles, and the "::" marker.
RAW_MARKUP = {
    "double backquotes": re.compile(r"(?<!`)``(?!`)"),
    "strong": re.compile(r"\*\*\S|\S\*\*"),
    "role": re.compile(r":(?:class|func|meth|mod|data|attr|obj|exc):`"),
    "literal-block marker": re.compile(r"::\s*$", re.MULTILINE),
}


def _cards() -> dict[str, str]:
    """One registered id per distinct card (many ids share their class's card)."""
    cards: dict[str, str] = {}
    for spec in list_envs():
        cards.setdefault(_card(load_entry_point(spec), spec), spec.id)
    return {env_id: card for card, env_id in cards.items()}


CARDS = _cards()


def test_every_card_renders_without_markup_and_keeps_its_content() -> None:
    assert len(CARDS) > 40  # every family's classes, not an empty registry
    for env_id, card in CARDS.items():
        shown = render_rst(card).plain
        for name, pattern in RAW_MARKUP.items():
            found = pattern.search(shown)
            assert found is None, f"{env_id}: raw {name} left: {shown[max(0, found.start() - 60) : found.end() + 60]!r}"
        # Nothing of the content is lost: every section title and every literal's text remains.
        prose = re.sub(r"``.+?``", " ", card, flags=re.DOTALL)  # a literal may hold ** (a power)
        for title in re.findall(r"(?<!\S)\*\*(\S[^*]*?\S)\*\*", prose):
            assert title in shown, (env_id, title)
        for literal in re.findall(r"(?<!`)``([^`]+?)``(?!`)", card):
            assert literal in shown.replace("\n", " ") or literal.replace("\n", " ") in shown.replace("\n", " "), (
                env_id,
                literal,
            )
        assert len(shown) > 0.8 * len(card)


def test_render_rst_constructs() -> None:
    source = (
        "**Actions.** A cell such as ``b2``; *valid* moves only, see :class:`~.api.CoopEnv`,\n"
        ":func:`.core.grade` and :mod:`envgym.multiagent` (``rho = 0.8 ** 1.2``).\n"
        "\n"
        "* ``easy``: random;\n"
        "    * ``hard``: minimax.\n"
        "\n"
        "One string::\n"
        "\n"
        "    Task: click **this** ``x``\n"
        "      [1] button\n"
        "\n"
        "A fenced ```` ```bash ```` block.\n"
    )
    text = render_rst(source)
    assert text.plain == (
        "Actions. A cell such as b2; valid moves only, see CoopEnv,\n"
        "core.grade() and envgym.multiagent (rho = 0.8 ** 1.2).\n"
        "\n"
        "• easy: random;\n"
        "    • hard: minimax.\n"
        "\n"
        "One string:\n"
        "\n"
        "    Task: click **this** ``x``\n"
        "      [1] button\n"
        "\n"
        "A fenced ```bash block.\n"
    )
    styles = {text.plain[span.start : span.end]: str(span.style) for span in text.spans}
    assert styles["Actions."] == "bold" and styles["valid"] == "italic" and styles["b2"] == "cyan"


runner = CliRunner()


@pytest.mark.parametrize(
    ("env_id", "kept"),
    [
        # Section titles and a known value of each card.
        ("envgym/Countdown-v0", ["Description.", "Reward components.", "0.2 * (1 - d / 10)", "sample_action()"]),
        ("envgym/TicTacToe-v0", ["Opponents by difficulty:", "• hard: perfect minimax play", "1 = a1, 3 = c1, 9 = c3"]),
    ],
)
def test_info_prints_the_rendered_card(env_id: str, kept: list[str]) -> None:
    result = runner.invoke(app, ["info", env_id])
    assert result.exit_code == 0, result.stderr
    card = result.stdout.split("family ", 1)[0]
    for name, pattern in RAW_MARKUP.items():
        assert pattern.search(card) is None, (name, card)
    flat = " ".join(card.split())
    for text in kept:
        assert " ".join(text.split()) in flat, text
