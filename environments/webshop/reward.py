"""WebShop's reward, term for term, with rapidfuzz for the fuzzy matches and no spaCy model.

``R = r_type * (N_attr + N_opt + 1[price <= price_upper]) / (|attributes| + |options| + 1)``

* **Attribute match** (per goal attribute g): some product attribute p has
  ``token_set_ratio(p, g) > 85``; else g is a substring of the lower-cased title, the joined
  bullet points or the description.
* **Option match** (per goal option g): both sides colour-normalised (:func:`normalize_color`),
  then some chosen option value has ``token_set_ratio > 85``. Options not chosen do not match.
* **Price**: ``price <= price_upper``. WebShop crashes (``TypeError``) when ``price_upper`` is 0;
  here a limit <= 0 means "no limit" and the price term counts as met, as WebShop's goals without
  a price limit (``price_upper = 1,000,000``) do.
* **Type**: r_type in {0, 0.1, 0.5, 1} from the query match, the category match (>= 2 shared
  breadcrumb parts) and the title score (share of the goal title's nouns found in the product
  title's nouns), with WebShop's thresholds (:func:`type_reward`).

``token_set_ratio`` is thefuzz's: rapidfuzz's score on default-processed strings (lower case,
non-alphanumerics to spaces, trimmed), rounded to an integer before the ``> 85`` test. WebShop's
known false positives carry over on purpose (faithfulness first): "pack of 2" matches "pack of 3"
(ratio 89), "large" matches "x-large" (100: the token sets intersect), and the substring colour
rule makes "standard" match "tan" (both normalise to "tan").

**Nouns without spaCy.** WebShop tags title nouns with spaCy's ``en_core_web_sm`` (its scores
depend on the model version); its title score is the share of the goal title's nouns found among
the product title's nouns, 0.2 when the goal title has none. Here a title's noun *candidates* are
its lower-case alphabetic words of two letters or more that are not stop words, colours, option
words or descriptive adjectives (:data:`NON_NOUNS`), and the candidates split in two:

* words of the catalogue generator's vocabulary (:data:`KNOWN_WORDS`: type nouns, queries,
  attributes, uses, breadcrumbs, option axes) count as WebShop counts nouns: in the share's
  denominator whether or not the product title has them;
* any other word (a loaded WebShop title's adjective, verb or noun: a tagger would be needed to
  tell) counts only when the product title has it too, so it can raise the share, never lower it.

A goal title with no known word and no shared word scores 0.2, as WebShop's noun-less titles do
(r_type 0.5 without a query or category match, where counting its adjectives as nouns gave 0.0).
On generated titles every candidate is a known word, so the rule is the plain share there. The
score is never below WebShop's when the known words of both titles are nouns to spaCy and its
nouns are among the candidates: the unknown words it would drop can only add matches, and
r_type does not decrease as the title score grows. :func:`title_score` computes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from envgym.environments.webshop.catalogue import Goal, Product
from envgym.environments.webshop.lexicon import ADJECTIVES, BRANDS, OPTION_AXES, STOP_WORDS, TYPES

from envgym.errors import MissingDependencyError

try:
    from rapidfuzz import fuzz as _fuzz
    from rapidfuzz import utils as _fuzz_utils
except ImportError as _err:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("rapidfuzz", "webshop", "the WebShop reward (fuzzy matching)") from _err

__all__ = [
    "COLORS",
    "FUZZY_THRESHOLD",
    "KNOWN_WORDS",
    "NON_NOUNS",
    "RewardBreakdown",
    "attribute_matches",
    "normalize_color",
    "option_matches",
    "score",
    "title_nouns",
    "title_score",
    "token_set_ratio",
    "type_reward",
]

#: A match needs a token set ratio strictly above this (WebShop's threshold since its PR #8).
FUZZY_THRESHOLD = 85

#: Colour words for :func:`normalize_color`, in alphabetical order: a value normalises to the
#: first of them it contains ("navy blue" -> "blue", "light gray" -> "gray").
COLORS: tuple[str, ...] = tuple(
    sorted(
        [
            "almond",
            "apricot",
            "aqua",
            "army",
            "azure",
            "beige",
            "black",
            "blue",
            "blush",
            "bronze",
            "brown",
            "burgundy",
            "camel",
            "caramel",
            "charcoal",
            "cherry",
            "chocolate",
            "clear",
            "coffee",
            "copper",
            "coral",
            "cream",
            "crimson",
            "cyan",
            "emerald",
            "fuchsia",
            "gold",
            "gray",
            "green",
            "grey",
            "indigo",
            "ivory",
            "jade",
            "khaki",
            "lavender",
            "lemon",
            "lilac",
            "lime",
            "magenta",
            "mahogany",
            "maroon",
            "mauve",
            "mint",
            "mocha",
            "multicolor",
            "mustard",
            "natural",
            "navy",
            "nude",
            "olive",
            "orange",
            "peach",
            "pearl",
            "pink",
            "plum",
            "purple",
            "red",
            "rose",
            "ruby",
            "rust",
            "salmon",
            "sand",
            "sapphire",
            "silver",
            "slate",
            "tan",
            "taupe",
            "teal",
            "turquoise",
            "violet",
            "walnut",
            "white",
            "wine",
            "yellow",
        ]
    )
)

_STOP = STOP_WORDS | {"from", "its"}
#: Words the model-free noun rule never counts as nouns (see the module docstring).
NON_NOUNS: frozenset[str] = frozenset(
    {w.lower() for w in ADJECTIVES}
    | set(COLORS)
    | {w for b in BRANDS for w in b.lower().replace("&", " ").split()}
    | {w for values in OPTION_AXES.values() for v in values for w in re.findall(r"[a-z]+", v)}
    | set(_STOP)
    | {"options", "option", "new", "best", "great", "good", "high", "quality", "easy", "free"}
)
_WORD = re.compile(r"[a-z]+")
#: Noun candidates the catalogue generator can put in a title (see the module docstring).
KNOWN_WORDS: frozenset[str] = frozenset(
    w
    for t in TYPES
    for phrase in (t.noun, t.query, *t.attributes, *t.uses, *t.breadcrumb, *t.axes)
    for w in _WORD.findall(phrase.lower())
    if len(w) >= 2 and w not in NON_NOUNS
)


def token_set_ratio(a: str, b: str) -> int:
    """thefuzz's ``token_set_ratio``: processed strings, integer score 0-100."""
    return round(_fuzz.token_set_ratio(a, b, processor=_fuzz_utils.default_process))


