"""A generated encyclopedia: made-up entities, their relations and facts, rendered as short articles,
and the multi-hop questions asked over them (envgym/Tools-Search-v0).

Everything is a pure function of ``(articles, seed)``: the same arguments give the same world, the
same article texts and the same questions on every machine. Names are made of syllables, so no
answer can be known from a model's pretraining: it has to be looked up.

Seven kinds of entity, each one article:

* **country**: capital (a city), official language, population;
* **city**: country, the river it lies on, population, founding year;
* **river**: the country where it rises, length;
* **university**: the city it is in, founding year;
* **person**: birth year and birthplace (a city), the university they studied at, occupation;
* **company**: founder (a person), headquarters (a city), founding year, industry;
* **product**: maker (a company), release year, kind.

Every relation is a function (a product has one maker, a person one birthplace), so a chain of
relations from a start entity ends at exactly one entity, and a question over the chain has exactly
one answer. Articles also mention unrelated entities ("It is twinned with ...") in other words, so
a search for a name finds more than the one article.

A question is a start entity, a chain of relations and what is asked of the last entity (its name,
or a fact such as a year): "Name the country of the city where the founder of the company that makes
the Tarvo X3 was born." Its *hops* are the articles that must be read: one per relation, plus the
last entity's own article when a fact of it is asked. Questions have 2 to 4 hops.
"""

from __future__ import annotations

import hashlib
import random
import re
import string
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ENCYCLOPEDIA_VERSION",
    "KINDS",
    "RELATIONS",
    "TEST_MODULUS",
    "Encyclopedia",
    "Entity",
    "Question",
    "f1_score",
    "normalize_answer",
]

#: Bumped whenever generated articles or questions change (part of the search index's cache key).
ENCYCLOPEDIA_VERSION = 1
#: One question chain in TEST_MODULUS (by a CRC-32 of its entities and what is asked) is in ``test``.
TEST_MODULUS = 5

KINDS = ("country", "city", "river", "university", "person", "company", "product")
#: Share of the articles of each kind.
_SHARES = {
    "country": 0.02,
    "city": 0.15,
    "river": 0.05,
    "university": 0.05,
    "person": 0.33,
    "company": 0.15,
    "product": 0.25,
}

_ONSETS = ("b", "br", "c", "d", "dr", "f", "g", "gr", "h", "k", "kr", "l", "m", "n", "p", "r", "s", "st", "t", "tr",
           "v", "z", "th", "sh", "ch", "j", "w", "y", "sk", "pl")  # fmt: skip
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ei", "ou", "ia", "y")
_CODAS = ("", "", "", "n", "r", "l", "s", "m", "x", "th", "nd", "rk", "v", "st")
_COUNTRY_ENDS = ("ia", "land", "stan", "ora", "esh", "avia", "enia")
_CITY_ENDS = ("burg", "ford", "ton", "vale", "port", "ham", "mouth", "field", "dorf", "grad", "")
_INDUSTRIES = ("Motors", "Systems", "Foods", "Labs", "Energy", "Textiles", "Robotics", "Media", "Pharma", "Aerospace")
_PRODUCT_KINDS = ("smartphone", "electric car", "drone", "laptop", "camera", "tractor", "headset", "e-bike")
_OCCUPATIONS = ("engineer", "chemist", "architect", "economist", "designer", "physician", "inventor", "lawyer")
_SUFFIXES = ("X", "S", "Pro", "Z", "One", "Max", "Lite", "GT")


@dataclass(frozen=True)
class Relation:
    """A functional relation from one kind to another: its name, the phrase a question wraps around
    the inner reference (``{x}``), and how the source's article states it."""

    name: str
    source: str
    target: str
    phrase: str


#: Relations by name.
RELATIONS: dict[str, Relation] = {
    r.name: r
    for r in (
        Relation("maker", "product", "company", "the company that makes {x}"),
        Relation("founder", "company", "person", "the founder of {x}"),
        Relation("headquarters", "company", "city", "the city where {x} is headquartered"),
        Relation("birthplace", "person", "city", "the city where {x} was born"),
        Relation("university", "person", "university", "the university where {x} studied"),
        Relation("university_city", "university", "city", "the city where {x} is located"),
        Relation("country", "city", "country", "the country of {x}"),
        Relation("river", "city", "river", "the river that flows through {x}"),
        Relation("capital", "country", "city", "the capital of {x}"),
        Relation("source", "river", "country", "the country where {x} rises"),
    )
}

