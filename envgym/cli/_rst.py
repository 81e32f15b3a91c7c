"""Env cards for the terminal: the reStructuredText the cards are written in, as readable text.

The cards (class docstrings, ``env_card()``) use a small part of reStructuredText: ``**strong**``,
``*emphasis*``, double-backquoted literals, Sphinx roles (``:class:`~.api.Env```), ``::`` before
an indented literal block and ``*`` bullets. :func:`render_rst` turns those into styled
:class:`rich.text.Text` (plain text when the output is not a terminal) and leaves every other
character as written, so nothing of a card's content is lost.
"""

from __future__ import annotations

import re

from rich.text import Text

__all__ = ["render_rst", "role_text"]

_INLINE = re.compile(
    # A literal opened by n >= 2 backquotes closes at the next run of n (as in Markdown), so a
    # card can quote backquotes themselves: ```` ```bash ```` reads ```bash.
    r"(?P<ticks>``+)(?P<literal>.+?)(?P=ticks)(?!`)"
    r"|:(?P<role>[a-z]+(?::[a-z]+)?):`(?P<target>[^`]+)`"
    r"|\*\*(?P<strong>\S(?:.*?\S)?)\*\*"
    r"|(?<![\w*])\*(?P<emphasis>[^*\s](?:[^*]*?[^*\s])?)\*(?![\w*])"
    r"|`(?P<interpreted>[^`]+)`_{0,2}",
    re.DOTALL,
)
_CALLABLE_ROLES = {"func", "meth", "py:func", "py:meth"}
_BULLET = re.compile(r"^(\s*)\* ", re.MULTILINE)


def role_text(role: str, target: str) -> str:
    """What Sphinx shows for a cross-reference: the title of ``title <target>``, else the target
    without its ``~``/``.`` prefix (``~`` keeps only the last component), ``()`` after callables."""
    titled = re.fullmatch(r"(?s)(.+?)\s*<[^>]+>", target)
    if titled:
        return titled.group(1)
    shown = target.lstrip("!")
    if shown.startswith("~"):
        shown = shown[1:].rsplit(".", 1)[-1]
    shown = shown.lstrip(".")
    return shown + "()" if role in _CALLABLE_ROLES and not shown.endswith(")") else shown


def _inline(text: str, out: Text) -> None:
    position = 0
    for match in _INLINE.finditer(text):
        out.append(text[position : match.start()])
        position = match.end()
        if match.group("literal") is not None:
            literal = match.group("literal")
            if len(match.group("ticks")) > 2 and literal.startswith(" ") and literal.endswith(" "):
                literal = literal[1:-1]
            out.append(literal, style="cyan")
        elif match.group("role") is not None:
            out.append(role_text(match.group("role"), match.group("target")), style="cyan")
        elif match.group("strong") is not None:
            out.append(match.group("strong"), style="bold")
        elif match.group("emphasis") is not None:
            out.append(match.group("emphasis"), style="italic")
        else:
            out.append(match.group("interpreted"), style="italic")
    out.append(text[position:])


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _blocks(source: str) -> list[tuple[str, bool]]:
    """The text cut into (chunk, is_literal_block); a paragraph ending in ``::`` introduces the
    more-indented block after it, whose lines are shown verbatim."""
    blocks: list[tuple[str, bool]] = []
    prose: list[str] = []
    lines = source.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        prose.append(line)
        i += 1
        if not line.rstrip().endswith("::"):
            continue
        stripped = line.rstrip()[:-2].rstrip()
        # "text::" reads "text:"; a "::" alone (or after a space) is only the marker.
        if stripped and not line.rstrip()[:-2].endswith((" ", "\t")):
            prose[-1] = stripped + ":"
        elif stripped:
            prose[-1] = stripped
        else:
            prose.pop()
        base = _indent(line)
        literal: list[str] = []
        while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > base):
            literal.append(lines[i])
            i += 1
        while literal and not literal[-1].strip():
            literal.pop()
            i -= 1
        if literal:
            blocks.append(("\n".join(prose) + "\n", False))
            blocks.append(("\n".join(literal), True))
            prose = []
    blocks.append(("\n".join(prose), False))
    return blocks


def render_rst(source: str) -> Text:
    """``source`` (an env card) as styled text without reStructuredText markup."""
    out = Text()
    for chunk, is_literal in _blocks(source):
        if is_literal:
            out.append(chunk, style="dim")
            out.append("\n" if not chunk.endswith("\n") else "")
        else:
            _inline(_BULLET.sub(lambda m: f"{m.group(1)}• ", chunk), out)
    return out