def normalize_color(value: str) -> str:
    """The first colour word of :data:`COLORS` that ``value`` contains, else ``value`` itself."""
    for color in COLORS:
        if color in value:
            return color
    return value


def _fuzzy_in(target: str, candidates: Iterable[str]) -> bool:
    return any(token_set_ratio(c, target) > FUZZY_THRESHOLD for c in candidates)


def attribute_matches(product: Product, attributes: Sequence[str]) -> int:
    """How many goal ``attributes`` the product has (fuzzy on its attributes, else as text)."""
    title = product.title.lower()
    bullets = " ".join(product.bullet_points).lower()
    description = product.description.lower()
    n = 0
    for goal_attr in attributes:
        if (
            _fuzzy_in(goal_attr, product.attributes)
            or goal_attr in title
            or goal_attr in bullets
            or goal_attr in description
        ):
            n += 1
    return n


def option_matches(chosen: Iterable[str], goal_options: Sequence[str]) -> int:
    """How many goal options the chosen option values match (colour-normalised, fuzzy)."""
    picked = [normalize_color(v) for v in chosen]
    return sum(1 for g in goal_options if _fuzzy_in(normalize_color(g), picked))


def title_nouns(title: str) -> set[str]:
    """The title's noun candidates by the model-free rule (see the module docstring)."""
    return {w for w in _WORD.findall(title.lower()) if len(w) >= 2 and w not in NON_NOUNS}


def title_score(goal_name: str, product_title: str) -> float:
    """WebShop's title score without a tagger: known goal words all count, other words only when shared.

    ``(known shared + unknown shared) / (known + unknown shared)``, or WebShop's 0.2 for a goal
    title with neither (see the module docstring).
    """
    desired = title_nouns(goal_name)
    have = title_nouns(product_title)
    known = desired & KNOWN_WORDS
    counted = known | (desired & have)
    if not counted:
        return 0.2
    return len(counted & have) / len(counted)


@dataclass(frozen=True, slots=True)
class TypeMatch:
    """The type reward and what it was computed from."""

    r_type: float
    query_match: bool
    category_match: bool
    title_score: float


def type_reward(product: Product, goal: Goal) -> TypeMatch:
    """WebShop's r_type from the query match, category match and title noun score."""
    query_match = product.query == goal.query
    p_cat = {c.strip().lower() for c in product.product_category}
    g_cat = {c.strip().lower() for c in goal.product_category}
    category_match = len(p_cat & g_cat) >= 2
    share = title_score(goal.name, product.title)
    r_type = 1.0
    if not (query_match or category_match or share > 0.2):
        r_type = 0.5
    if share < 0.1:
        r_type = 0.1
    if share == 0.0:
        r_type = 0.0
    return TypeMatch(r_type, query_match, category_match, share)


@dataclass(frozen=True, slots=True)
class RewardBreakdown:
    """Every term of one purchase's score.

    ``attribute``, ``option`` and ``price`` are WebShop's weighted terms (matches / denominator),
    so ``score == r_type * (attribute + option + price)``.
    """

    score: float
    r_type: float
    attribute: float
    option: float
    price: float
    n_attr: int
    n_opt: int
    price_ok: bool
    denominator: int
    type_match: TypeMatch

    @property
    def success(self) -> bool:
        """Score exactly 1 (decided on the integer counts, not on the float)."""
        return self.r_type == 1.0 and self.n_attr + self.n_opt + int(self.price_ok) == self.denominator


def score(product: Product, goal: Goal, chosen_options: Iterable[str], price: float | None = None) -> RewardBreakdown:
    """WebShop's reward for buying ``product`` with ``chosen_options`` (values) towards ``goal``."""
    price = product.price if price is None else price
    tm = type_reward(product, goal)
    n_attr = attribute_matches(product, goal.attributes)
    n_opt = option_matches(list(chosen_options), goal.options)
    price_ok = goal.price_upper <= 0 or price <= goal.price_upper
    denominator = len(goal.attributes) + len(goal.options) + 1
    total = (n_attr + n_opt + int(price_ok)) / denominator
    return RewardBreakdown(
        score=tm.r_type * total,
        r_type=tm.r_type,
        attribute=n_attr / denominator,
        option=n_opt / denominator,
        price=int(price_ok) / denominator,
        n_attr=n_attr,
        n_opt=n_opt,
        price_ok=price_ok,
        denominator=denominator,
        type_match=tm,
    )
