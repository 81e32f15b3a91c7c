"""The WebShop text environment (envgym/WebShop-v0 and its presets)."""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Mapping
from typing import Any, ClassVar

from envgym.environments.webshop.catalogue import Catalogue, GeneratedCatalogue, Goal
from envgym.environments.webshop.lexicon import TYPES
from envgym.environments.webshop.pages import OBSERVATION_MODES, ActionError, Page, Store
from envgym.environments.webshop.reward import RewardBreakdown, score
from envgym.environments.webshop.search import SearchIndex

from envgym.core import InvalidAction, Task, TextEnv, Transition
from envgym.errors import InvalidKwargsError, check_choice

__all__ = ["DIAGNOSTIC_COMPONENTS", "WebShopEnv", "reward_weights", "shared_store"]

#: Components shown in ``info`` but weighted 0 in the default reward (the score already holds them).
DIAGNOSTIC_COMPONENTS = ("type_reward", "attribute_reward", "option_reward", "price_reward", "success_reward")


def reward_weights(reward: Any) -> Any:
    """The ``reward`` kwarg of both WebShop envs: component weights (``None`` or a mapping of
    numbers) get weight 0 on the diagnostic components unless given, so the scalar reward is
    WebShop's score alone; a rubric is left as it is."""
    if reward is None or (isinstance(reward, Mapping) and all(isinstance(v, (int, float)) for v in reward.values())):
        return {**dict.fromkeys(DIAGNOSTIC_COMPONENTS, 0.0), **dict(reward or {})}
    return reward


SEARCH_TEMPLATE = "search[<query>]"

_STORES: dict[tuple[Any, ...], Store] = {}
_LOCK = threading.Lock()


def shared_store(
    catalogue: Catalogue | None = None,
    *,
    size: int = 10_000,
    seed: int = 0,
    cache_dir: str | os.PathLike[str] | None = None,
) -> Store:
    """One :class:`Store` per catalogue and process: envs of a worker share the catalogue object
    and the index files (built once, on disk) instead of holding copies."""
    if catalogue is None:
        catalogue = GeneratedCatalogue(size, seed)
    key = (catalogue.fingerprint, str(cache_dir) if cache_dir is not None else None)
    with _LOCK:
        store = _STORES.get(key)
        if store is None:
            store = _STORES[key] = Store(catalogue, SearchIndex.for_catalogue(catalogue, cache_dir))
    return store


