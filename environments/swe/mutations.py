"""Bug injection by AST mutation, in the style of SWE-smith's procedural modifications.

:func:`enumerate_mutations` parses a module and lists every small, plausible bug it can inject
inside function bodies, one :class:`Mutation` each:

==================  ==========================================================================
kind                what changes
==================  ==========================================================================
flip_comparison     a comparison operator turns into its negation (``<`` -> ``>=``, ``in`` ->
                    ``not in``, ``is`` -> ``is not`` ...)
off_by_one          an integer constant in a comparison, an index, a slice or ``range()`` moves
                    by one
wrong_operator      an arithmetic operator (``+`` <-> ``-``, ``*`` <-> ``//`` ...), ``and`` <->
                    ``or``, or an augmented assignment's operator is swapped
wrong_constant      ``True`` <-> ``False``, or another integer constant is replaced
dropped_branch      an ``if`` statement without ``else`` is replaced by ``pass``
dropped_return      an early ``return`` (inside an ``if`` or a loop) is replaced by ``pass``
swapped_arguments   the first two positional arguments of a call trade places
wrong_default       a constant default argument of a function changes
==================  ==========================================================================

A mutation is stored as a *line edit*: the 1-based first ``line``, the ``original`` text of the
lines it touches and the ``mutated`` text that replaces them. :func:`apply_edit` applies it (and,
with the two texts swapped, reverses it), refusing when the lines no longer match.
"""

from __future__ import annotations

import ast
import random
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["KINDS", "EditError", "Mutation", "apply_edit", "enumerate_mutations", "sample_mutations", "split_lines"]

KINDS: tuple[str, ...] = (
    "flip_comparison",
    "off_by_one",
    "wrong_operator",
    "wrong_constant",
    "dropped_branch",
    "dropped_return",
    "swapped_arguments",
    "wrong_default",
)

_NEGATED_COMPARE: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_SWAPPED_BINOP: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.FloorDiv,
    ast.FloorDiv: ast.Mult,
    ast.Div: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
    ast.LShift: ast.RShift,
    ast.RShift: ast.LShift,
}
#: Longest ``if`` statement (in lines) that ``dropped_branch`` removes: the bug stays local.
MAX_DROPPED_LINES = 8


class EditError(ValueError):
    """A line edit does not match the file it is applied to."""


@dataclass(frozen=True)
class Mutation:
    """One injected bug as a line edit of ``file``.

    Attributes:
        file: the module's path relative to the library's tree root.
        line: 1-based first line the edit touches.
        kind: one of :data:`KINDS`.
        original: the original text of the touched lines (each ending in a newline).
        mutated: the text that replaces them.
        function: the qualified name of the function the bug sits in.
        description: a short internal description (``"< -> >="``); never shown to agents.
    """

    file: str
    line: int
    kind: str
    original: str
    mutated: str
    function: str
    description: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def split_lines(text: str) -> list[str]:
    """``text``'s lines with their endings, split where Python's tokenizer splits them.

    Unlike ``str.splitlines`` a form feed or another Unicode line separator inside a line does not
    start a new one, so the numbers agree with ``ast`` line numbers.
    """
    return _LINE.findall(text)


def apply_edit(source: str, line: int, old: str, new: str) -> str:
    """``source`` with the lines starting at ``line`` that read ``old`` replaced by ``new``.

    Reversing a mutation is ``apply_edit(mutated_source, m.line, m.mutated, m.original)``.
    Raises :class:`EditError` when those lines do not read ``old``.
    """
    lines = split_lines(source)
    count = len(split_lines(old))
    start = line - 1
    if start < 0 or start + count > len(lines) or "".join(lines[start : start + count]) != old:
        raise EditError(f"lines {line}..{line + count - 1} do not hold the expected text")
    return "".join(lines[:start]) + new + "".join(lines[start + count :])


