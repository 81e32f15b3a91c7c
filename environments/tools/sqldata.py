"""Generated SQLite databases and text-to-SQL tasks for ``envgym/Tools-SQL-v0``.

Every schema has the same shape under different names, so one set of question templates serves
them all: a table of *people* (a name, a place, a year), a table of *things* (a label, a
category, a number) and a table of *events* that links one person to one thing (a quantity, a
year, a status). The rows are drawn from a seeded :class:`random.Random`, so a database is a
pure function of ``(schema, instance, size)``; it is written once to a file in envgym's cache
(``<cache>/tools-sql/``) and opened read-only by every episode.

A task is a template filled with values drawn from the database, its gold SQL and whether its
answer is ordered. The ``train`` and ``test`` splits are disjoint by (template, schema,
instance): a CRC-32 of the triple puts about one in four in ``test``.
"""

from __future__ import annotations

import os
import random
import sqlite3
import uuid
import zlib
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envgym.models import cache_dir as envgym_cache_dir

__all__ = [
    "INSTANCES",
    "SCHEMAS",
    "SIZES",
    "TEMPLATES",
    "Schema",
    "SqlTask",
    "Template",
    "database_path",
    "in_split",
    "make_task",
    "templates_for",
]

#: Database instances (seeds) per schema: tasks of one template on one instance share a split.
INSTANCES = 4
#: One (template, schema, instance) in ``TEST_MODULUS`` goes to the ``test`` split.
TEST_MODULUS = 4
#: Rows of the events table (the largest) per size; people and things scale with it.
SIZES: dict[str, int] = {"small": 2_000, "default": 20_000, "large": 100_000, "perf": 1_000_000}
#: Bump when the generator changes: the cached files are keyed by it.
GENERATOR_VERSION = 1

_FIRST = [
    "Ada",
    "Alan",
    "Ana",
    "Ben",
    "Carla",
    "Chen",
    "Dana",
    "Eli",
    "Emma",
    "Femi",
    "Grace",
    "Hana",
    "Ivan",
    "Jon",
    "Kai",
    "Lena",
    "Liam",
    "Maya",
    "Nia",
    "Omar",
    "Paul",
    "Quinn",
    "Rosa",
    "Sam",
    "Tara",
    "Uma",
    "Vera",
    "Wen",
    "Yara",
    "Zoe",
]
_LAST = [
    "Abe",
    "Baker",
    "Cruz",
    "Diaz",
    "Evans",
    "Fox",
    "Gray",
    "Hill",
    "Ito",
    "Jones",
    "Khan",
    "Lee",
    "Moss",
    "Nash",
    "Ono",
    "Park",
    "Reed",
    "Silva",
    "Tan",
    "Vogel",
    "Wong",
    "Young",
]
_PLACES = ["Paris", "Lima", "Oslo", "Cairo", "Seoul", "Quito", "Perth", "Dakar", "Riga", "Hanoi", "Porto", "Accra"]


@dataclass(frozen=True)
class Schema:
    """One database shape: the names of its three tables and of their columns."""

    name: str
    people: str  # table of people
    place: str  # their text column
    since: str  # their year column
    things: str  # table of things
    label: str  # the things' label column
    category: str  # their category column
    amount: str  # their number column (REAL)
    categories: tuple[str, ...]
    label_words: tuple[str, ...]
    amount_range: tuple[float, float]
    events: str  # table linking one person to one thing
    person_fk: str
    thing_fk: str
    qty: str  # events' integer column
    year: str  # events' year column
    status: str  # events' status column
    statuses: tuple[str, ...]
    qty_range: tuple[int, int]

    def ddl(self) -> list[str]:
        return [
            (
                f"CREATE TABLE {self.people} (id INTEGER PRIMARY KEY, name TEXT NOT NULL, {self.place} TEXT NOT NULL, "
                f"{self.since} INTEGER NOT NULL)"
            ),
            (
                f"CREATE TABLE {self.things} (id INTEGER PRIMARY KEY, {self.label} TEXT NOT NULL, "
                f"{self.category} TEXT NOT NULL, {self.amount} REAL NOT NULL)"
            ),
            (
                f"CREATE TABLE {self.events} (id INTEGER PRIMARY KEY, "
                f"{self.person_fk} INTEGER NOT NULL REFERENCES {self.people}(id), "
                f"{self.thing_fk} INTEGER NOT NULL REFERENCES {self.things}(id), {self.qty} INTEGER NOT NULL, "
                f"{self.year} INTEGER NOT NULL, {self.status} TEXT NOT NULL)"
            ),
            f"CREATE INDEX {self.events}_{self.person_fk} ON {self.events}({self.person_fk})",
            f"CREATE INDEX {self.events}_{self.thing_fk} ON {self.events}({self.thing_fk})",
        ]