class WebShopEnv(TextEnv):
    """WebShop: find and buy the product an instruction asks for in a simulated online store.

    **Description.** A faithful text port of WebShop (Yao et al., 2022) over a generated catalogue
    (:mod:`envgym.environments.webshop.catalogue`: 10,000 products by default across ten
    categories and 50 product types, with titles, bullet points, descriptions, attributes, options,
    prices and price ranges, ratings and reviews; any size up to millions) or over WebShop's own
    JSON files (:func:`envgym.environments.webshop.loader.load_webshop`). Each episode draws an
    instruction from the split ("i need a gluten free protein bar with chocolate flavor and pack
    of 12, and price lower than 40.00 dollars"). Search is BM25 over SQLite FTS5, top 50 results,
    10 per page, as WebShop's Lucene search (:mod:`envgym.environments.webshop.search`); the index
    is built once per catalogue and cached on disk.

    **Observation.** The current page: the search page, a results page, an item page (option
    buttons, title, price, rating, Description / Features / Reviews / Buy Now), a sub-page, or
    the done page, always with the instruction. ``observation_mode``: ``"text"`` (WebShop's
    simple mode, elements joined by `` [SEP] ``), ``"text_rich"`` (one element a line, buttons as
    ``[button] X [button_]``, chosen options and visited products as ``[clicked button] X
    [clicked button_]``, ``You have clicked X.`` first) or ``"html"`` (the page the web server
    serves, links and all). An invalid step shows what went wrong and then the page again.

    **Actions.** WebShop's grammar: ``search[<query>]`` on the search page and ``click[<text>]``
    for a button, product link (ASIN), option value, ``next >``, ``< prev``, ``back to search``,
    ``description``, ``features``, ``reviews`` and ``buy now``; clicks are case-insensitive.
    ``info["admissible_actions"]`` lists ``click[...]`` for every clickable of the page, plus the
    literal template ``search[<query>]`` when the search bar is shown. **Difference from
    WebShop:** WebShop silently ignores an invalid action (reward 0, same page); here it is an
    invalid step (``info["action_valid"] = False``) with a message naming what is clickable.
    WebShop's search backdoors (``<r>``, ``<a>``, ``<c>``, ``<q>``) are plain words.

    **Reward components** (all on the ``click[buy now]`` step; 0 otherwise):

    * ``webshop_reward``: WebShop's score ``r_type * (attribute + option + price)`` in [0, 1]
      (:mod:`envgym.environments.webshop.reward`, rapidfuzz for the fuzzy matches, a model-free
      noun rule for the type match). The paper's Score is 100 x its mean.
    * ``type_reward`` (r_type in {0, 0.1, 0.5, 1}), ``attribute_reward``, ``option_reward``,
      ``price_reward`` (WebShop's weighted terms: matches / (attributes + options + 1)) and
      ``success_reward`` (1 when the score is exactly 1): shown for analysis, weight 0 by default.
    * ``invalid_action_reward``: ``invalid_penalty`` (default 0, as WebShop) on an invalid step.
    * ``step_cost_reward``: ``step_cost`` (default 0) on every step.

    The default scalar reward is therefore exactly WebShop's; pass ``reward={...}`` weights to
    shape it (weights you leave out keep the defaults above).

    **Reward basis.** ``webshop_reward``, ``invalid_action_reward``, ``step_cost_reward``: the
    reward is their sum. Diagnostic (weight 0 unless ``reward=`` weighs them; in
    ``info["reward_components"]`` for analysis, not in ``info["reward_basis"]``): ``type_reward``,
    ``attribute_reward``, ``option_reward``, ``price_reward``, ``success_reward``.

    **Episode end.** Terminated by ``click[buy now]`` (success when the score is 1, else
    failure); truncated after ``max_turns`` (default 15, the horizon of ReAct-style WebShop
    evaluations); terminated by ``invalid_limit`` when set.

    **Arguments.**

    * ``observation_mode``: ``"text"`` (default), ``"text_rich"`` or ``"html"``.
    * ``catalogue_size`` (default 10,000) and ``catalogue_seed`` (default 0): the generated
      catalogue; ``catalogue``: a :class:`~envgym.environments.webshop.catalogue.Catalogue`
      object instead (for example WebShop's data from ``load_webshop``).
    * ``cache_dir``: where search indexes are cached (default ``$ENVGYM_CACHE_DIR/webshop`` or
      ``~/.cache/envgym/webshop``).
    * ``split``: ``"train"``, ``"dev"`` or ``"test"`` (fixed and disjoint: 500 test and 1,000 dev
      goals at 10,000 products, WebShop's sizes; 5 % and 10 % on smaller catalogues).
    * Common ``TextEnv`` arguments: ``max_turns``, ``invalid_limit``, ``invalid_penalty``,
      ``step_cost``, ``reward``, ``render_mode``.

    ``reset(options={"goal_index": i})`` plays the split's i-th goal (WebShop's ``fixed_<i>``
    sessions) instead of one drawn from the seed.

    **Version history.** v0: first release.
    """

    name: ClassVar[str] = "webshop"
    reward_components: ClassVar[tuple[str, ...]] = (
        "webshop_reward",
        *DIAGNOSTIC_COMPONENTS,
        "invalid_action_reward",
        "step_cost_reward",
    )
    reward_basis: ClassVar[tuple[str, ...]] = ("webshop_reward", "invalid_action_reward", "step_cost_reward")
    default_max_turns: ClassVar[int] = 15
    splits: ClassVar[tuple[str, ...]] = ("train", "dev", "test")

    def __init__(
        self,
        *,
        observation_mode: str = "text",
        catalogue_size: int = 10_000,
        catalogue_seed: int = 0,
        catalogue: Catalogue | None = None,
        cache_dir: str | None = None,
        max_turns: int | None = None,
        invalid_limit: int | None = None,
        invalid_penalty: float = 0.0,
        step_cost: float = 0.0,
        reward: Any = None,
        split: str = "train",
        render_mode: str | None = None,
    ) -> None:
        super().__init__(
            max_turns=max_turns,
            invalid_limit=invalid_limit,
            invalid_penalty=invalid_penalty,
            step_cost=step_cost,
            reward=reward_weights(reward),
            split=split,
            render_mode=render_mode,
        )
        check_choice("observation_mode", observation_mode, OBSERVATION_MODES)
        if catalogue is not None and not isinstance(catalogue, Catalogue):
            raise InvalidKwargsError(f"catalogue must be a webshop Catalogue, got {type(catalogue).__name__}.")
        for label, value in (("catalogue_size", catalogue_size), ("catalogue_seed", catalogue_seed)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise InvalidKwargsError(f"{label} must be an integer, got {value!r}.")
        if catalogue is None and not 20 <= catalogue_size <= 5_000_000:
            raise InvalidKwargsError(f"catalogue_size must be from 20 to 5,000,000, got {catalogue_size!r}.")
        self.observation_mode = observation_mode
        self.store = shared_store(catalogue, size=catalogue_size, seed=catalogue_seed, cache_dir=cache_dir)
        self.catalogue = self.store.catalogue
        lo, hi = self.catalogue.split_range(split)
        if hi <= lo:
            raise InvalidKwargsError(f"the catalogue has no {split!r} goals.")
        self._goal_range = (lo, hi)
        self.goal: Goal | None = None
        self.page = Page()
        self._last_click = ""
        self._result: RewardBreakdown | None = None

    # ------------------------------------------------------------------ TextEnv hooks
    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        lo, hi = self._goal_range
        if options and "goal_index" in options:
            i = options["goal_index"]
            if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < hi - lo:
                raise InvalidKwargsError(f"goal_index must be an integer from 0 to {hi - lo - 1}, got {i!r}.")
            index = lo + i
        else:
            index = rng.randrange(lo, hi)
        self.goal = self.catalogue.goal(index)
        self.page = Page()
        self._last_click = ""
        self._result = None
        return Task(
            id=f"webshop/{self.split}/{index}",
            goal=self.goal.instruction,
            split=self.split,
            difficulty=self.catalogue.label,
            extra={"goal_index": index - lo, "catalogue": self.catalogue.fingerprint},
        )

    def _intro(self) -> str:
        return ""  # every page shows the instruction, as WebShop's do

    def _observe(self) -> str:
        assert self.goal is not None
        text = self.store.render(self.page, self.goal, self.observation_mode, last_click=self._last_click)
        if self.page.kind == "done" and self._result is not None:
            line = f"Your score (min 0.0, max 1.0): {self._result.score:.4f}"
            if self.observation_mode == "html":  # as the web server's done page
                return text.replace("</body>", f"<p id='score'>{line}</p></body>")
            text += (" [SEP] " if self.observation_mode == "text" else "\n") + line
        return text

    def _parse(self, text: str) -> str:
        return text

    def _apply(self, action: str) -> Transition:
        assert self.goal is not None
        try:
            page, clicked = self.store.apply(self.page, self.goal, action)
        except ActionError as err:
            raise InvalidAction(str(err)) from None
        self.page = page
        self._last_click = clicked
        if page.kind != "done":
            return Transition(self._observe())
        product = self.store.product_of(page)
        result = self._result = score(product, self.goal, [v for _, v in page.options])
        rewards = {
            "webshop_reward": result.score,
            "type_reward": result.r_type,
            "attribute_reward": result.attribute,
            "option_reward": result.option,
            "price_reward": result.price,
            "success_reward": 1.0 if result.success else 0.0,
        }
        return Transition(self._observe(), rewards, terminated=True, success=result.success)

    def admissible_actions(self) -> list[str]:
        if self.goal is None:
            return []
        clicks = [f"click[{c}]" for c in self.store.clickables(self.page, self.goal)]
        return [SEARCH_TEMPLATE, *clicks] if self.store.has_search_bar(self.page) else clicks

    def sample_action(self, rng: random.Random) -> str:
        actions = self.admissible_actions()
        if not actions:
            return "click[buy now]"
        action = rng.choice(actions)
        if action == SEARCH_TEMPLATE:
            return f"search[{rng.choice(TYPES).query}]"
        return action

    @property
    def last_result(self) -> RewardBreakdown | None:
        """The score breakdown of the purchase that ended the episode (``None`` before one)."""
        return self._result