def _splice(lines: list[str], node: ast.AST, replacement: str) -> tuple[int, str, str] | None:
    """(line, original line, line with ``node``'s text replaced) for a one-line node, else None."""
    if node.lineno != node.end_lineno:  # type: ignore[attr-defined]
        return None
    row = lines[node.lineno - 1]  # type: ignore[attr-defined]
    # col offsets are UTF-8 byte offsets
    raw = row.encode("utf-8")
    start, end = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
    if end is None:
        return None
    if replacement.startswith("(") and raw[start - 1 : start] == b"(" and raw[end : end + 1] == b")":
        replacement = replacement[1:-1]  # the source already holds the parentheses
    new = raw[:start].decode("utf-8") + replacement + raw[end:].decode("utf-8")
    if new == row:
        return None
    return node.lineno, row, new  # type: ignore[attr-defined]


_LOOSE = (ast.BinOp, ast.BoolOp, ast.Compare, ast.UnaryOp, ast.IfExp, ast.Lambda, ast.NamedExpr)
_OPERATORS = (ast.BinOp, ast.BoolOp, ast.Compare, ast.UnaryOp)
_PRECEDENCE: dict[type[ast.operator], int] = {
    ast.BitOr: 1,
    ast.BitXor: 2,
    ast.BitAnd: 3,
    ast.LShift: 4,
    ast.RShift: 4,
    ast.Add: 5,
    ast.Sub: 5,
    ast.Mult: 6,
    ast.MatMult: 6,
    ast.Div: 6,
    ast.FloorDiv: 6,
    ast.Mod: 6,
    ast.Pow: 7,
}


def _needs_parens(node: ast.AST, parent: ast.AST | None) -> bool:
    """Whether ``node`` written bare in ``parent`` would parse differently (Python's precedence)."""
    if not isinstance(node, _LOOSE) or parent is None:
        return False
    if isinstance(parent, (ast.Attribute, ast.Await, ast.Starred)):
        return True
    if isinstance(parent, ast.Subscript) and parent.value is node:
        return True
    if isinstance(parent, ast.Call) and parent.func is node:
        return True
    if not isinstance(parent, _OPERATORS):
        return False
    tight_unary = isinstance(parent, ast.UnaryOp) and not isinstance(parent.op, ast.Not)
    if isinstance(node, ast.BinOp):
        if isinstance(parent, ast.BinOp):
            mine, theirs = _PRECEDENCE[type(node.op)], _PRECEDENCE[type(parent.op)]
            return mine < theirs or (mine == theirs and parent.right is node) or mine == 7
        return tight_unary
    if isinstance(node, ast.Compare):
        return isinstance(parent, (ast.BinOp, ast.Compare)) or tight_unary
    if isinstance(node, ast.BoolOp):
        return True  # inside any operator (another and/or included)
    return True


def _unparse(node: ast.AST, parent: ast.AST | None) -> str:
    """``node``'s source, parenthesised only where its parent needs it (``a * (b + c)``).

    Parentheses nobody needs would point at the mutated spot, so a node standing alone (an
    ``if`` test, a call argument, an assigned value, an operand of ``and``) is written bare.
    """
    if isinstance(node, ast.BoolOp):
        # ast.unparse raises the precedence of each further operand and so parenthesises a third
        # comparison (``a and b and (c is None)``): join the operands ourselves
        joiner = " and " if isinstance(node.op, ast.And) else " or "
        loose = (ast.BoolOp, ast.IfExp, ast.Lambda, ast.NamedExpr)
        text = joiner.join(f"({ast.unparse(v)})" if isinstance(v, loose) else ast.unparse(v) for v in node.values)
    else:
        text = ast.unparse(node)
    return f"({text})" if _needs_parens(node, parent) else text


