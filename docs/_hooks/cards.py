"""MkDocs hook: the env cards of a family, rendered into its page when the site is built.

A family page holds the line ``<!-- envgym:cards FAMILY -->``; this hook replaces it with one
section per registered id (ids whose cards are the same text share a section), each holding
the card that ``envgym info`` prints, taken from the same function, so the site cannot drift
from the code. The cards are written in a small part of reStructuredText; :func:`rst_to_markdown`
turns that part into Markdown (the terminal has its own renderer, ``envgym.cli._rst``).
"""

from __future__ import annotations

import html
import re
from collections import defaultdict
from typing import Any

from envgym.cli._rst import role_text

MARKER = re.compile(r"^<!-- envgym:cards (?P<family>[a-z_]+) -->$", re.MULTILINE)

# A Sphinx role (:class:`~envgym.core.TextEnv`) or a literal of two or more backquotes.
_ROLE_OR_LITERAL = re.compile(
    r":(?P<role>[a-z]+(?::[a-z]+)?):`(?P<target>[^`]+)`|(?P<ticks>``+)(?P<literal>.+?)(?P=ticks)(?!`)",
    re.DOTALL,  # a literal may wrap onto the next line of its paragraph
)
_BULLET = re.compile(r"^(?P<indent> *)(?P<mark>[*-] |\d+\. )")


def _code_span(text: str) -> str:
    """``text`` as a Markdown code span, with enough backquotes around it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _inline(text: str) -> str:
    """One paragraph's inline markup: literals and roles become code spans; ``<`` and ``&``
    outside them are escaped (Markdown would read ``<action>`` as an HTML tag)."""
    out: list[str] = []
    position = 0
    for match in _ROLE_OR_LITERAL.finditer(text):
        out.append(html.escape(text[position : match.start()], quote=False))
        position = match.end()
        if match.group("role") is not None:
            out.append(_code_span(role_text(match.group("role"), match.group("target"))))
        else:
            literal = match.group("literal")
            if len(match.group("ticks")) > 2 and literal.startswith(" ") and literal.endswith(" "):
                literal = literal[1:-1]
            out.append(_code_span(literal.replace("\n", " ")))
    out.append(html.escape(text[position:], quote=False))
    return "".join(out)


def rst_to_markdown(source: str) -> str:
    """The cards' reStructuredText as Markdown: paragraphs and bullets keep their words,
    ``**strong**`` and ``*emphasis*`` stay as they are (the same in Markdown), literals and
    roles become code spans, a paragraph ending in ``::`` introduces a fenced literal block, and
    nested bullets get the four-space indent Markdown needs."""
    lines = source.splitlines()
    blocks: list[str] = []
    paragraph: list[str] = []
    continuation = (0, 0)  # a bullet's text column in the source, and in the Markdown

    def flush() -> None:
        if paragraph:
            blocks.append(_inline("\n".join(paragraph)))
            paragraph.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        indent = len(line) - len(line.lstrip(" "))
        bullet = _BULLET.match(line)
        if not line.strip():
            flush()
        elif bullet:
            flush()
            new_indent = 2 * indent
            continuation = (indent + len(bullet.group("mark")), new_indent + len(bullet.group("mark")))
            paragraph.append(" " * new_indent + line.lstrip(" "))
        elif paragraph and _BULLET.match(paragraph[0]) and indent >= continuation[0]:
            paragraph.append(" " * (continuation[1] + indent - continuation[0]) + line.lstrip(" "))
        else:
            paragraph.append(line)
        i += 1
        if line.rstrip().endswith("::"):
            text = paragraph.pop().rstrip()[:-2].rstrip()
            if text.strip():
                paragraph.append(text + ":")
            flush()
            literal: list[str] = []
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip(" ")) > indent):
                literal.append(lines[i])
                i += 1
            body = [x for x in literal if x.strip()]
            cut = min((len(x) - len(x.lstrip(" ")) for x in body), default=0)
            blocks.append("```text\n" + "\n".join(x[cut:] for x in literal).strip("\n") + "\n```")
    flush()
    return "\n\n".join(blocks) + "\n"


def _title(ids: list[str]) -> str:
    """``envgym/Sokoban-v0`` for one id; ``envgym/MiniWoB-*-v0`` for ids that share a card."""
    if len(ids) == 1:
        return ids[0]
    prefix = ids[0]
    suffix = ids[0]
    for env_id in ids[1:]:
        while not env_id.startswith(prefix):
            prefix = prefix[:-1]
        while not env_id.endswith(suffix):
            suffix = suffix[1:]
    prefix = prefix[: prefix.rfind("-") + 1] if "-" in prefix else prefix
    suffix = suffix[suffix.find("-") :] if "-" in suffix else suffix
    return f"{prefix}*{suffix}"


def family_cards(family: str) -> str:
    """The Markdown of every card of ``family``: one section per card text (an id registered as
    several kinds, Gymnasium and PettingZoo, may have a card per kind), the ids and kinds that
    share it, their variants, and the card itself."""
    from envgym.cli._catalog import _card, load_entry_point
    from envgym.registration import list_envs

    specs = list_envs(family=family)
    if not specs:
        raise ValueError(f"no registered environment of family {family!r}: check the page's cards marker")
    variants: dict[str, set[tuple[str, str]]] = defaultdict(set)
    shared: dict[str, list[tuple[str, str]]] = defaultdict(list)  # card -> [(id, kind)]
    for spec in specs:
        if spec.variant_of is not None:
            variants[spec.variant_of].add((spec.id, spec.summary))
        else:
            shared[_card(load_entry_point(spec), spec)].append((spec.id, spec.kind))
    sections_of: dict[str, int] = defaultdict(int)  # an id with a card per kind gets the kind in its title
    for members in shared.values():
        for env_id in {i for i, _ in members}:
            sections_of[env_id] += 1
    sections = []
    for card, members in shared.items():
        ids = sorted({i for i, _ in members})
        kinds = sorted({k for _, k in members})
        title = f"`{_title(ids)}`"
        if any(sections_of[i] > 1 for i in ids):
            title += f" ({', '.join(kinds)})"
        lines = [f"### {title}", ""]
        if len(ids) > 1:
            lines += [f"{len(ids)} ids share this card: " + ", ".join(f"`{i}`" for i in ids) + ".", ""]
        lines += [f"Kind: {', '.join(kinds)}.", ""]
        extra = sorted({v for i in ids for v in variants[i]})
        if extra:
            lines += ["Variants:", ""]
            lines += [f"* `{vid}`" + (f": {_inline(summary)}" if summary else "") for vid, summary in extra]
            lines.append("")
        lines.append(rst_to_markdown(card))
        sections.append("\n".join(lines))
    return "\n".join(sections)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return MARKER.sub(lambda match: family_cards(match.group("family")), markdown)
