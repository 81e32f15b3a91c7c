"""The WebShop catalogue: products, goals (instructions) and their fixed train/dev/test splits.

:class:`GeneratedCatalogue` makes a realistic store from a seed. Every product and every goal is
a pure function of ``(seed, index)``, so a catalogue of any size costs no memory until a product
is looked at (a small LRU keeps the ones on screen): 1,000,000 products are as cheap to hold as
10,000, and only the search index (:mod:`.search`, a SQLite file on disk) grows with the size.
:class:`ListCatalogue` holds products and goals given as lists (WebShop's own JSON files, read by
:mod:`.loader`, or hand-built cases in tests).

A goal is drawn from one product as WebShop's human goals are: a subset of its attributes, one
value of some of its option axes, and a price limit that is the larger of two of the first four
multiples of $10 above its price (with 10 % of the goals having no price limit, as WebShop's goals
without price text). Goal ``i`` comes from product ``i``; goals ``[0, n_test)`` are the test
split, the next ``n_dev`` the dev split and the rest train (WebShop: 500 test, 1,000 dev), so the
splits share no goal and no target product.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from envgym.environments.webshop.lexicon import ADJECTIVES, BRANDS, OPTION_AXES, TYPES, ProductType

__all__ = [
    "CATALOGUE_VERSION",
    "SPLIT_NAMES",
    "Catalogue",
    "GeneratedCatalogue",
    "Goal",
    "ListCatalogue",
    "Product",
    "asin_of",
    "index_of",
    "price_upper_for",
    "split_sizes",
]

#: Bumped whenever generated products or goals change (part of the index cache key).
CATALOGUE_VERSION = 1
SPLIT_NAMES: tuple[str, ...] = ("train", "dev", "test")
#: No price limit (WebShop's value for goals without price text).
NO_PRICE_LIMIT = 1_000_000.0

_ASIN_SPACE = 36**8
_ASIN_MUL = 1_500_000_000_001  # odd and not a multiple of 3, so coprime with 36: the map index -> code is a bijection
_ASIN_ADD = 894_413_017
_ASIN_INV = pow(_ASIN_MUL, -1, _ASIN_SPACE)
_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def asin_of(index: int) -> str:
    """The ASIN of generated product ``index``: ``B0`` + 8 base-36 characters, 10 in all as Amazon's."""
    code = (index * _ASIN_MUL + _ASIN_ADD) % _ASIN_SPACE
    chars = []
    for _ in range(8):
        code, digit = divmod(code, 36)
        chars.append(_DIGITS[digit])
    return "B0" + "".join(reversed(chars))


def index_of(asin: str) -> int | None:
    """The product index an ASIN made by :func:`asin_of` stands for (``None`` if malformed)."""
    asin = asin.strip().upper()
    if len(asin) != 10 or not asin.startswith("B0"):
        return None
    code = 0
    for ch in asin[2:]:
        digit = _DIGITS.find(ch)
        if digit < 0:
            return None
        code = code * 36 + digit
    return ((code - _ASIN_ADD) * _ASIN_INV) % _ASIN_SPACE


