"""The accessibility-tree text of the MiniWoB envs, parsed for the MiniWoB solver.

The envs write one element per line (``environments/gui``'s observation format)::

    [12] button "Submit" focused
      [13] checkbox "abc" checked
    StaticText "some words"

an optional ``[id]``, a role, an optional quoted name (backslash escapes) and properties
(``key="value"`` or bare flags), indented two spaces per depth. :func:`parse_axtree` turns it into
:class:`Node` objects with parents and children, in page order.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Node", "Tree", "observation_parts", "parse_axtree"]

_LINE = re.compile(r"^(?P<indent> *)(?:\[(?P<id>[^\]\s]+)\]\s*)?(?P<role>[^\s\",]+)(?P<rest>.*)$")
_QUOTED = r'"((?:[^"\\]|\\.)*)"'
_NAME = re.compile(r"^\s*" + _QUOTED)
_PROP = re.compile(r"\s*([A-Za-z_][\w-]*)(?:=(?:" + _QUOTED + r"|(\S+)))?")
_ESC = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}


def _unescape(text: str) -> str:
    def sub(m: re.Match[str]) -> str:
        s = m.group(1)
        if len(s) == 5 and s[0] == "u":
            return chr(int(s[1:], 16))
        return _ESCAPES.get(s, s)

    return _ESC.sub(sub, text)


@dataclass(eq=False)
class Node:
    """One line of the tree."""

    id: str | None
    role: str
    name: str
    props: dict[str, Any]
    depth: int
    index: int
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)

    def prop(self, key: str, default: Any = None) -> Any:
        return self.props.get(key, default)

    @property
    def value(self) -> str:
        v = self.props.get("value", "")
        return v if isinstance(v, str) else ""

    @property
    def checked(self) -> bool:
        v = self.props.get("checked")
        return v is True or v in ("true", "checked", "mixed")

    @property
    def selected(self) -> bool:
        v = self.props.get("selected")
        return v is True or v == "true"

    @property
    def expanded(self) -> bool | None:
        v = self.props.get("expanded")
        if v is None:
            return None
        return v is True or v == "true"

    def walk(self) -> Iterator[Node]:
        yield self
        for child in self.children:
            yield from child.walk()

    def text(self) -> str:
        """Its name and its descendants' names, space-joined (what a person reads in it)."""
        parts = [n.name for n in self.walk() if n.name]
        return " ".join(parts)

    def ancestors(self) -> Iterator[Node]:
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def role_is(self, *roles: str) -> bool:
        return self.role.lower() in roles

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Node([{self.id}] {self.role} {self.name!r} {self.props})"


class Tree:
    """The parsed tree: ``nodes`` in page order, ``roots`` the top-level lines."""

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes
        self.roots = [n for n in nodes if n.parent is None]
        self.by_id = {n.id: n for n in nodes if n.id is not None}

    def find(self, pred: Any) -> list[Node]:
        return [n for n in self.nodes if pred(n)]

    def with_role(self, *roles: str) -> list[Node]:
        roles_l = tuple(r.lower() for r in roles)
        return [n for n in self.nodes if n.role.lower() in roles_l]

    def named(self, name: str, *, clickable: bool = True) -> list[Node]:
        """Nodes whose name is ``name`` (exactly, after trimming), deepest first among nested
        duplicates; with ``clickable`` only nodes with an id."""
        out = [n for n in self.nodes if n.name.strip() == name and (n.id is not None or not clickable)]
        # a node and its own single descendant can both carry the text: keep the innermost
        inner = [n for n in out if not any(m is not n and n in list(m.ancestors()) for m in out)]
        return inner


def parse_axtree(text: str) -> Tree:
    nodes: list[Node] = []
    stack: list[Node] = []
    for raw in text.splitlines():
        if not raw.strip():
            continue
        m = _LINE.match(raw)
        if m is None:
            continue
        indent = len(m.group("indent"))
        depth = indent // 2
        rest = m.group("rest")
        name = ""
        nm = _NAME.match(rest)
        if nm is not None:
            name = _unescape(nm.group(1))
            rest = rest[nm.end() :]
        props: dict[str, Any] = {}
        pos = 0
        while pos < len(rest):
            pm = _PROP.match(rest, pos)
            if pm is None or pm.end() == pos:
                pos += 1
                continue
            key = pm.group(1)
            if pm.group(2) is not None:
                props[key] = _unescape(pm.group(2))
            elif pm.group(3) is not None:
                props[key] = pm.group(3)
            else:
                props[key] = True
            pos = pm.end()
        node = Node(m.group("id"), m.group("role"), name, props, depth, len(nodes))
        while stack and stack[-1].depth >= depth:
            stack.pop()
        if stack:
            node.parent = stack[-1]
            stack[-1].children.append(node)
        stack.append(node)
        nodes.append(node)
    return Tree(nodes)


def observation_parts(observation: Any, info: dict[str, Any]) -> tuple[str, str]:
    """(utterance, accessibility-tree text) from a ``text`` or ``dict`` observation."""
    task = info.get("task") or {}
    utterance = str(task.get("utterance") or task.get("goal") or "")
    if isinstance(observation, dict):
        axtree = str(observation.get("axtree", ""))
        utterance = utterance or str(observation.get("goal", ""))
        return utterance, axtree
    text = str(observation)
    lines = text.splitlines()
    if lines and lines[0].startswith("Task:"):
        utterance = utterance or lines[0][len("Task:") :].strip()
        lines = lines[1:]
    return utterance, "\n".join(lines)
