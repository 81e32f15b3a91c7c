"""envgym/Tools-Search-v0: answer a multi-hop question by searching a generated encyclopedia.

The encyclopedia (:mod:`envgym.environments.tools.encyclopedia`) is indexed with WebShop's BM25
machinery (:class:`envgym.environments.webshop.search.SearchIndex`: SQLite FTS5, ``porter unicode61``
tokens, FTS5's ``bm25()`` ranking, MaxScore pruning), built once per encyclopedia and cached on disk
under ``<cache>/tools-search/<fingerprint>``. :func:`search_latency` measures it (the family's perf
script calls it).
"""

from __future__ import annotations

import hashlib
import os
import random
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from envgym.environments.tools.encyclopedia import Encyclopedia, Question, f1_score, normalize_answer
from envgym.environments.tools.toolenv import ToolTextEnv, call_text
from envgym.environments.webshop.search import SearchIndex

from envgym.core import InvalidAction, Task, Transition
from envgym.errors import InvalidKwargsError
from envgym.models import cache_dir as envgym_cache_dir
from envgym.tools import ToolCall, tool_result

__all__ = ["EFFICIENCY_MAX", "SearchEnv", "search_latency", "shared_encyclopedia"]

#: Largest ``efficiency_reward``: for a correct answer after no more calls than the question's hops.
EFFICIENCY_MAX = 0.2
#: Results a search returns.
TOP_K = 5
#: Characters of an article shown as a result's snippet.
SNIPPET_CHARS = 160
#: Longest answer accepted (characters).
MAX_ANSWER = 200

_WORLDS: dict[tuple[int, int, str | None], tuple[Encyclopedia, SearchIndex]] = {}
_LOCK = threading.Lock()


def shared_encyclopedia(
    articles: int = 5000, seed: int = 0, cache_dir: str | os.PathLike[str] | None = None
) -> tuple[Encyclopedia, SearchIndex]:
    """One encyclopedia and its search index per ``(articles, seed, cache_dir)`` and process; the
    index is built on disk once (atomically) and shared by every process through the page cache."""
    key = (articles, seed, str(cache_dir) if cache_dir is not None else None)
    with _LOCK:
        found = _WORLDS.get(key)
        if found is None:
            world = Encyclopedia(articles, seed)
            root = Path(cache_dir).expanduser() if cache_dir is not None else envgym_cache_dir() / "tools-search"
            found = _WORLDS[key] = (world, SearchIndex.for_catalogue(world, root))  # type: ignore[arg-type]
    return found


# Typed stand-ins of the tools: their signatures and docstrings are the schemas in info["tools"].
def search(query: str) -> str:
    """Search the encyclopedia (BM25); returns the titles and first lines of the 5 best articles.

    Args:
        query: words to search for, e.g. a name.
    """
    raise NotImplementedError  # pragma: no cover - a schema only


def open(title: str) -> str:
    """Open the article with this exact title (case does not matter) and read it in full.

    Args:
        title: the article's title, as a search result shows it.
    """
    raise NotImplementedError  # pragma: no cover - a schema only


def answer(text: str) -> str:
    """Give the final answer (a name, a year or a number); ends the episode.

    Args:
        text: the answer, as short as possible.
    """
    raise NotImplementedError  # pragma: no cover - a schema only


