"""The generated questions of envgym/Tools-Code-v0: math and data questions with one verifiable answer.

Every task is a pure function of its random stream: a kind, its parameters, the question text,
the gold answer (computed here, in plain Python) and, for the data questions, a CSV file the
question is about. Kinds:

* ``multiples``: the sum of the multiples of a or b below n;
* ``arithmetic``: the sum of the first n terms of an arithmetic sequence;
* ``choose``: binomial coefficients, "how many ways to choose k of n";
* ``digit_sum``: how many integers from 1 to n have digit sum s;
* ``lattice``: shortest lattice paths avoiding one point;
* ``csv_total``, ``csv_mean``, ``csv_top``: a total, a mean (to 2 decimals) and an arg-max over
  ``data.csv`` (a few hundred sales rows);
* ``overlaps``, ``top_letter``, ``palindromes``: string puzzles (overlapping occurrences, the
  most frequent letter, distinct palindromic substrings).

The split of a task is a CRC-32 of its kind and parameters (one in five in ``test``), so the
splits share no task.
"""

from __future__ import annotations

import csv
import io
import math
import random
import zlib
from dataclasses import dataclass, field
from typing import Any

__all__ = ["KINDS", "TEST_MODULUS", "CodeTask", "answer_matches", "draw_task"]

TEST_MODULUS = 5
#: Absolute tolerance on answers asked "rounded to 2 decimal places".
ROUNDED_TOLERANCE = 0.005 + 1e-9

_REGIONS = ("North", "South", "East", "West", "Central")
_PRODUCTS = ("anvil", "bolt", "clamp", "drill", "easel", "funnel", "gasket", "hinge")


@dataclass(frozen=True)
class CodeTask:
    """One question: its text, its gold answer, and the files the sandbox starts with."""

    kind: str
    params: tuple[Any, ...]
    question: str
    answer: int | float | str
    tolerance: float = 0.0
    files: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.params!r}"

    @property
    def split(self) -> str:
        return "test" if zlib.crc32(self.key.encode()) % TEST_MODULUS == 0 else "train"