@dataclass(frozen=True, slots=True)
class Product:
    """One product page's data (WebShop's product record after ``load_products``).

    Attributes:
        asin: the product id shown as its link text.
        title: WebShop's ``Title`` (and ``name``).
        category: main category (WebShop's ``category``).
        query: the search query it was collected under (WebShop's ``query``).
        product_category: breadcrumb parts (WebShop's ``product_category`` split on ``›``).
        description: the Description sub-page.
        bullet_points: the Features sub-page (WebShop's ``BulletPoints``).
        attributes: WebShop's ``Attributes``.
        options: option axis -> values (WebShop's ``options``), in page order.
        pricing: ``(price,)`` or ``(low, high)`` as listed.
        price: the price of this product in the store (WebShop draws it in a range once per load;
            here it is drawn once per product, deterministically).
        rating: average stars (``None``: WebShop's "N.A.").
        reviews: ``(stars, title, body)`` triples.
    """

    asin: str
    title: str
    category: str
    query: str
    product_category: tuple[str, ...]
    description: str
    bullet_points: tuple[str, ...]
    attributes: tuple[str, ...]
    options: Mapping[str, tuple[str, ...]]
    pricing: tuple[float, ...]
    price: float
    rating: float | None = None
    reviews: tuple[tuple[int, str, str], ...] = ()

    @property
    def price_text(self) -> str:
        """The listed price: ``$12.99`` or ``$10.99 to $15.99`` (WebShop's results and item pages)."""
        if len(self.pricing) == 2:
            return f"${self.pricing[0]:.2f} to ${self.pricing[1]:.2f}"
        return f"${self.pricing[0]:.2f}"

    def search_text(self) -> str:
        """The indexed document: WebShop's ``lower(Title + Description + BulletPoints[0] + options)``."""
        first = self.bullet_points[0] if self.bullet_points else ""
        options = " ".join(v for values in self.options.values() for v in values)
        return f"{self.title} {self.description} {first} {options}".lower()


@dataclass(frozen=True, slots=True)
class Goal:
    """One instruction and what the reward checks (WebShop's human goal record).

    Attributes:
        index: position in the catalogue's goal list.
        asin: the product the goal was drawn from (any product meeting it scores as well).
        name: that product's title (for the type match).
        query: that product's query.
        product_category: that product's breadcrumb parts.
        instruction: the text shown to the agent.
        attributes: goal attributes.
        options: goal option values (a list, as WebShop's human goals).
        price_upper: the price limit in dollars (:data:`NO_PRICE_LIMIT` when the text gives none).
    """

    index: int
    asin: str
    name: str
    query: str
    product_category: tuple[str, ...]
    instruction: str
    attributes: tuple[str, ...]
    options: tuple[str, ...]
    price_upper: float
    extra: Mapping[str, Any] = field(default_factory=dict)


def price_upper_for(price: float, rng: random.Random) -> float:
    """WebShop's price limit: the larger of two of the first four multiples of $10 above ``price``."""
    first = (math.floor(price / 10) + 1) * 10
    candidates = [float(first + 10 * k) for k in range(4)]
    return max(rng.sample(candidates, 2))