SCHEMAS: dict[str, Schema] = {
    "shop": Schema(
        name="shop",
        people="customers",
        place="city",
        since="signup_year",
        things="products",
        label="title",
        category="category",
        amount="price",
        categories=("Books", "Games", "Garden", "Kitchen", "Music", "Sports", "Toys"),
        label_words=("Basic", "Classic", "Deluxe", "Mini", "Pro", "Smart", "Super", "Ultra"),
        amount_range=(2.0, 400.0),
        events="orders",
        person_fk="customer_id",
        thing_fk="product_id",
        qty="quantity",
        year="order_year",
        status="status",
        statuses=("shipped", "pending", "cancelled", "returned"),
        qty_range=(1, 9),
    ),
    "library": Schema(
        name="library",
        people="members",
        place="branch",
        since="joined_year",
        things="books",
        label="title",
        category="genre",
        amount="pages",
        categories=("Fantasy", "History", "Mystery", "Poetry", "Romance", "Science", "Travel"),
        label_words=("Silent", "Lost", "Hidden", "Red", "Northern", "Last", "Golden", "Quiet"),
        amount_range=(80.0, 900.0),
        events="loans",
        person_fk="member_id",
        thing_fk="book_id",
        qty="days",
        year="loan_year",
        status="state",
        statuses=("returned", "late", "open"),
        qty_range=(1, 60),
    ),
    "flights": Schema(
        name="flights",
        people="passengers",
        place="country",
        since="birth_year",
        things="routes",
        label="code",
        category="region",
        amount="distance",
        categories=("Africa", "Americas", "Asia", "Europe", "Oceania"),
        label_words=("AX", "BQ", "CF", "DL", "EK", "FR", "GA", "HU"),
        amount_range=(150.0, 12000.0),
        events="bookings",
        person_fk="passenger_id",
        thing_fk="route_id",
        qty="seats",
        year="travel_year",
        status="cabin",
        statuses=("economy", "premium", "business", "first"),
        qty_range=(1, 6),
    ),
}


def _people_rows(schema: Schema, rng: random.Random, n: int) -> list[tuple[object, ...]]:
    years = (1950, 2004) if schema.name == "flights" else (2012, 2024)
    return [
        (i, f"{rng.choice(_FIRST)} {rng.choice(_LAST)}", rng.choice(_PLACES), rng.randint(*years))
        for i in range(1, n + 1)
    ]


def _thing_rows(schema: Schema, rng: random.Random, n: int) -> list[tuple[object, ...]]:
    low, high = schema.amount_range
    rows = []
    for i in range(1, n + 1):
        label = f"{rng.choice(schema.label_words)} {rng.randint(100, 999)}"
        amount = round(rng.uniform(low, high), 0 if schema.name != "shop" else 2)
        rows.append((i, label, rng.choice(schema.categories), amount))
    return rows