#: Facts a question may ask of the last entity: (kind, fact) -> question template.
FACTS: dict[tuple[str, str], str] = {
    ("company", "founded"): "In what year was {x} founded?",
    ("university", "founded"): "In what year was {x} founded?",
    ("city", "founded"): "In what year was {x} founded?",
    ("city", "population"): "What is the population of {x}?",
    ("person", "born"): "In what year was {x} born?",
    ("country", "language"): "What is the official language of {x}?",
    ("river", "length"): "How many kilometres long is {x}?",
    ("product", "released"): "In what year was {x} released?",
}
#: The question asking for the last entity itself.
NAME_QUESTION = "Name {x}."


@dataclass
class Entity:
    """One entity and its article."""

    index: int
    kind: str
    title: str
    relations: dict[str, int] = field(default_factory=dict)
    facts: dict[str, str] = field(default_factory=dict)
    mentions: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Question:
    """A multi-hop question with its gold answer and the chain of articles that answers it."""

    text: str
    answer: str
    relations: tuple[str, ...]
    asked: str
    """``"name"`` or the fact asked of the last entity (``"founded"``, ``"born"``, ...)."""
    chain: tuple[int, ...]
    """The entities from the start to the last one."""
    hops: int
    """Articles that must be read (the chain's, less the last one's when its name is asked)."""
    template: str
    """The relations and what is asked, as one id (``"maker>founder>birthplace:name"``)."""

    @property
    def key(self) -> str:
        """The question chain: its entities and what is asked (what the splits are disjoint by)."""
        return f"{'.'.join(map(str, self.chain))}:{'>'.join(self.relations)}:{self.asked}"

    @property
    def split(self) -> str:
        return "test" if zlib.crc32(self.key.encode()) % TEST_MODULUS == 0 else "train"


def _templates() -> list[tuple[str, tuple[str, ...], str, int]]:
    """Every (start kind, relations, asked, hops) with 2 to 4 hops."""
    found: list[tuple[str, tuple[str, ...], str, int]] = []

    def walk(start: str, kind: str, path: tuple[str, ...]) -> None:
        if path:
            if 2 <= len(path) <= 4:
                found.append((start, path, "name", len(path)))
            for fact_kind, fact in FACTS:
                if fact_kind == kind and 2 <= len(path) + 1 <= 4:
                    found.append((start, path, fact, len(path) + 1))
        if len(path) >= 3:
            return
        for rel in RELATIONS.values():
            if rel.source == kind and not (path and path[-1] == "capital" and rel.name == "country"):
                walk(start, rel.target, (*path, rel.name))

    for kind in KINDS:
        walk(kind, kind, ())
    return found


TEMPLATES = _templates()


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower case, punctuation and the articles a/an/the dropped, spaces squeezed."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in string.punctuation)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def f1_score(prediction: str, gold: str) -> float:
    """Token F1 of the normalised answers (SQuAD's): harmonic mean of token precision and recall."""
    pred = normalize_answer(prediction).split()
    ref = normalize_answer(gold).split()
    if not pred or not ref:
        return float(pred == ref)
    common: dict[str, int] = {}
    for token in ref:
        common[token] = common.get(token, 0) + 1
    overlap = 0
    for token in pred:
        if common.get(token, 0) > 0:
            common[token] -= 1
            overlap += 1
    if not overlap:
        return 0.0
    precision, recall = overlap / len(pred), overlap / len(ref)
    return 2 * precision * recall / (precision + recall)