def _is_int(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


class _Collector(ast.NodeVisitor):
    def __init__(self, path: str, lines: list[str]) -> None:
        self.path = path
        self.lines = lines
        self.stack: list[str] = []
        self.depth = 0  # function nesting: mutations only inside function bodies
        self.found: list[Mutation] = []
        self.index_context: set[int] = set()  # ids of int constants used as indices/bounds
        self.parents: dict[int, ast.AST] = {}

    # --------------------------------------------------------------- helpers
    def add(self, node: ast.AST, kind: str, replacement: str, description: str) -> None:
        spliced = _splice(self.lines, node, replacement)
        if spliced is None:
            return
        line, old, new = spliced
        self._emit(line, old, new, kind, description)

    def _emit(self, line: int, old: str, new: str, kind: str, description: str) -> None:
        self.found.append(Mutation(self.path, line, kind, old, new, ".".join(self.stack), description))

    def _statement_lines(self, node: ast.stmt) -> tuple[int, str, str] | None:
        first, last = node.lineno, node.end_lineno
        if last is None or last - first + 1 > MAX_DROPPED_LINES:
            return None
        original = "".join(self.lines[first - 1 : last])
        row = self.lines[first - 1]
        head = row.encode("utf-8")[: node.col_offset].decode("utf-8")
        if head.strip():  # a statement sharing its line with another (``x = 1; if ...``)
            return None
        return first, original, f"{head}pass\n"

    # --------------------------------------------------------------- scopes
    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.stack.append(node.name)
        self.depth += 1
        self._defaults(node)
        for stmt in node.body:
            if (
                isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, str)
            ):
                continue  # the docstring
            self.visit(stmt)
        self.depth -= 1
        self.stack.pop()

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.stack.append(node.name)
        for stmt in node.body:
            self.visit(stmt)
        self.stack.pop()

    def _defaults(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for default in [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]:
            if not isinstance(default, ast.Constant):
                continue
            value = default.value
            if isinstance(value, bool):
                self.add(default, "wrong_default", repr(not value), f"default {value!r} -> {not value!r}")
            elif type(value) is int:
                new = value + 1 if value >= 0 else value - 1
                self.add(default, "wrong_default", repr(new), f"default {value!r} -> {new!r}")

    # --------------------------------------------------------------- expressions
    def visit_Compare(self, node: ast.Compare) -> None:
        if self.depth and len(node.ops) == 1:
            negated = _NEGATED_COMPARE.get(type(node.ops[0]))
            if negated is not None:
                flipped = ast.Compare(left=node.left, ops=[negated()], comparators=node.comparators)
                self.add(
                    node,
                    "flip_comparison",
                    _unparse(flipped, self.parents.get(id(node))),
                    f"{type(node.ops[0]).__name__} -> {negated.__name__}",
                )
        for child in [node.left, *node.comparators]:
            if _is_int(child):
                self.index_context.add(id(child))
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        targets = [node.slice]
        if isinstance(node.slice, ast.Slice):
            targets = [node.slice.lower, node.slice.upper, node.slice.step]
        for t in targets:
            if t is not None:
                if _is_int(t):
                    self.index_context.add(id(t))
                elif isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.USub) and _is_int(t.operand):
                    self.index_context.add(id(t.operand))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if self.depth:
            if isinstance(node.func, ast.Name) and node.func.id == "range":
                for arg in node.args:
                    if _is_int(arg):
                        self.index_context.add(id(arg))
            positional = node.args
            if (
                len(positional) >= 2
                and not any(isinstance(a, ast.Starred) for a in positional[:2])
                and ast.dump(positional[0]) != ast.dump(positional[1])
            ):
                swapped = ast.Call(
                    func=node.func, args=[positional[1], positional[0], *positional[2:]], keywords=node.keywords
                )
                self.add(node, "swapped_arguments", ast.unparse(swapped), "first two positional arguments swapped")
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if self.depth:
            swapped = _SWAPPED_BINOP.get(type(node.op))
            # ``"%s" % x`` is formatting, not arithmetic: leave it
            formatting = isinstance(node.op, ast.Mod) and isinstance(node.left, (ast.Constant, ast.JoinedStr))
            if swapped is not None and not formatting:
                new = ast.BinOp(left=node.left, op=swapped(), right=node.right)
                self.add(
                    node,
                    "wrong_operator",
                    _unparse(new, self.parents.get(id(node))),
                    f"{type(node.op).__name__} -> {swapped.__name__}",
                )
            if isinstance(node.op, (ast.Add, ast.Sub)):
                for side in (node.left, node.right):
                    if _is_int(side):
                        self.index_context.add(id(side))
        self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        if self.depth:
            other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            new = ast.BoolOp(op=other, values=node.values)
            self.add(
                node,
                "wrong_operator",
                _unparse(new, self.parents.get(id(node))),
                f"{type(node.op).__name__} -> {type(other).__name__}",
            )
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if self.depth:
            swapped = _SWAPPED_BINOP.get(type(node.op))
            if swapped is not None:
                new = ast.AugAssign(target=node.target, op=swapped(), value=node.value)
                spliced = _splice(self.lines, node, ast.unparse(new))
                if spliced is not None:
                    line, old, text = spliced
                    self._emit(line, old, text, "wrong_operator", f"{type(node.op).__name__}= -> {swapped.__name__}=")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if not self.depth:
            return
        value = node.value
        if isinstance(value, bool):
            self.add(node, "wrong_constant", repr(not value), f"{value!r} -> {not value!r}")
        elif type(value) is int:
            if id(node) in self.index_context:
                new = value + 1 if (value == 0 or (node.lineno + node.col_offset) % 2) else value - 1
                self.add(node, "off_by_one", repr(new), f"{value!r} -> {new!r}")
            elif value not in (0, 1):
                self.add(node, "wrong_constant", repr(value + 1), f"{value!r} -> {value + 1!r}")

    # --------------------------------------------------------------- statements
    def visit_If(self, node: ast.If) -> None:
        if self.depth and not node.orelse:
            edit = self._statement_lines(node)
            if edit is not None:
                self._emit(*edit, "dropped_branch", "if statement removed")
        self._early_returns(node.body)
        self._early_returns(node.orelse)
        self.generic_visit(node)

    def _loop(self, node: ast.For | ast.While | ast.AsyncFor) -> None:
        self._early_returns(node.body)
        self.generic_visit(node)

    visit_For = _loop
    visit_While = _loop
    visit_AsyncFor = _loop

    def _early_returns(self, body: list[ast.stmt]) -> None:
        if not self.depth:
            return
        for stmt in body:
            if isinstance(stmt, ast.Return) and stmt.value is not None:
                edit = self._statement_lines(stmt)
                if edit is not None:
                    self._emit(*edit, "dropped_return", "early return removed")

    def generic_visit(self, node: ast.AST) -> None:
        # nested functions and classes keep their own scope bookkeeping
        for child in ast.iter_child_nodes(node):
            self.visit(child)


