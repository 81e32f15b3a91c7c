"""WebShop search: the pruned ranking (MaxScore over the impact arrays) is the exhaustive one.

Scores are compared for equality, not within a tolerance: both paths add the same float64 term
scores in the same (query) order, and the tie-break by product index depends on scores being
bit-identical, so any drift would be a bug that changes rankings.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from envgym.agents.solvers.webshop import parse_instruction
from envgym.environments.webshop import search as search_module
from envgym.environments.webshop.catalogue import Catalogue, GeneratedCatalogue, ListCatalogue, asin_of
from envgym.environments.webshop.search import SearchIndex, query_terms

from envgym.errors import InvalidKwargsError

LIMITS = (1, 7, 50, 300)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("webshop-search")


def _vocabulary(catalogue: Catalogue) -> Counter[str]:
    """Searchable words and the number of products each occurs in."""
    df: Counter[str] = Counter()
    for i in range(len(catalogue)):
        df.update(set(query_terms(catalogue.product(i).search_text())))
    return df


def _queries(catalogue: Catalogue, rng: random.Random) -> list[str]:
    """Agent-like queries and random ones: 1 to 40 words, rare and near-ubiquitous words, repeats."""
    df = _vocabulary(catalogue)
    words = sorted(df)
    by_df = sorted(words, key=lambda w: (df[w], w))
    rare = [w for w in by_df if df[w] <= 3] or by_df[:20]
    common = by_df[-15:]  # in most products: bounds that barely differ, the hardest case to prune
    n_goals = min(catalogue.n_goals(), 60)
    queries = [parse_instruction(catalogue.goal(i).instruction)[0] for i in range(n_goals)]
    queries += [catalogue.goal(i).instruction for i in range(0, n_goals, 6)]  # price clause included
    queries += [catalogue.goal(i).query for i in range(0, n_goals, 3)]
    for k in (1, 1, 2, 2, 3, 4, 5, 8, 13, 21, 40):
        queries.append(" ".join(rng.choice(words) for _ in range(k)))
        queries.append(" ".join(rng.choice(common) for _ in range(k)))
        queries.append(" ".join([rng.choice(rare)] + [rng.choice(common) for _ in range(k)]))
        queries.append(" ".join([rng.choice(rare) for _ in range(min(k, 4))] + [rng.choice(words) for _ in range(k)]))
    word = rng.choice(words)
    queries += [f"{word} {word} {rng.choice(words)}", f"{word} {rng.choice(words)} {word} {word}"]
    queries += [" ".join(common), " ".join(common[-2:]), f"{rare[0]} {rare[-1]}", "zzzzqq " + common[0]]
    return queries


def _assert_pruned_is_exhaustive(index: SearchIndex, queries: list[str]) -> int:
    """Check every query at every limit; return how many results were compared."""
    compared = 0
    for q in queries:
        for limit in LIMITS:
            ids, scores = index.scored(q, limit, method="pruned")
            ref_ids, ref_scores = index.scored(q, limit, method="exhaustive")
            assert ids.tolist() == ref_ids.tolist(), (q, limit)
            assert scores.tolist() == ref_scores.tolist(), (q, limit)  # bit for bit: see the docstring
            assert np.all(np.diff(scores) <= 0) and len(ids) <= limit
            compared += len(ids)
        assert index.search(q) == index.search_exhaustive(q) == index.scored(q, method="pruned")[0].tolist()
    return compared


@pytest.mark.parametrize("size", [300, 3000])
def test_pruned_search_equals_exhaustive_on_generated_catalogues(cache: Path, size: int) -> None:
    catalogue = GeneratedCatalogue(size, seed=size)
    index = SearchIndex.for_catalogue(catalogue, cache)
    queries = _queries(catalogue, random.Random(size))
    compared = _assert_pruned_is_exhaustive(index, queries)
    assert compared > 50 * len(queries)  # most queries do fill the results
    for q in queries[:25:3]:  # and both agree with FTS5's own bm25() ranking
        assert index.search(q) == index.search_fts5(q), q


def test_ties_break_by_product_index_under_pruning(cache: Path) -> None:
    # 400 products whose texts come from 6 templates: every score is shared by dozens of products,
    # so the last results kept are decided by the tie-break alone.
    base = GeneratedCatalogue(20, seed=3)
    templates = [base.product(i) for i in range(6)]
    rng = random.Random(0)
    products = [dataclasses.replace(templates[rng.randrange(6)], asin=asin_of(i)) for i in range(400)]
    catalogue = ListCatalogue(products, [base.goal(i) for i in range(6)], label="ties")
    index = SearchIndex.for_catalogue(catalogue, cache)
    queries = _queries(catalogue, random.Random(1))
    _assert_pruned_is_exhaustive(index, queries)
    q = " ".join(templates[0].title.split()[:4])
    ids, scores = index.scored(q, 50, method="pruned")
    assert len(set(scores.tolist())) < 10 and len(ids) == 50  # ties did happen
    tied = scores == scores[-1]
    assert ids[tied].tolist() == sorted(ids[tied].tolist())  # lower index first among equals


def test_pruning_holds_across_many_searches_and_threads(cache: Path) -> None:
    """The search reuses one accumulator: it must be left clean after each search, also when
    threads search at once (a second searcher works on its own)."""
    catalogue = GeneratedCatalogue(3000, seed=3000)
    index = SearchIndex.for_catalogue(catalogue, cache)
    queries = _queries(catalogue, random.Random(7))
    expected = {q: index.search_exhaustive(q) for q in queries}

    def work(offset: int) -> list[tuple[str, list[int]]]:
        method = ("pruned", "auto")[offset % 2]  # auto: these small queries sum in the same working memory
        return [(q, index.scored(q, method=method)[0].tolist()) for q in queries[offset:] + queries[:offset]]

    with ThreadPoolExecutor(4) as pool:
        results = [pair for part in pool.map(work, [0, 17, 34, 51]) for pair in part]
    assert len(results) == 4 * len(queries)
    assert all(got == expected[q] for q, got in results)


def test_index_without_stored_maxima_derives_them(cache: Path, tmp_path: Path) -> None:
    catalogue = GeneratedCatalogue(300, seed=300)
    fresh = SearchIndex.for_catalogue(catalogue, tmp_path)
    (fresh.folder / "maxima.npy").unlink()  # as an index written before the maxima were stored
    old = SearchIndex(fresh.folder)
    reference = SearchIndex.for_catalogue(catalogue, cache)
    for q in _queries(catalogue, random.Random(3))[:40]:
        assert old.scored(q, method="pruned")[0].tolist() == reference.search(q), q


def test_block_bounds_bound_each_block_and_are_derived_alike_for_an_old_index(tmp_path: Path) -> None:
    catalogue = GeneratedCatalogue(1000, seed=5)  # 1000 = 62 blocks of 16 and a last one of 8
    fresh = SearchIndex.for_catalogue(catalogue, tmp_path)
    stored = np.load(fresh.folder / "blocks.npy")
    arrays = fresh._load()
    assert stored.dtype == np.uint8 and stored.shape == (len(arrays.vocab), 63)
    for t in range(len(arrays.vocab)):
        docs, impacts = arrays.postings(t)
        top = np.zeros(63)
        np.maximum.at(top, docs // 16, impacts)
        bound = stored[t] * arrays.steps[t]
        assert np.all(bound >= top), t  # a bound, as the search computes it
        assert np.array_equal(stored[t] > 0, top > 0), t  # zero exactly where the term is absent
        assert np.all((stored[t].astype(float) - 1) * arrays.steps[t] < top), t  # and one step tight
        assert stored[t].max() == 255  # the block holding the term's maximum
    (fresh.folder / "blocks.npy").unlink()  # as an index written before the block bounds were
    (fresh.folder / "maxima.npy").unlink()
    old = SearchIndex(fresh.folder)
    assert np.array_equal(old._load().blocks, stored) and np.array_equal(old._load().maxima, arrays.maxima)
    for q in _queries(catalogue, random.Random(5))[:30]:
        assert old.scored(q, method="pruned")[0].tolist() == fresh.search_exhaustive(q), q


def test_block_bounds_of_the_wrong_shape_are_derived_anew(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    catalogue = GeneratedCatalogue(300, seed=300)
    fresh = SearchIndex.for_catalogue(catalogue, tmp_path)
    expected = np.load(fresh.folder / "blocks.npy")
    np.save(fresh.folder / "blocks.npy", np.full((3, 4), 255, dtype=np.uint8))  # damaged or foreign
    damaged = SearchIndex(fresh.folder)
    assert np.array_equal(damaged._load().blocks, expected)
    assert "blocks.npy holds uint8 (3, 4)" in caplog.text
    q = "walnut table lamp"
    assert damaged.scored(q, method="pruned")[0].tolist() == fresh.search_exhaustive(q)


def test_pruning_at_block_boundaries_with_a_word_in_every_product(cache: Path) -> None:
    """The best matches sit on either side of block boundaries (15 | 16, 31 | 32, the last, partial
    block), every product has the word "lantern" (a list covering every block), and 40 products
    score exactly alike, so the threshold is a tie that the block bounds must not cut."""
    base = GeneratedCatalogue(1000, seed=13)
    best = [15, 16, 31, 32, 47, 500, 511, 512, 992, 999]
    tied = [i for i in range(1000) if i % 25 == 7 and i not in best]
    products = []
    for i in range(1000):
        p = base.product(i)
        title = "lantern " + p.title
        if i in best:  # one text for all ten: they tie, first by index
            p = base.product(3)
            title = "walnut walnut copper lantern " + p.title
        elif i in tied:  # another shared text, scoring a little less
            p = base.product(3)
            title = "walnut copper lantern " + p.title
        products.append(dataclasses.replace(p, title=title, asin=asin_of(i)))
    catalogue = ListCatalogue(products, [base.goal(i) for i in range(20)], label="blocks")
    index = SearchIndex.for_catalogue(catalogue, cache)
    queries = ["walnut copper lantern", "lantern walnut", "lantern", "copper lantern pack", "walnut lantern lantern"]
    _assert_pruned_is_exhaustive(index, queries + _queries(catalogue, random.Random(13))[:20])
    ids, scores = index.scored("walnut copper lantern", 30, method="pruned")
    assert ids.tolist() == best + tied[:20]
    assert len(set(scores[:10].tolist())) == 1 and len(set(scores[10:].tolist())) == 1 and scores[9] > scores[10]


def test_bad_method_is_refused(cache: Path) -> None:
    index = SearchIndex.for_catalogue(GeneratedCatalogue(300, seed=300), cache)
    with pytest.raises(InvalidKwargsError, match="method must be one of 'auto', 'pruned', 'exhaustive'"):
        index.scored("coffee", method="wand")


@pytest.mark.parametrize("limit", [0, -3, 2.5, "50", True, None])
def test_bad_limit_is_refused(cache: Path, limit: object) -> None:
    index = SearchIndex.for_catalogue(GeneratedCatalogue(300, seed=300), cache)
    for method in (index.search, index.search_exhaustive, index.search_fts5):
        with pytest.raises(InvalidKwargsError, match="limit must be a positive int"):
            method("coffee", limit)  # type: ignore[arg-type]


def test_a_wrong_guessed_threshold_falls_back_to_the_proven_one(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The search first tries a threshold guessed from a slice of the products and keeps the result
    only if enough products reach it; a catalogue whose best matches all sit in that slice makes
    the guess too high, and the search must then redo the work with the proven threshold."""
    base = GeneratedCatalogue(4000, seed=11)
    products = [base.product(i) for i in range(4000)]
    for i in range(5):  # only in the slice scored first: its 4th best is above the 7th best of all
        products[i] = dataclasses.replace(products[i], title="walnut lantern walnut lantern " + products[i].title)
    catalogue = ListCatalogue(products, [base.goal(i) for i in range(60)], label="skewed")
    index = SearchIndex.for_catalogue(catalogue, cache)
    passes: list[float] = []
    maxscore = search_module._maxscore
    monkeypatch.setattr(search_module, "_maxscore", lambda *a: passes.append(a[-1]) or maxscore(*a))
    q = "walnut lantern pack set"
    ids, scores = index.scored(q, 7, method="pruned")
    ref_ids, ref_scores = index.scored(q, 7, method="exhaustive")
    assert ids.tolist() == ref_ids.tolist() and scores.tolist() == ref_scores.tolist()
    assert set(ids[:5].tolist()) == set(range(5))
    assert len(passes) == 2 and passes[0] > passes[1]  # the guess, then the proven threshold