class _Names:
    """Unique made-up names from syllables."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def word(self, syllables: int) -> str:
        rng = self.rng
        text = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables))
        return text.capitalize()

    def unique(self, make: Any) -> str:
        for _ in range(1000):
            name = make()
            if name.lower() not in self.used:
                self.used.add(name.lower())
                return name
        raise RuntimeError("the name generator ran out of names")  # pragma: no cover - 10^9 combinations


class Encyclopedia:
    """The generated encyclopedia of ``articles`` articles (at least 100) from ``seed``.

    Also what :class:`envgym.environments.webshop.search.SearchIndex` indexes: it has the
    ``fingerprint``, ``label``, ``len()`` and ``iter_documents()`` of a catalogue.
    """

    def __init__(self, articles: int = 5000, seed: int = 0) -> None:
        if isinstance(articles, bool) or not isinstance(articles, int) or articles < 100:
            raise ValueError(f"articles must be an integer of at least 100, got {articles!r}.")
        self.articles = articles
        self.seed = seed
        self.fingerprint = hashlib.sha256(
            f"encyclopedia:{ENCYCLOPEDIA_VERSION}:{articles}:{seed}".encode()
        ).hexdigest()[:16]
        self.label = f"encyclopedia of {articles} articles (seed {seed})"
        self.entities: list[Entity] = []
        self.by_kind: dict[str, list[int]] = {k: [] for k in KINDS}
        self._generate(random.Random(f"encyclopedia:{seed}:{articles}"))
        self.by_title = {e.title.lower(): e.index for e in self.entities}
        self._texts: dict[int, str] = {}

    # ------------------------------------------------------------------ generation
    def _generate(self, rng: random.Random) -> None:
        names = _Names(rng)
        counts = {k: max(4, int(self.articles * share)) for k, share in _SHARES.items()}
        counts["product"] += self.articles - sum(counts.values())

        def add(kind: str, title: str) -> Entity:
            entity = Entity(len(self.entities), kind, title)
            self.entities.append(entity)
            self.by_kind[kind].append(entity.index)
            return entity

        for _ in range(counts["country"]):
            c = add("country", names.unique(lambda: names.word(2) + rng.choice(_COUNTRY_ENDS)))
            c.facts["language"] = names.unique(lambda: names.word(2) + rng.choice(("ic", "ish", "ese", "i")))
            c.facts["population"] = f"{rng.randint(1, 90)}"
        for _ in range(counts["river"]):
            add("river", names.unique(lambda: names.word(rng.randint(1, 2)) + " River"))
        for _ in range(counts["city"]):
            add("city", names.unique(lambda: names.word(rng.randint(1, 2)) + rng.choice(_CITY_ENDS)))
        for _ in range(counts["university"]):
            add(
                "university",
                names.unique(
                    lambda: rng.choice(("University of {}", "{} Institute", "{} University")).format(names.word(2))
                ),
            )
        first = [names.word(rng.randint(1, 2)) for _ in range(200)]
        for _ in range(counts["person"]):
            add("person", names.unique(lambda: f"{rng.choice(first)} {names.word(rng.randint(1, 3))}"))
        for _ in range(counts["company"]):
            add("company", names.unique(lambda: f"{names.word(2)} {rng.choice(_INDUSTRIES)}"))
        series = [names.word(2) for _ in range(max(8, counts["product"] // 6))]
        for _ in range(counts["product"]):
            add("product", names.unique(lambda: f"{rng.choice(series)} {rng.choice(_SUFFIXES)}{rng.randint(1, 99)}"))

        pick = {k: self.by_kind[k] for k in KINDS}
        for e in self.entities:
            f = e.facts
            if e.kind == "country":
                pass  # its capital is chosen below, among its own cities
            elif e.kind == "city":
                e.relations["country"] = rng.choice(pick["country"])
                e.relations["river"] = rng.choice(pick["river"])
                f["population"] = f"{rng.randint(5, 3000) * 1000 + rng.randint(0, 999):,}"
                f["founded"] = str(rng.randint(800, 1900))
            elif e.kind == "river":
                e.relations["source"] = rng.choice(pick["country"])
                f["length"] = str(rng.randint(40, 4000))
            elif e.kind == "university":
                e.relations["university_city"] = rng.choice(pick["city"])
                f["founded"] = str(rng.randint(1100, 1990))
            elif e.kind == "person":
                e.relations["birthplace"] = rng.choice(pick["city"])
                e.relations["university"] = rng.choice(pick["university"])
                f["born"] = str(rng.randint(1900, 1995))
                f["occupation"] = rng.choice(_OCCUPATIONS)
            elif e.kind == "company":
                e.relations["founder"] = rng.choice(pick["person"])
                e.relations["headquarters"] = rng.choice(pick["city"])
                f["founded"] = str(rng.randint(1920, 2015))
                f["industry"] = rng.choice(_INDUSTRIES).lower()
            else:
                e.relations["maker"] = rng.choice(pick["company"])
                f["released"] = str(rng.randint(1990, 2024))
                f["kind"] = rng.choice(_PRODUCT_KINDS)
            e.mentions.append(rng.choice(pick[e.kind]))
        cities_of: dict[int, list[int]] = {}
        for i in pick["city"]:
            cities_of.setdefault(self.entities[i].relations["country"], []).append(i)
        for i in pick["country"]:
            own = cities_of.get(i)
            if not own:  # a country drawn by no city: one city moves there, so it has a capital of its own
                donor = max(cities_of, key=lambda c: len(cities_of[c]))
                own = [cities_of[donor].pop()]
                self.entities[own[0]].relations["country"] = i
                cities_of[i] = own
            self.entities[i].relations["capital"] = rng.choice(own)

    # ------------------------------------------------------------------ articles
    def __len__(self) -> int:
        return len(self.entities)

    def title(self, index: int) -> str:
        return self.entities[index].title

    def article(self, index: int) -> str:
        """The article's body text (without its title)."""
        text = self._texts.get(index)
        if text is None:
            text = self._texts[index] = self._render(self.entities[index])
        return text

    def _render(self, e: Entity) -> str:
        t = self.title
        r, f = e.relations, e.facts
        other = t(e.mentions[0]) if e.mentions[0] != e.index else None
        if e.kind == "country":
            text = (
                f"{e.title} is a country of about {f['population']} million people. Its capital is {t(r['capital'])}. "
                f"The official language is {f['language']}."
            )
            extra = f" It shares a border with {other}." if other else ""
        elif e.kind == "city":
            text = (
                f"{e.title} is a city in {t(r['country'])}. It lies on the {t(r['river'])}. It was founded in "
                f"{f['founded']} and has a population of {f['population']}."
            )
            extra = f" It is twinned with {other}." if other else ""
        elif e.kind == "river":
            text = f"The {e.title} is a river that rises in {t(r['source'])}. It is {f['length']} kilometres long."
            extra = f" Its waters are often likened to those of the {other}." if other else ""
        elif e.kind == "university":
            text = f"{e.title} is a university in {t(r['university_city'])}, founded in {f['founded']}."
            extra = f" It runs exchange programmes with {other}." if other else ""
        elif e.kind == "person":
            text = (
                f"{e.title} (born {f['born']} in {t(r['birthplace'])}) is {_a(f['occupation'])}. "
                f"{e.title.split()[0]} studied at {t(r['university'])}."
            )
            extra = f" A frequent collaborator is {other}." if other else ""
        elif e.kind == "company":
            text = (
                f"{e.title} is a {f['industry']} company founded in {f['founded']} by {t(r['founder'])}. "
                f"It is headquartered in {t(r['headquarters'])}."
            )
            extra = f" Its main rival is {other}." if other else ""
        else:
            text = f"The {e.title} is {_a(f['kind'])} made by {t(r['maker'])}. It was released in {f['released']}."
            extra = f" Reviewers compare it with the {other}." if other else ""
        return text + extra

    def iter_documents(self) -> Iterator[tuple[int, str]]:
        """``(index, title + text)`` of every article, in index order (what the search index holds)."""
        for e in self.entities:
            yield e.index, f"{e.title}. {self.article(e.index)}"

    def find(self, title: str) -> int | None:
        """The index of the article titled ``title`` (case and surrounding space ignored)."""
        return self.by_title.get(" ".join(title.split()).lower())

    # ------------------------------------------------------------------ questions
    def reference(self, index: int) -> str:
        e = self.entities[index]
        return f"the {e.title}" if e.kind in ("product", "river") else e.title

    def question(self, rng: random.Random, *, hops: int | None = None, split: str | None = None) -> Question:
        """A random question (of ``hops`` hops when given; of ``split`` when given, drawing again)."""
        templates = [t for t in TEMPLATES if hops is None or t[3] == hops]
        for _ in range(256):
            start_kind, relations, asked, _ = rng.choice(templates)
            question = self.ask(rng.choice(self.by_kind[start_kind]), relations, asked)
            if split is None or question.split == split:
                return question
        raise RuntimeError(f"no {split} question found in 256 draws")  # pragma: no cover - 1 in 5 are test

    def ask(self, start: int, relations: tuple[str, ...], asked: str) -> Question:
        """The question following ``relations`` from entity ``start`` and asking ``asked`` of the last."""
        chain = [start]
        phrase = self.reference(start)
        for name in relations:
            rel = RELATIONS[name]
            current = self.entities[chain[-1]]
            if current.kind != rel.source:
                raise ValueError(
                    f"relation {name!r} starts at a {rel.source}, not at the {current.kind} {current.title}"
                )
            chain.append(current.relations[name])
            phrase = rel.phrase.format(x=phrase)
        last = self.entities[chain[-1]]
        if asked == "name":
            text, answer, hops = NAME_QUESTION.format(x=phrase), last.title, len(relations)
        else:
            text = FACTS[(last.kind, asked)].format(x=phrase)
            answer, hops = last.facts[asked], len(relations) + 1
        text = text[0].upper() + text[1:]
        template = f"{self.entities[start].kind}:{'>'.join(relations)}:{asked}"
        return Question(text, answer, tuple(relations), asked, tuple(chain), hops, template)


def _a(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"