def _multiples(rng: random.Random) -> CodeTask:
    a, b = rng.sample(range(2, 20), 2)
    n = rng.randint(1_000, 2_000_000)

    def below(k: int) -> int:  # the sum of the multiples of k below n
        m = (n - 1) // k
        return k * m * (m + 1) // 2

    answer = below(a) + below(b) - below(a * b // math.gcd(a, b))
    return CodeTask(
        "multiples", (a, b, n), f"What is the sum of all positive integers below {n} that are multiples of {a} or {b}?",
        answer,
    )  # fmt: skip


def _arithmetic(rng: random.Random) -> CodeTask:
    a, d, n = rng.randint(-500, 500), rng.randint(-40, 40), rng.randint(10, 5000)
    answer = n * (2 * a + (n - 1) * d) // 2
    return CodeTask(
        "arithmetic",
        (a, d, n),
        f"An arithmetic sequence starts at {a} and each term adds {d} to the one before. "
        f"What is the sum of its first {n} terms?",
        answer,
    )


def _choose(rng: random.Random) -> CodeTask:
    n = rng.randint(20, 120)
    k = rng.randint(3, n // 2)
    return CodeTask(
        "choose", (n, k), f"In how many ways can {k} items be chosen from {n} distinct items (order does not matter)?",
        math.comb(n, k),
    )  # fmt: skip


def _digit_sum(rng: random.Random) -> CodeTask:
    n = rng.randint(1_000, 300_000)
    s = rng.randint(5, 30)
    answer = _count_digit_sum(n, s)
    return CodeTask("digit_sum", (n, s), f"How many integers from 1 to {n} have a digit sum of exactly {s}?", answer)


def _count_digit_sum(n: int, s: int) -> int:
    """How many integers in [1, n] have digit sum ``s`` (``s`` >= 1), digit by digit from the left."""
    digits = list(map(int, str(n)))
    # ways[t]: numbers of the remaining free digits summing to t, for each length
    total, prefix = 0, 0
    for i, top in enumerate(digits):
        free = len(digits) - i - 1
        for d in range(top):
            need = s - prefix - d
            if need >= 0:
                total += _fill(free, need)
        prefix += top
    return total + (prefix == s)


def _fill(length: int, target: int) -> int:
    """Strings of ``length`` digits 0-9 summing to ``target`` (inclusion-exclusion over digits > 9)."""
    if target < 0 or target > 9 * length:
        return 0
    return sum(
        (-1) ** j * math.comb(length, j) * math.comb(target - 10 * j + length - 1, length - 1)
        for j in range(min(length, target // 10) + 1)
    ) if length else int(target == 0)  # fmt: skip


def _lattice(rng: random.Random) -> CodeTask:
    a, b = rng.randint(4, 16), rng.randint(4, 16)
    c, d = rng.randint(1, a - 1), rng.randint(1, b - 1)
    answer = math.comb(a + b, a) - math.comb(c + d, c) * math.comb(a - c + b - d, a - c)
    return CodeTask(
        "lattice",
        (a, b, c, d),
        f"How many shortest lattice paths lead from (0, 0) to ({a}, {b}), each step moving one unit right "
        f"or one unit up, without passing through the point ({c}, {d})?",
        answer,
    )


def _sales(rng: random.Random) -> tuple[list[dict[str, Any]], str]:
    rows = []
    for i in range(rng.randint(200, 600)):
        rows.append(
            {
                "order_id": 1000 + i,
                "region": rng.choice(_REGIONS),
                "product": rng.choice(_PRODUCTS),
                "quantity": rng.randint(1, 50),
                "unit_price": round(rng.uniform(0.5, 99.99), 2),
            }
        )
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return rows, out.getvalue()


def _csv_total(rng: random.Random) -> CodeTask:
    rows, text = _sales(rng)
    region = rng.choice(_REGIONS)
    answer = sum(r["quantity"] for r in rows if r["region"] == region)
    return CodeTask(
        "csv_total",
        (zlib.crc32(text.encode()), region),
        f"The file data.csv holds {len(rows)} sales rows. What is the total quantity sold in the {region} region?",
        answer,
        files={"data.csv": text},
    )


def _csv_mean(rng: random.Random) -> CodeTask:
    rows, text = _sales(rng)
    product = rng.choice(_PRODUCTS)
    prices = [r["unit_price"] for r in rows if r["product"] == product]
    answer = round(sum(prices) / len(prices), 2)
    return CodeTask(
        "csv_mean",
        (zlib.crc32(text.encode()), product),
        f"The file data.csv holds {len(rows)} sales rows. What is the mean unit_price of the rows whose product "
        f"is {product}, rounded to 2 decimal places?",
        answer,
        tolerance=ROUNDED_TOLERANCE,
        files={"data.csv": text},
    )


def _csv_top(rng: random.Random) -> CodeTask:
    while True:
        rows, text = _sales(rng)
        revenue = dict.fromkeys(_REGIONS, 0.0)
        for r in rows:
            revenue[r["region"]] += r["quantity"] * r["unit_price"]
        ranked = sorted(revenue.values(), reverse=True)
        if ranked[0] - ranked[1] > 1.0:  # no near tie: float sums in any order agree on the winner
            break
    answer = max(revenue, key=lambda k: revenue[k])
    return CodeTask(
        "csv_top",
        (zlib.crc32(text.encode()),),
        f"The file data.csv holds {len(rows)} sales rows. Which region has the largest revenue, the sum of "
        "quantity times unit_price over its rows?",
        answer,
        files={"data.csv": text},
    )


def _text(rng: random.Random, alphabet: str, length: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(length))


def _overlaps(rng: random.Random) -> CodeTask:
    s = _text(rng, "ab", rng.randint(200, 400))
    p = _text(rng, "ab", rng.randint(2, 4))
    answer = sum(1 for i in range(len(s) - len(p) + 1) if s.startswith(p, i))
    return CodeTask(
        "overlaps",
        (s, p),
        f"How many times does '{p}' occur in the string '{s}', counting overlapping occurrences?",
        answer,
    )


def _top_letter(rng: random.Random) -> CodeTask:
    s = _text(rng, "abcdefghij", rng.randint(150, 300))
    counts = {c: s.count(c) for c in sorted(set(s))}
    answer = max(counts, key=lambda c: (counts[c], -ord(c)))
    return CodeTask(
        "top_letter",
        (s,),
        f"Which letter occurs most often in the string '{s}'? If several tie, give the alphabetically first.",
        answer,
    )


def _palindromes(rng: random.Random) -> CodeTask:
    s = _text(rng, "abc", rng.randint(30, 60))
    found = {s[i:j] for i in range(len(s)) for j in range(i + 2, len(s) + 1) if s[i:j] == s[i:j][::-1]}
    return CodeTask(
        "palindromes",
        (s,),
        f"How many distinct palindromic substrings of length 2 or more does the string '{s}' have?",
        len(found),
    )


_MAKERS = {
    "multiples": _multiples,
    "arithmetic": _arithmetic,
    "choose": _choose,
    "digit_sum": _digit_sum,
    "lattice": _lattice,
    "csv_total": _csv_total,
    "csv_mean": _csv_mean,
    "csv_top": _csv_top,
    "overlaps": _overlaps,
    "top_letter": _top_letter,
    "palindromes": _palindromes,
}
KINDS: tuple[str, ...] = tuple(_MAKERS)


def draw_task(rng: random.Random, *, split: str | None = None, kinds: tuple[str, ...] = KINDS) -> CodeTask:
    """A random task of one of ``kinds`` (of ``split`` when given: drawn again until it is)."""
    for _ in range(256):
        task = _MAKERS[rng.choice(kinds)](rng)
        if split is None or task.split == split:
            return task
    raise RuntimeError(f"no {split} task found in 256 draws")  # pragma: no cover - 1 in 5 are test


def _number(text: str) -> int | float | None:
    clean = text.replace(",", "").replace("_", "").strip()
    if clean.lstrip("+-").isdigit() and len(clean) <= 4000:
        return int(clean)
    try:
        value = float(clean)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def answer_matches(value: Any, task: CodeTask) -> bool:
    """Whether an answer is right: numbers within the task's tolerance (exactly, for whole numbers;
    ``"1,234"`` and ``1234.0`` read as 1234), text equal ignoring case and surrounding space."""
    gold = task.answer
    if isinstance(gold, str):
        return isinstance(value, str) and value.strip().lower() == gold.lower()
    got = _number(value) if isinstance(value, str) else value
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return False
    if isinstance(gold, int) and task.tolerance == 0:
        if isinstance(got, float):
            return got.is_integer() and abs(got) < 2**53 and int(got) == gold
        return got == gold
    return abs(got - gold) <= task.tolerance