def enumerate_mutations(path: str, source: str) -> list[Mutation]:
    """Every mutation of ``source`` (the module at ``path``) that still compiles, in source order."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    lines = split_lines(source)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"  # edits of a last line without its newline fail the check below and are dropped
    collector = _Collector(path, lines)
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            collector.parents[id(child)] = parent
    collector.visit(tree)
    seen: set[tuple[int, str]] = set()
    result = []
    for m in collector.found:
        key = (m.line, m.mutated)
        if key in seen or m.mutated == m.original:
            continue
        seen.add(key)
        try:
            compile(apply_edit(source, m.line, m.original, m.mutated), path, "exec")
        except (SyntaxError, ValueError, EditError):
            continue
        result.append(m)
    result.sort(key=lambda m: (m.line, m.kind, m.mutated))
    return result


def sample_mutations(mutations: list[Mutation], n: int, rng: random.Random) -> Iterator[Mutation]:
    """Up to ``n`` mutations drawn without replacement, spreading the kinds evenly (round robin)."""
    by_kind: dict[str, list[Mutation]] = {}
    for m in mutations:
        by_kind.setdefault(m.kind, []).append(m)
    for pool in by_kind.values():
        rng.shuffle(pool)
    kinds = sorted(by_kind)
    emitted = 0
    while emitted < n and any(by_kind.values()):
        for kind in kinds:
            if by_kind[kind] and emitted < n:
                yield by_kind[kind].pop()
                emitted += 1