def split_sizes(n_goals: int) -> dict[str, tuple[int, int]]:
    """Goal index ranges ``[start, stop)`` of each split: WebShop's 500 test and 1,000 dev goals,
    scaled down to 5 % and 10 % for catalogues under 10,000 goals (at least one goal each)."""
    if n_goals < 3:
        raise ValueError(f"a catalogue needs at least 3 goals to have three splits, got {n_goals}.")
    n_test = max(1, min(500, n_goals // 20))
    n_dev = max(1, min(1000, n_goals // 10))
    return {"test": (0, n_test), "dev": (n_test, n_test + n_dev), "train": (n_test + n_dev, n_goals)}


class Catalogue:
    """What the store and the reward read: products by index, goals by split, a fingerprint."""

    #: Stable text identifying the catalogue's content (the search index cache key).
    fingerprint: str
    #: Display name ("generated 10000 products, seed 0").
    label: str

    def __len__(self) -> int:
        raise NotImplementedError

    def product(self, index: int) -> Product:
        raise NotImplementedError

    def index_of_asin(self, asin: str) -> int | None:
        raise NotImplementedError

    def n_goals(self) -> int:
        raise NotImplementedError

    def goal(self, index: int) -> Goal:
        raise NotImplementedError

    def split_range(self, split: str) -> tuple[int, int]:
        return split_sizes(self.n_goals())[split]

    def iter_documents(self) -> Any:
        """``(index, search_text)`` for every product, in index order (streamed)."""
        for i in range(len(self)):
            yield i, self.product(i).search_text()


# ----------------------------------------------------------------------------- generator
def _pick(rng: random.Random, pool: Sequence[str], low: int, high: int) -> list[str]:
    k = min(len(pool), rng.randint(low, high))
    return rng.sample(list(pool), k)


def _round_price(value: float) -> float:
    """Prices end in .99, .49, .00 or .95 like shop prices (picked by the value: no extra draw)."""
    return math.floor(value) + (0.99, 0.49, 0.0, 0.95)[int(value * 7) % 4]


_REVIEW_TITLES = {
    5: ("Exactly what I wanted", "Love it", "Great value", "Highly recommend"),
    4: ("Very good", "Pretty good overall", "Works well"),
    3: ("It's okay", "Average", "Does the job"),
    2: ("Not great", "Disappointed"),
    1: ("Would not buy again", "Poor quality"),
}
_REVIEW_BODIES = (
    "The {noun} arrived quickly and the {option} is just as pictured.",
    "I bought this {noun} {use} and it has held up well after a few weeks.",
    "Good {noun} for the price. The {attr} claim seems true.",
    "My second time ordering this {noun}; the {option} option is my favourite.",
    "The quality of this {noun} is fine, though the packaging could be better.",
    "Not quite what I expected from a {noun}, but it works.",
)
_DESCRIPTIONS = (
    (
        "The {brand} {noun} is made {use}. {Attr} and {attr2}, it is built for everyday use. "
        "Available in {n} options so you can pick the one that suits you."
    ),
    (
        "Meet the {noun} from {brand}: {attr}, {attr2}, and designed {use}. "
        "Backed by our satisfaction promise; contact us with any question."
    ),
    (
        "{Brand} makes this {noun} {use}. Every piece is checked before it ships. "
        "Key points: {attr}; {attr2}. Choose from {n} options."
    ),
)


def generate_product(seed: int, index: int) -> Product:
    """Product ``index`` of the catalogue made with ``seed`` (pure: same arguments, same product)."""
    rng = random.Random(f"webshop-product:{seed}:{index}")
    ptype: ProductType = TYPES[rng.randrange(len(TYPES))]
    brand = rng.choice(BRANDS)
    attributes = _pick(rng, ptype.attributes, 2, 4)
    options: dict[str, tuple[str, ...]] = {}
    for axis in ptype.axes:
        if axis != ptype.axes[0] and rng.random() < 0.25:
            continue  # not every product offers every axis
        values = OPTION_AXES[axis]
        k = min(len(values), rng.randint(2, 6))
        chosen = set(rng.sample(range(len(values)), k))
        options[axis] = tuple(values[i] for i in sorted(chosen))
    use = rng.choice(ptype.uses)
    adjective = rng.choice(ADJECTIVES)
    in_title = attributes[: rng.randint(1, 2)]
    title_words = [brand, adjective.capitalize(), " ".join(a.title() for a in in_title), ptype.noun.title()]
    title = " ".join(w for w in title_words if w) + f" {use.capitalize()}"
    if rng.random() < 0.5 and options:
        axis = next(iter(options))
        title += f", {len(options[axis])} {axis.title()} Options"
    low, high = ptype.price
    base = low + (high - low) * rng.random() ** 1.5
    if rng.random() < 0.2:
        lo = _round_price(base)
        hi = _round_price(base * rng.uniform(1.15, 1.6))
        pricing: tuple[float, ...] = (lo, max(hi, lo + 1.0))
        price = round(rng.uniform(pricing[0], pricing[1]), 2)
    else:
        pricing = (_round_price(base),)
        price = pricing[0]
    attr2 = attributes[1] if len(attributes) > 1 else attributes[0]
    fill = {
        "brand": brand,
        "Brand": brand,
        "noun": ptype.noun,
        "use": use,
        "attr": attributes[0],
        "Attr": attributes[0].capitalize(),
        "attr2": attr2,
        "n": sum(len(v) for v in options.values()),
    }
    description = rng.choice(_DESCRIPTIONS).format(**fill)
    bullets = [f"{a.upper()}: this {ptype.noun} is {a} {use}." for a in attributes]
    rng.shuffle(bullets)
    bullets.append(f"WHAT YOU GET: one {brand} {ptype.noun}; {rng.choice(('30-day', '90-day', '1-year'))} warranty.")
    rating: float | None = None
    reviews: list[tuple[int, str, str]] = []
    if rng.random() < 0.85:
        for _ in range(rng.randint(1, 4)):
            stars = rng.choices((5, 4, 3, 2, 1), weights=(45, 25, 15, 8, 7))[0]
            option = rng.choice(next(iter(options.values()))) if options else ptype.noun
            body = rng.choice(_REVIEW_BODIES).format(noun=ptype.noun, option=option, use=use, attr=attributes[0])
            reviews.append((stars, rng.choice(_REVIEW_TITLES[stars]), body))
        rating = round(sum(r[0] for r in reviews) / len(reviews), 1)
    return Product(
        asin=asin_of(index),
        title=title,
        category=ptype.category,
        query=ptype.query,
        product_category=ptype.breadcrumb,
        description=description,
        bullet_points=tuple(bullets),
        attributes=tuple(attributes),
        options=options,
        pricing=pricing,
        price=price,
        rating=rating,
        reviews=tuple(reviews),
    )


_TEMPLATES = (
    "i am looking for {attrs}{noun}{use_opt}{options}",
    "i need {a}{attrs}{noun}{options}",
    "find me {a}{attrs}{noun}{options}",
    "i want to buy {a}{noun} that is {attrs_plain}{options}",
    "i'm looking for {a}{noun}{options}{attrs_with}",
    "can you find me {a}{attrs}{noun}{use_opt}{options}",
    "i would like {a}{attrs}{noun}{options}",
    "search for {a}{noun}{attrs_with}{options}",
)
_OPTION_PHRASES = {
    "size": "in size {v}",
    "shoe size": "in shoe size {v}",
    "color": "in {v} color",
    "count": "in {v}",
    "flavor": "with {v} flavor",
    "scent": "in {v}",
    "volume": "in {v}",
    "weight": "in {v} size",
    "capacity": "with {v} capacity",
    "style": "in {v} style",
    "material": "made of {v}",
    "dimensions": "in {v}",
    "fit type": "in {v}",
}


def _join(parts: Sequence[str]) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def generate_goal(seed: int, index: int, product: Product) -> Goal:
    """Goal ``index`` (drawn from ``product``, the catalogue's product ``index``)."""
    rng = random.Random(f"webshop-goal:{seed}:{index}")
    n_attr = rng.choices((0, 1, 2, 3), weights=(10, 35, 35, 20))[0]
    attributes = rng.sample(list(product.attributes), min(n_attr, len(product.attributes)))
    chosen: list[tuple[str, str]] = []
    for axis, values in product.options.items():
        if rng.random() < 0.8:
            chosen.append((axis, rng.choice(values)))
    no_limit = rng.random() < 0.1
    price_upper = NO_PRICE_LIMIT if no_limit else price_upper_for(product.price, rng)
    noun = product.query if rng.random() < 0.5 else product.product_category[-1].lower()
    option_text = [_OPTION_PHRASES[axis].format(v=v) for axis, v in chosen]
    fill = {
        "a": "" if noun.endswith("s") else ("an " if noun[0] in "aeiou" else "a "),
        "attrs": " ".join(attributes) + " " if attributes else "",
        "attrs_plain": _join(attributes) if attributes else "good quality",
        "attrs_with": f" that is {_join(attributes)}" if attributes else "",
        "noun": noun,
        "use_opt": "",
        "options": (", " if rng.random() < 0.5 else " ") + _join(option_text) if option_text else "",
    }
    template = rng.choice(_TEMPLATES)
    if "{attrs}" in template and fill["a"]:
        first = (fill["attrs"] or noun)[0]
        fill["a"] = "an " if first in "aeiou" else "a "
    text = template.format(**fill).strip()
    if not no_limit:
        text += f", and price lower than {price_upper:.2f} dollars"
    return Goal(
        index=index,
        asin=product.asin,
        name=product.title,
        query=product.query,
        product_category=product.product_category,
        instruction=text,
        attributes=tuple(attributes),
        options=tuple(v for _, v in chosen),
        price_upper=price_upper,
        extra={"option_axes": [a for a, _ in chosen]},
    )


class GeneratedCatalogue(Catalogue):
    """``size`` products (default 10,000) made from ``seed``; goals one per product.

    Products and goals are computed on demand (pure functions of seed and index), with a small LRU
    per instance, so memory does not grow with ``size``.
    """

    def __init__(self, size: int = 10_000, seed: int = 0) -> None:
        if not isinstance(size, int) or isinstance(size, bool) or not 20 <= size <= 5_000_000:
            raise ValueError(f"catalogue size must be an integer from 20 to 5,000,000, got {size!r}.")
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise TypeError(f"catalogue seed must be an integer, got {seed!r}.")
        self.size = size
        self.seed = seed
        self.fingerprint = f"generated-v{CATALOGUE_VERSION}-n{size}-s{seed}"
        self.label = f"generated catalogue ({size:,} products, seed {seed})"
        self._product = functools.lru_cache(maxsize=4096)(self._make_product)
        self._goal = functools.lru_cache(maxsize=1024)(self._make_goal)

    def __reduce__(self) -> tuple[Any, ...]:
        return (GeneratedCatalogue, (self.size, self.seed))

    def __len__(self) -> int:
        return self.size

    def _make_product(self, index: int) -> Product:
        return generate_product(self.seed, index)

    def _make_goal(self, index: int) -> Goal:
        return generate_goal(self.seed, index, self._product(index))

    def product(self, index: int) -> Product:
        if not 0 <= index < self.size:
            raise IndexError(f"product index {index} outside 0..{self.size - 1}")
        return self._product(index)

    def index_of_asin(self, asin: str) -> int | None:
        index = index_of(asin)
        return index if index is not None and index < self.size else None

    def n_goals(self) -> int:
        return self.size

    def goal(self, index: int) -> Goal:
        if not 0 <= index < self.size:
            raise IndexError(f"goal index {index} outside 0..{self.size - 1}")
        return self._goal(index)

    def iter_documents(self) -> Any:
        for i in range(self.size):
            yield i, generate_product(self.seed, i).search_text()


class ListCatalogue(Catalogue):
    """Products and goals held in lists (WebShop's JSON files, or hand-built tests).

    ``splits`` maps split names to goal index ranges; by default :func:`split_sizes`.
    """

    def __init__(
        self,
        products: Sequence[Product],
        goals: Sequence[Goal],
        *,
        label: str = "list catalogue",
        splits: Mapping[str, tuple[int, int]] | None = None,
    ) -> None:
        if not products:
            raise ValueError("a catalogue needs at least one product.")
        self.products = list(products)
        self.goals = list(goals)
        self._by_asin = {p.asin.upper(): i for i, p in enumerate(self.products)}
        self._splits = dict(splits) if splits is not None else None
        digest = hashlib.sha256()
        for p in self.products:
            digest.update(json.dumps([p.asin, p.search_text()]).encode())
        self.fingerprint = f"list-v{CATALOGUE_VERSION}-{digest.hexdigest()[:16]}"
        self.label = label

    def __len__(self) -> int:
        return len(self.products)

    def product(self, index: int) -> Product:
        return self.products[index]

    def index_of_asin(self, asin: str) -> int | None:
        return self._by_asin.get(asin.strip().upper())

    def n_goals(self) -> int:
        return len(self.goals)

    def goal(self, index: int) -> Goal:
        return self.goals[index]

    def split_range(self, split: str) -> tuple[int, int]:
        if self._splits is not None:
            return self._splits[split]
        return split_sizes(self.n_goals())[split]