def _build(schema: Schema, instance: int, events: int, path: Path) -> None:
    rng = random.Random(f"tools-sql:{schema.name}:{instance}:{events}")
    people = max(50, events // 10)
    things = max(20, events // 40)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    con = sqlite3.connect(tmp)
    try:
        con.execute("PRAGMA journal_mode=OFF")
        con.execute("PRAGMA synchronous=OFF")
        for statement in schema.ddl():
            con.execute(statement)
        con.executemany(f"INSERT INTO {schema.people} VALUES (?, ?, ?, ?)", _people_rows(schema, rng, people))
        con.executemany(f"INSERT INTO {schema.things} VALUES (?, ?, ?, ?)", _thing_rows(schema, rng, things))
        # A skewed pick of people (a few are frequent) keeps "top N" questions free of wide ties.
        weights = [1.0 / (1 + (i % 97)) for i in range(people)]
        picks = rng.choices(range(1, people + 1), weights=weights, k=events)
        statuses = schema.statuses
        status_weights = [len(statuses) - k for k in range(len(statuses))]
        status_picks = rng.choices(statuses, weights=status_weights, k=events)
        con.executemany(
            f"INSERT INTO {schema.events} VALUES (?, ?, ?, ?, ?, ?)",
            (
                (
                    i + 1,
                    picks[i],
                    rng.randint(1, things),
                    rng.randint(*schema.qty_range),
                    rng.randint(2018, 2024),
                    status_picks[i],
                )
                for i in range(events)
            ),
        )
        con.commit()
    finally:
        con.close()
    os.replace(tmp, path)  # atomic: a reader sees the whole file or none


def database_path(schema: str, instance: int, size: str, cache_dir: Path | None = None) -> Path:
    """The file of the database ``(schema, instance, size)``, built first when it is missing."""
    if cache_dir is None:
        cache_dir = envgym_cache_dir() / "tools-sql"
    path = Path(cache_dir) / f"v{GENERATOR_VERSION}-{schema}-{instance}-{size}.sqlite"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        _build(SCHEMAS[schema], instance, SIZES[size], path)
    return path


# ---------------------------------------------------------------------------------- templates
#: Draws the values of a template: ``values(sql)`` is the sorted first column of the query's rows.
Values = Callable[[str], list[Any]]
#: Distinct-value lists kept per process, at most (each is a few dozen values).
VALUE_CACHE_SIZE = 4_096
_VALUES: dict[tuple[Hashable, str], list[Any]] = {}


@dataclass(frozen=True)
class SqlTask:
    """One question with its gold SQL; ``ordered``: the answer's row order is part of it."""

    template: str
    difficulty: str
    question: str
    sql: str
    ordered: bool
    tables: tuple[str, ...]


@dataclass(frozen=True)
class Template:
    name: str
    difficulty: str
    build: Callable[[Schema, random.Random, Values], SqlTask]


def _pick(values: Values, sql: str, rng: random.Random) -> object:
    return rng.choice(values(sql))


def _t_count_category(s: Schema, rng: random.Random, values: Values) -> SqlTask:
    cat = _pick(values, f"SELECT DISTINCT {s.category} FROM {s.things}", rng)
    return SqlTask(
        "count_category",
        "easy",
        f"How many {s.things} have {s.category} '{cat}'?",
        f"SELECT count(*) FROM {s.things} WHERE {s.category} = '{cat}'",
        False,
        (s.things,),
    )


def _t_max_amount(s: Schema, rng: random.Random, values: Values) -> SqlTask:
    cat = _pick(values, f"SELECT DISTINCT {s.category} FROM {s.things}", rng)
    return SqlTask(
        "max_amount",
        "easy",
        f"What is the highest {s.amount} among {s.things} with {s.category} '{cat}'?",
        f"SELECT max({s.amount}) FROM {s.things} WHERE {s.category} = '{cat}'",
        False,
        (s.things,),
    )


def _t_list_people(s: Schema, rng: random.Random, values: Values) -> SqlTask:
    place = _pick(values, f"SELECT DISTINCT {s.place} FROM {s.people}", rng)
    year = _pick(values, f"SELECT DISTINCT {s.since} FROM {s.people}", rng)
    return SqlTask(
        "list_people",
        "easy",
        f"List the name of the {s.people} with {s.place} '{place}' and {s.since} {year}, sorted by name.",
        f"SELECT name FROM {s.people} WHERE {s.place} = '{place}' AND {s.since} = {year} ORDER BY name",
        True,
        (s.people,),
    )


def _t_count_by_category(s: Schema, rng: random.Random, values: Values) -> SqlTask:
    return SqlTask(
        "count_by_category",
        "medium",
        f"For each {s.category} of {s.things}, how many {s.things} are there? Give {s.category} and count.",
        f"SELECT {s.category}, count(*) FROM {s.things} GROUP BY {s.category}",
        False,
        (s.things,),
    )


def _t_join_count(s: Schema, rng: random.Random, values: Values) -> SqlTask:
    place = _pick(values, f"SELECT DISTINCT {s.place} FROM {s.people}", rng)
    status = _pick(values, f"SELECT DISTINCT {s.status} FROM {s.events}", rng)
    return SqlTask(
        "join_count",
        "medium",
        f"How many {s.events} with {s.status} '{status}' belong to {s.people} with {s.place} '{place}'?",
        f"SELECT count(*) FROM {s.events} JOIN {s.people} ON {s.events}.{s.person_fk} = {s.people}.id "
        f"WHERE {s.events}.{s.status} = '{status}' AND {s.people}.{s.place} = '{place}'",
        False,
        (s.events, s.people),
    )


def _t_join_sum(s: Schema, rng: random.Random, values: Values) -> SqlTask:
    cat = _pick(values, f"SELECT DISTINCT {s.category} FROM {s.things}", rng)
    year = _pick(values, f"SELECT DISTINCT {s.year} FROM {s.events}", rng)
    return SqlTask(
        "join_sum",
        "medium",
        f"What is the total {s.qty} of {s.events} in {s.year} {year} for {s.things} with {s.category} '{cat}'?",
        f"SELECT sum({s.events}.{s.qty}) FROM {s.events} JOIN {s.things} ON {s.events}.{s.thing_fk} = {s.things}.id "
        f"WHERE {s.events}.{s.year} = {year} AND {s.things}.{s.category} = '{cat}'",
        False,
        (s.events, s.things),
    )


def _t_top_people(s: Schema, rng: random.Random, values: Values) -> SqlTask:
    status = _pick(values, f"SELECT DISTINCT {s.status} FROM {s.events}", rng)
    k = rng.randint(3, 5)
    return SqlTask(
        "top_people",
        "hard",
        f"Which {k} {s.people} have the most {s.events} with {s.status} '{status}'? Give name and count, "
        "highest count first, ties by name.",
        f"SELECT {s.people}.name, count(*) AS n FROM {s.events} JOIN {s.people} "
        f"ON {s.events}.{s.person_fk} = {s.people}.id WHERE {s.events}.{s.status} = '{status}' "
        f"GROUP BY {s.people}.id ORDER BY n DESC, {s.people}.name LIMIT {k}",
        True,
        (s.events, s.people),
    )


def _t_above_average(s: Schema, rng: random.Random, values: Values) -> SqlTask:
    cat = _pick(values, f"SELECT DISTINCT {s.category} FROM {s.things}", rng)
    return SqlTask(
        "above_average",
        "hard",
        f"How many {s.things} with {s.category} '{cat}' have {s.amount} above the average {s.amount} "
        f"of all {s.things}?",
        f"SELECT count(*) FROM {s.things} WHERE {s.category} = '{cat}' AND {s.amount} > "
        f"(SELECT avg({s.amount}) FROM {s.things})",
        False,
        (s.things,),
    )


def _t_people_without(s: Schema, rng: random.Random, values: Values) -> SqlTask:
    place = _pick(values, f"SELECT DISTINCT {s.place} FROM {s.people}", rng)
    year = _pick(values, f"SELECT DISTINCT {s.year} FROM {s.events}", rng)
    return SqlTask(
        "people_without",
        "hard",
        f"How many {s.people} with {s.place} '{place}' have no {s.events} in {s.year} {year}?",
        f"SELECT count(*) FROM {s.people} WHERE {s.place} = '{place}' AND id NOT IN "
        f"(SELECT {s.person_fk} FROM {s.events} WHERE {s.year} = {year})",
        False,
        (s.people, s.events),
    )


TEMPLATES: dict[str, Template] = {
    t.name: t
    for t in (
        Template("count_category", "easy", _t_count_category),
        Template("max_amount", "easy", _t_max_amount),
        Template("list_people", "easy", _t_list_people),
        Template("count_by_category", "medium", _t_count_by_category),
        Template("join_count", "medium", _t_join_count),
        Template("join_sum", "medium", _t_join_sum),
        Template("top_people", "hard", _t_top_people),
        Template("above_average", "hard", _t_above_average),
        Template("people_without", "hard", _t_people_without),
    )
}


def in_split(template: str, schema: str, instance: int, split: str) -> bool:
    """Whether tasks of ``template`` on database ``(schema, instance)`` belong to ``split``."""
    key = f"{template}:{schema}:{instance}".encode()
    return (zlib.crc32(key) % TEST_MODULUS == 0) == (split == "test")


def templates_for(difficulty: str | None) -> list[Template]:
    """The templates of one difficulty (``None``: all), in a fixed order."""
    return [t for t in TEMPLATES.values() if difficulty is None or t.difficulty == difficulty]


def make_task(
    template: str, schema: str, rng: random.Random, con: sqlite3.Connection, *, key: Hashable = None
) -> SqlTask:
    """A task of ``template`` on the open database ``con`` of ``schema``, its values drawn from ``rng``.

    ``key`` names the database (its file): the distinct values a template draws from are then
    read once per process and kept (a database never changes).
    """

    def values(sql: str) -> list[Any]:
        found = _VALUES.get((key, sql)) if key is not None else None
        if found is None:
            found = sorted(row[0] for row in con.execute(sql))
            if key is not None and len(_VALUES) < VALUE_CACHE_SIZE:
                _VALUES[(key, sql)] = found
        return found

    return TEMPLATES[template].build(SCHEMAS[schema], rng, values)
