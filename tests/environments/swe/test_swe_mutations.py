"""AST bug injection (environments/swe/mutations.py): every kind, line edits that apply and reverse."""

from __future__ import annotations

import random

import pytest
from envgym.environments.swe.mutations import KINDS, EditError, apply_edit, enumerate_mutations, sample_mutations

SOURCE = '''\
"""A module."""

LIMIT = 3


def clamp(x, lo, hi, strict=False, step=2):
    """Docstring: never mutated."""
    if x < lo:
        return lo
    if x > hi and strict:
        return hi
    total = x + step
    total -= 1
    items = list(range(0, 4))
    first = items[1]
    return max(total, first)


class Box:
    def size(self, items):
        for item in items:
            if item is None:
                return 0
        return len(items) * 10
'''


def _by_kind(mutations):
    kinds: dict[str, list] = {}
    for m in mutations:
        kinds.setdefault(m.kind, []).append(m)
    return kinds


def test_every_kind_is_produced_and_each_mutant_compiles_and_reverses() -> None:
    mutations = enumerate_mutations("pkg/mod.py", SOURCE)
    kinds = _by_kind(mutations)
    assert set(kinds) == set(KINDS)
    for m in mutations:
        mutated = apply_edit(SOURCE, m.line, m.original, m.mutated)
        assert mutated != SOURCE
        compile(mutated, "pkg/mod.py", "exec")
        assert apply_edit(mutated, m.line, m.mutated, m.original) == SOURCE
        assert m.file == "pkg/mod.py" and m.function  # always inside a function


def test_the_mutations_are_the_documented_edits() -> None:
    kinds = _by_kind(enumerate_mutations("m.py", SOURCE))
    flips = {(m.line, m.mutated.strip()) for m in kinds["flip_comparison"]}
    assert (10, "if x <= hi and strict:") in flips
    assert (8, "if x >= lo:") in flips and (22, "if item is not None:") in flips
    assert any(m.mutated.strip() == "total = x - step" for m in kinds["wrong_operator"])
    assert any(m.mutated.strip() == "total += 1" for m in kinds["wrong_operator"])
    assert any(m.mutated.strip() == "if x > hi or strict:" for m in kinds["wrong_operator"])
    assert any(m.mutated.strip() in ("first = items[2]", "first = items[0]") for m in kinds["off_by_one"])
    defaults = {m.mutated.strip() for m in kinds["wrong_default"]}
    assert "def clamp(x, lo, hi, strict=True, step=2):" in defaults
    assert "def clamp(x, lo, hi, strict=False, step=3):" in defaults
    assert any(m.mutated.strip() == "return len(items) * 11" for m in kinds["wrong_constant"])
    # an if without else (lines 10-11) replaced by pass; an early return replaced by pass
    dropped = [m for m in kinds["dropped_branch"] if m.line == 10]
    assert dropped and dropped[0].original.count("\n") == 2 and dropped[0].mutated == "    pass\n"
    assert any(m.line == 23 and m.mutated.strip() == "pass" for m in kinds["dropped_return"])
    assert any(m.mutated.strip() == "return max(first, total)" for m in kinds["swapped_arguments"])
    # module level and docstrings are never touched
    assert all(m.line > 5 for ms in kinds.values() for m in ms)


def test_apply_edit_refuses_lines_that_do_not_match() -> None:
    m = enumerate_mutations("m.py", SOURCE)[0]
    with pytest.raises(EditError):
        apply_edit(SOURCE, m.line + 1, m.original, m.mutated)
    with pytest.raises(EditError):
        apply_edit(SOURCE, 10_000, m.original, m.mutated)


def test_unparsable_source_gives_no_mutation_and_sampling_spreads_kinds() -> None:
    assert enumerate_mutations("bad.py", "def f(:\n") == []
    mutations = enumerate_mutations("m.py", SOURCE)
    picked = list(sample_mutations(mutations, len(KINDS), random.Random(0)))
    assert len(picked) == len(KINDS) and {m.kind for m in picked} == set(KINDS)
    again = list(sample_mutations(mutations, len(KINDS), random.Random(0)))
    assert picked == again