class SearchEnv(ToolTextEnv):
    """Tools-Search: answer a multi-hop question by searching and reading a generated encyclopedia.

    **Description.** A Search-R1-style multi-hop question answering task over an offline,
    generated encyclopedia (``articles`` articles, 5,000 by default, from ``encyclopedia_seed``):
    made-up countries, cities, rivers, universities, people, companies and products, with
    functional relations (a product's maker, a company's founder, a person's birthplace, a city's
    country, ...) and facts (years, populations, lengths, languages), each rendered as a short
    article. Names are made of syllables, so answers must be looked up, not remembered. A question
    follows a chain of 1 to 3 relations from a named entity and asks for the last entity's name or
    one of its facts ("Name the country of the city where the founder of the company that makes the
    Tarvo X3 was born."); it needs 2 to 4 *hops*, articles read (a search whose snippet holds the
    fact, or an open). Search is BM25 over SQLite FTS5 with WebShop's machinery.

    **Observation.** At reset: the instructions, the tools and the question. After each call:
    its result, ``Tool result (search): ...`` (up to 5 results: title and the article's first 160
    characters), ``Tool result (open): ...`` (the article) or the end of the episode (the gold
    answer and the scores).

    **Actions.** One tool call per turn in envgym's dialect (docs/tools.md),
    ``{"name": ..., "arguments": {...}}``; ``info["tools"]`` holds the schemas:
    ``search(query)``, ``open(title)`` (exact title, case-insensitive; an unknown title is an
    invalid step naming the closest titles) and ``answer(text)`` (ends the episode). A malformed
    call (not JSON, unknown tool, arguments against the schema) is an invalid step whose
    observation is the tool error. ``admissible_actions`` is ``None``; :meth:`sample_action`
    proposes random valid calls.

    **Reward components.**
    ``exact_match_reward``: 1.0 when the normalised answer (SQuAD's normalisation: lower case,
    punctuation and articles dropped) equals the normalised gold answer.
    ``f1_reward``: token F1 of the normalised answer against the gold one (partial credit).
    ``efficiency_reward``: OTC-style tool-efficiency bonus, only for an exact answer:
    ``0.2 * min(1, hops / calls)``, ``calls`` the valid search and open calls made.
    ``invalid_action_reward``: ``invalid_penalty`` (default -0.1) on an invalid step.
    ``step_cost_reward``: ``step_cost`` (default 0) on every step.

    **Reward basis.** ``exact_match_reward``, ``efficiency_reward``, ``invalid_action_reward`` and
    ``step_cost_reward``: the reward is their sum. ``f1_reward`` is diagnostic (weight 0 unless
    ``reward=`` weighs it).

    **Episode end.** Terminated by ``answer`` (success when it matches exactly); truncated after
    ``max_turns`` (default 12) steps.

    **Splits.** A question chain (its entities, relations and what is asked) is in ``test`` when
    a CRC-32 of it is 0 modulo 5, else in ``train``: the splits share no chain.

    **Arguments.** ``articles`` (100 to 1,000,000, default 5,000) and ``encyclopedia_seed``
    (default 0): the encyclopedia; ``hops`` (2, 3, 4 or ``None`` for any, the default);
    ``cache_dir``: where the search index is cached (default ``$ENVGYM_CACHE_DIR/tools-search``);
    plus the common :class:`envgym.core.TextEnv` arguments.

    **Version history.** v0: first release.
    """

    name: ClassVar[str] = "tools_search"
    reward_components: ClassVar[tuple[str, ...]] = (
        "exact_match_reward",
        "f1_reward",
        "efficiency_reward",
        "invalid_action_reward",
        "step_cost_reward",
    )
    reward_basis: ClassVar[tuple[str, ...]] = (
        "exact_match_reward",
        "efficiency_reward",
        "invalid_action_reward",
        "step_cost_reward",
    )
    default_max_turns: ClassVar[int] = 12

    @classmethod
    def tool_functions(cls) -> list[Callable[..., Any]]:
        return [search, open, answer]

    def __init__(
        self,
        *,
        articles: int = 5000,
        encyclopedia_seed: int = 0,
        hops: int | None = None,
        cache_dir: str | None = None,
        reward: Any = None,
        **kwargs: Any,
    ) -> None:
        if reward is None or (isinstance(reward, dict) and all(isinstance(v, (int, float)) for v in reward.values())):
            reward = {"f1_reward": 0.0, **dict(reward or {})}
        super().__init__(reward=reward, **kwargs)
        if isinstance(articles, bool) or not isinstance(articles, int) or not 100 <= articles <= 1_000_000:
            raise InvalidKwargsError(f"articles must be an integer from 100 to 1,000,000, got {articles!r}.")
        if isinstance(encyclopedia_seed, bool) or not isinstance(encyclopedia_seed, int):
            raise InvalidKwargsError(f"encyclopedia_seed must be an integer, got {encyclopedia_seed!r}.")
        if hops is not None and hops not in (2, 3, 4):
            raise InvalidKwargsError(f"hops must be 2, 3, 4 or None (any), got {hops!r}.")
        self.articles = articles
        self.encyclopedia_seed = encyclopedia_seed
        self.hops = hops
        self.cache_dir = cache_dir
        self.world, self.index = shared_encyclopedia(articles, encyclopedia_seed, cache_dir)
        self.question: Question | None = None
        self._calls = 0
        self._seen: list[str] = []  # titles shown by searches and opens, for sample_action
        self._last = ""

    # ------------------------------------------------------------------ pickling: the shared world stays behind
    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state.pop("world", None)
        state.pop("index", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.world, self.index = shared_encyclopedia(self.articles, self.encyclopedia_seed, self.cache_dir)

    # ------------------------------------------------------------------ TextEnv hooks
    def _generate(self, rng: random.Random, options: dict[str, Any] | None) -> Task:
        q = self.question = self.world.question(rng, hops=self.hops, split=self.split)
        self._calls = 0
        self._seen = []
        self._last = f"Question: {q.text}"
        return Task(
            id=f"tools-search/{self.world.fingerprint}/{hashlib.sha256(q.key.encode()).hexdigest()[:12]}",
            goal=q.text,
            split=self.split,
            difficulty=f"{q.hops} hops",
            extra={"question": q.text, "hops": q.hops, "template": q.template},
        )

    def _intro(self) -> str:
        return (
            "Answer the question using the encyclopedia's tools. Each action is ONE tool call as JSON:\n"
            '  {"name": "search", "arguments": {"query": "Tarvo X3"}}   top 5 articles: title and first line\n'
            '  {"name": "open", "arguments": {"title": "Tarvo X3"}}     the whole article (exact title)\n'
            '  {"name": "answer", "arguments": {"text": "..."}}         your final answer; ends the episode\n'
            "Answer with the name or number only. Fewer calls earn a bonus when the answer is right."
        )

    def _observe(self) -> str:
        return self._last

    def _apply(self, call: ToolCall) -> Transition:
        assert self.question is not None
        name, args = call.name, call.arguments
        if name == "search":
            self._calls += 1
            self._last = self._search(args["query"])
            return Transition(self._last)
        if name == "open":
            wanted = args["title"][:500]
            index = self.world.find(wanted)
            if index is None and wanted.lower().startswith("the "):  # "the Tarvo X3", as questions write it
                index = self.world.find(wanted[4:])
            if index is None:
                close = [self.world.title(i) for i in self.index.search(wanted, 3)]
                hint = f" Closest titles: {'; '.join(close)}." if close else " Search for it first."
                raise InvalidAction(f"Tool error (open): no article is titled {wanted[:80]!r}.{hint}")
            self._calls += 1
            title = self.world.title(index)
            self._note(title)
            self._last = tool_result("open", f"{title}\n{self.world.article(index)}")
            return Transition(self._last)
        return self._answer(args["text"])

    def _search(self, query: str) -> str:
        ids = self.index.search(query[:500], TOP_K)
        if not ids:
            return tool_result("search", f"no article matches {query[:80]!r}.")
        lines = []
        for rank, i in enumerate(ids, 1):
            title = self.world.title(i)
            self._note(title)
            text = self.world.article(i)
            snippet = text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 3] + "..."
            lines.append(f"{rank}. {title}: {snippet}")
        return tool_result("search", "\n" + "\n".join(lines))

    def _note(self, title: str) -> None:
        if title not in self._seen:
            self._seen.append(title)

    def _answer(self, text: str) -> Transition:
        assert self.question is not None
        if len(text) > MAX_ANSWER:
            raise InvalidAction(f"Tool error (answer): the answer is {len(text)} characters; at most {MAX_ANSWER}.")
        gold = self.question.answer
        exact = normalize_answer(text) == normalize_answer(gold)
        f1 = f1_score(text, gold)
        efficiency = EFFICIENCY_MAX * min(1.0, self.question.hops / max(self._calls, 1)) if exact else 0.0
        verdict = "Correct" if exact else "Incorrect"
        self._last = tool_result(
            "answer",
            f"{verdict}. The answer is {gold}. Token F1 {f1:.2f}; "
            f"{self._calls} search/open call(s) for a {self.question.hops}-hop question.",
        )
        rewards = {"exact_match_reward": float(exact), "f1_reward": f1, "efficiency_reward": efficiency}
        return Transition(self._last, rewards, terminated=True, success=exact)

    def sample_action(self, rng: random.Random) -> str:
        """A random valid call: a search for words of the question, an open of a title already
        shown, now and then an answer (a title already shown, or a word)."""
        assert self.question is not None
        roll = rng.random()
        if roll < 0.1:
            guess = rng.choice(self._seen) if self._seen else rng.choice(self.question.text.split())
            return call_text("answer", text=guess)
        if roll < 0.55 and self._seen:
            return call_text("open", title=rng.choice(self._seen))
        words = self.question.text.rstrip(".?").split()
        start = rng.randrange(len(words))
        return call_text("search", query=" ".join(words[start : start + rng.randint(1, 4)]))


# ---------------------------------------------------------------------------------------- perf
def search_latency(
    articles: int = 100_000, *, queries: int = 200, seed: int = 0, cache_dir: str | os.PathLike[str] | None = None
) -> dict[str, float]:
    """Search latency over an encyclopedia of ``articles`` articles: build time (0 when cached),
    then p50/p99 in milliseconds of ``queries`` searches (top 5) for the names questions start
    from, as the env's ``search`` tool runs them."""
    start = time.perf_counter()
    world, index = shared_encyclopedia(articles, seed, cache_dir)
    ready = time.perf_counter() - start
    rng = random.Random(seed)
    names = [world.title(rng.randrange(len(world))) for _ in range(queries)]
    index.search(names[0], TOP_K)  # warm: maps the arrays
    times = []
    for name in names:
        t = time.perf_counter()
        index.search(name, TOP_K)
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return {
        "articles": float(len(world)),
        "setup_s": ready,
        "search_p50_ms": statistics.median(times),
        "search_p99_ms": times[min(len(times) - 1, int(0.99 * len(times)))],
    }
