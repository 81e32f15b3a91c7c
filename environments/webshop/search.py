"""BM25 search over a catalogue with SQLite FTS5, built once per catalogue and cached on disk.

WebShop searches with Lucene BM25 (pyserini, Java) over ``lower(title + description + first bullet
point + option values)`` and shows the top 50 results, 10 per page. Here the same documents go
into an SQLite FTS5 table (embedded in Python's ``sqlite3``, no Java), tokenised by
``porter unicode61`` (lower case, diacritics folded, Porter stems, as Lucene's English analyzer),
and ranked by FTS5's ``bm25()`` (k1 = 1.2, b = 0.75; pyserini's defaults are k1 = 0.9, b = 0.4, so
rankings differ slightly from WebShop's: the retriever is part of the benchmark version). Query
words are OR-ed, as Lucene's default query parser does, after dropping English stop words; ties
keep catalogue order. WebShop's search backdoors (``<r>``, ``<a>``, ``<c>``, ``<q>`` as the first
word) do not exist here: ``<q>`` is the plain word ``q``.

The index lives in ``<cache>/webshop/<catalogue fingerprint>/index.sqlite`` (``<cache>`` is
``$ENVGYM_CACHE_DIR``, ``$ENVGYM_CACHE``, ``$XDG_CACHE_HOME/envgym`` or ``~/.cache/envgym``, or the
``cache_dir`` given). It is written to a temporary file in the same folder and renamed into place,
so two workers building at once both end with a complete file and a reader never sees a partial
one. Every environment instance opens the file read-only: workers share it through the operating
system's page cache rather than holding copies.

:meth:`SearchIndex.search` ranks from impact arrays written next to the FTS5 file: per term, the
documents containing it (in document order), their BM25 term scores, the term's largest score
(``maxima.npy``, 8 bytes a term) and its block bounds (``blocks.npy``: for each block of 16
consecutive products, a bound on the term's scores there, one byte: a multiple 0-255 of the term's
maximum / 255, rounded up; 0 where no product of the block has the term; 1 byte per term per 16
products, 34 MB at 1,000,000 products, memory-mapped and shared like the other arrays). An index
written before either existed derives them on first use, in each process's own memory (1-3 s at
1,000,000 products; rebuild the index to share them). On large catalogues the search prunes with
MaxScore (Turtle and Flood, 1995) over the per-term bounds, refined per block as block-max
MaxScore does (Ding and Suel, 2011):

0. a first lower bound ``theta`` on the ``limit``-th best score: the ``limit``-th best of the first
   1/32 of the products, scored in full (1/32 of an exhaustive search). The search first runs
   with a higher guess (the slice's score of the rank 4 * ``limit`` products would have there)
   and keeps that result only if at least ``limit`` products reach the guess, which proves it a
   lower bound too; otherwise it runs again from the proven one;
1. per block, the query's bound is the sum of its terms' block bounds; blocks whose bound is below
   ``theta`` are skipped throughout. Terms are read in full (in the other blocks) from the highest
   bound down, summing into a dense accumulator, until the bounds of the terms left sum below
   ``theta``: a product in none of the lists read cannot reach it;
2. the other terms are added only for the products whose bound (sum so far + the block bounds of
   the terms left) still reaches ``theta``: by one pass over the term's list while those are
   many, by a binary search for each while they are few; ``theta`` rises to the ``limit``-th best
   sum so far as it goes;
3. the few left are scored exactly, term by term in query order, as the exhaustive sum does.

So the ranking, the scores and the ties are bit for bit those of
:meth:`SearchIndex.search_exhaustive`, which scores every matching product and stays available
(the tests compare the two, and both with FTS5's own ranking). Bounds are compared with a relative
margin of a few units in the last place per term (of float64 for the scores, of float32 for the
sums of block bounds), so float rounding can only keep a product longer, never drop one that
belongs. Queries whose lists hold fewer than :data:`PRUNE_FROM` postings are summed exhaustively,
in the same working memory. The working memory is 9 bytes per product and process (float64 sums
and a candidate mark, 9 MB at 1,000,000 products), reused and left all zero, plus 4 bytes per
block and query term while a search runs (the float32 sums of the block bounds, 0.25 MB a term at
1,000,000 products).
"""

from __future__ import annotations

import array
import functools
import json
import logging
import os
import re
import shutil
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from envgym.environments.webshop.catalogue import Catalogue
from envgym.environments.webshop.lexicon import STOP_WORDS

from envgym.errors import InvalidKwargsError, NotAvailableError, check_choice
from envgym.models import cache_dir as envgym_cache_dir

__all__ = ["PRUNE_FROM", "SEARCH_RETURN_N", "STOP_WORDS", "SearchIndex", "default_index_dir", "query_terms"]

logger = logging.getLogger(__name__)

#: WebShop's ``SEARCH_RETURN_N``: results kept per search.
SEARCH_RETURN_N = 50
_INDEX_VERSION = 2
_DB = "index.sqlite"
_META = "meta.json"
_TOKENIZER = "porter unicode61 remove_diacritics 2"
_K1 = 1.2
_B = 0.75
_TOKEN = re.compile(r"[0-9a-z]+")
_METHODS = ("auto", "pruned", "exhaustive")
#: Relative margin per query term on bound comparisons: a float64 sum of n non-negative terms is
#: within (n - 1) units of 2**-53 (relative) of the exact sum, whatever the order of the additions.
_ULP = 2.0**-52
_ULP32 = 2.0**-23
#: The first threshold is the limit-th best score of the first 1/_SLICE of the documents (at least
#: _SLICE_MIN * limit of them): a cost of about 1/_SLICE of an exhaustive search.
_SLICE = 32
_SLICE_MIN = 64
#: The guessed threshold: the score _GUESS * limit products are expected to reach (then checked).
_GUESS = 4
#: A binary search for one candidate costs about as much as this many postings of a pass over a
#: list (measured at 1M products: ~40 ns against ~2.5 ns).
_LOOKUP_COST = 16
#: Queries whose lists hold fewer postings than this are scored exhaustively: below it the fixed
#: costs of pruning outweigh what it saves (10,000 products: 0.4 ms exhaustive).
PRUNE_FROM = 50_000
#: Block bounds cover blocks of 2**_BLOCK_SHIFT consecutive product indexes (16: 1 byte per term per
#: 16 products, 34 MB at 1,000,000 products and 550 terms).
_BLOCK_SHIFT = 4
#: A block bound is a multiple, 0 to _BLOCK_STEPS, of the term's maximum / _BLOCK_STEPS (one byte).
_BLOCK_STEPS = 255


def default_index_dir(catalogue: Catalogue, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The folder holding ``catalogue``'s index."""
    root = Path(cache_dir).expanduser() if cache_dir is not None else envgym_cache_dir() / "webshop"
    return root / catalogue.fingerprint


def query_terms(query: str) -> list[str]:
    """The words of ``query`` that are searched: lower-case alphanumeric runs, stop words dropped.
    A repeated word counts again (as in FTS5 and Lucene: each query clause adds its score)."""
    return [w for w in _TOKEN.findall(query.lower()) if w not in STOP_WORDS]


def _build(catalogue: Catalogue, final: Path) -> None:
    """Write the FTS5 index and the impact arrays into a temporary folder, then rename it to ``final``."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f"{final.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.mkdir()
    start = time.perf_counter()
    try:
        con = sqlite3.connect(tmp / _DB)
        try:
            con.execute("PRAGMA journal_mode=OFF")
            con.execute("PRAGMA synchronous=OFF")
            con.execute(f"CREATE VIRTUAL TABLE docs USING fts5(contents, content='', tokenize='{_TOKENIZER}')")
            batch: list[tuple[int, str]] = []
            for index, text in catalogue.iter_documents():
                batch.append((index, text))
                if len(batch) >= 5000:
                    con.executemany("INSERT INTO docs(rowid, contents) VALUES (?, ?)", batch)
                    batch.clear()
            if batch:
                con.executemany("INSERT INTO docs(rowid, contents) VALUES (?, ?)", batch)
            con.execute("INSERT INTO docs(docs) VALUES ('optimize')")
            con.commit()
            _write_impacts(con, len(catalogue), tmp)
        finally:
            con.close()
        meta = {"fingerprint": catalogue.fingerprint, "documents": len(catalogue), "version": _INDEX_VERSION}
        (tmp / _META).write_text(json.dumps(meta))
        try:
            os.replace(tmp, final)  # atomic: readers see no folder or the whole folder
        except OSError:
            if not _valid(final, catalogue):  # another worker's complete index is in place: keep it
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    logger.info(
        "built the WebShop search index for %s in %.1f s: %s", catalogue.label, time.perf_counter() - start, final
    )


def _write_impacts(con: sqlite3.Connection, n_docs: int, folder: Path) -> None:
    """Per term, the documents containing it and their BM25 term scores, read from FTS5's own index.

    The score is FTS5's ``bm25()`` term for term: ``idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len /
    avglen))`` with ``idf = max(1e-6, ln((N - n + 0.5) / (n + 0.5)))``, ``len`` the document's token
    count, k1 = 1.2 and b = 0.75. Summing them over the query terms gives FTS5's ranking.
    """
    con.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, docs, 'instance')")
    terms: list[str] = []
    offsets = array.array("q", [0])
    docs = array.array("i")
    tfs = array.array("H")
    current = None
    for term, doc, count in con.execute("SELECT term, doc, count(*) FROM temp.vocab GROUP BY term, doc"):
        if term != current:
            if current is not None:
                offsets.append(len(docs))
            terms.append(term)
            current = term
        docs.append(doc)
        tfs.append(min(count, 65535))
    offsets.append(len(docs))
    if not terms:
        offsets = array.array("q", [0])
    doc_ids = np.frombuffer(docs, dtype=np.int32) if docs else np.zeros(0, np.int32)
    tf = np.frombuffer(tfs, dtype=np.uint16).astype(np.float64) if tfs else np.zeros(0)
    lengths = np.bincount(doc_ids, weights=tf, minlength=n_docs)
    avg = float(lengths.mean()) if n_docs else 1.0
    starts = np.frombuffer(offsets, dtype=np.int64)
    df = np.diff(starts)
    idf = np.maximum(1e-6, np.log((n_docs - df + 0.5) / (df + 0.5)))
    term_idf = np.repeat(idf, df)
    norm = _K1 * (1 - _B + _B * lengths[doc_ids] / avg)
    # float64, as FTS5 computes: float32 impacts reorder near-ties against FTS5's own ranking.
    impacts = term_idf * tf * (_K1 + 1) / (tf + norm)
    np.save(folder / "offsets.npy", starts)
    np.save(folder / "docs.npy", doc_ids)
    np.save(folder / "impacts.npy", impacts)
    maxima = _term_maxima(starts, impacts)
    np.save(folder / "maxima.npy", maxima)
    np.save(folder / "blocks.npy", _block_bounds(starts, doc_ids, impacts, maxima, n_docs))
    (folder / "terms.json").write_text(json.dumps(terms))


def _term_maxima(offsets: np.ndarray, impacts: np.ndarray) -> np.ndarray:
    """Each term's largest score: the bound the pruned search works with (8 bytes per term)."""
    if len(offsets) < 2:
        return np.zeros(0)
    return np.maximum.reduceat(impacts, offsets[:-1])


def _n_blocks(n_docs: int) -> int:
    return (max(n_docs, 1) - 1 >> _BLOCK_SHIFT) + 1


def _block_steps(maxima: np.ndarray) -> np.ndarray:
    """Per term, the value of one step of its block bounds: its maximum / _BLOCK_STEPS, rounded up so
    that _BLOCK_STEPS steps reach the maximum."""
    return np.nextafter(maxima / _BLOCK_STEPS, np.inf)


def _block_bounds(
    offsets: np.ndarray, docs: np.ndarray, impacts: np.ndarray, maxima: np.ndarray, n_docs: int
) -> np.ndarray:
    """Per term and block of 2**_BLOCK_SHIFT products: the number of steps (uint8, see
    :func:`_block_steps`) whose value, ``steps * step`` in float64, is at least the term's largest
    impact in the block; 0 where the term is in none of the block's products."""
    n_terms = len(offsets) - 1 if len(offsets) else 0
    out = np.zeros((n_terms, _n_blocks(n_docs)), dtype=np.uint8)
    steps = _block_steps(maxima)
    for t in range(n_terms):
        lo, hi = int(offsets[t]), int(offsets[t + 1])
        if hi == lo:
            continue
        block = docs[lo:hi] >> _BLOCK_SHIFT
        starts = np.flatnonzero(np.diff(block, prepend=-1))  # each block's first posting
        top = np.maximum.reduceat(impacts[lo:hi], starts)
        q = np.ceil(top / steps[t])
        q += q * steps[t] < top  # the division rounded down: one step more
        out[t, block[starts]] = q
    return out


def _valid(folder: Path, catalogue: Catalogue) -> bool:
    try:
        meta = json.loads((folder / _META).read_text())
    except (OSError, ValueError):
        return False
    return meta == {"fingerprint": catalogue.fingerprint, "documents": len(catalogue), "version": _INDEX_VERSION}


class _Stemmer:
    """Query words -> FTS5 terms, through the same tokenizer as the index (an in-memory FTS5
    table), so queries and documents are stemmed alike. Results are cached per query."""

    def __init__(self) -> None:
        self._con = sqlite3.connect(":memory:", check_same_thread=False)
        self._con.execute(f"CREATE VIRTUAL TABLE q USING fts5(x, tokenize='{_TOKENIZER}')")
        self._con.execute("CREATE VIRTUAL TABLE qv USING fts5vocab(q, 'instance')")
        self.terms = functools.lru_cache(maxsize=8192)(self._terms)

    def _terms(self, words: tuple[str, ...]) -> tuple[str, ...]:
        con = self._con
        con.execute("DELETE FROM q")
        con.execute("INSERT INTO q(rowid, x) VALUES (1, ?)", (" ".join(words),))
        return tuple(term for (term,) in con.execute("SELECT term FROM qv ORDER BY offset"))


_STEMMER: _Stemmer | None = None


def _stem(words: tuple[str, ...]) -> tuple[str, ...]:
    global _STEMMER
    if _STEMMER is None:
        _STEMMER = _Stemmer()
    return _STEMMER.terms(words)


@dataclass(frozen=True)
class _Arrays:
    """One index folder's impact arrays (memory-mapped, read-only) and what is derived from them."""

    vocab: dict[str, int]
    offsets: np.ndarray  # int64, len(vocab) + 1: term t's postings are [offsets[t], offsets[t + 1])
    docs: np.ndarray  # int32 document ids, ascending within each term
    impacts: np.ndarray  # float64 BM25 term scores, aligned with docs
    maxima: np.ndarray  # float64 per term: its largest impact
    blocks: np.ndarray  # uint8 (terms, blocks): per term, a bound on its impacts in each block, in steps
    steps: np.ndarray  # float64 per term: the value of one step of its block bounds
    n_docs: int

    def postings(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = int(self.offsets[row]), int(self.offsets[row + 1])
        return self.docs[lo:hi], self.impacts[lo:hi]


class _Scratch:
    """Dense per-product working memory of one pruned search, all zero between searches."""

    def __init__(self, n_docs: int) -> None:
        self.sums = np.zeros(n_docs)  # partial scores
        self.marks = np.zeros(n_docs, dtype=bool)  # candidates still in the running


def _check_limit(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 1:
        raise InvalidKwargsError(
            f"limit must be a positive int (results kept per search; WebShop keeps {SEARCH_RETURN_N}), got {limit!r}."
        )
    return int(limit)


_NONE = (np.zeros(0, np.int32), np.zeros(0))


def _top(ids: np.ndarray, scores: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``limit`` best ``ids`` and their scores, best first, ties by lower id."""
    if len(ids) > limit:
        keep = np.argpartition(-scores, limit - 1)[:limit]
        cut = scores[keep].min()
        keep = np.flatnonzero(scores >= cut)  # every document tied with the last kept one
        ids, scores = ids[keep], scores[keep]
    order = np.lexsort((ids, -scores))[:limit]
    return ids[order], scores[order]


def _impacts_at(docs: np.ndarray, impacts: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The term's score in each of ``ids`` (ascending), 0.0 where it does not occur."""
    pos = np.searchsorted(docs, ids)
    np.minimum(pos, len(docs) - 1, out=pos)
    return np.where(docs[pos] == ids, impacts[pos], 0.0)


class SearchIndex:
    """Read-only BM25 search over one catalogue's index folder (see the module docstring).

    Build or open it with :meth:`for_catalogue`. :meth:`search` ranks with the impact arrays
    (memory-mapped, so processes share them) and prunes with per-term score bounds;
    :meth:`search_exhaustive` scores every matching document from the same arrays (same result,
    slower on large catalogues); :meth:`scored` returns the scores too; :meth:`search_fts5` asks FTS5 itself (``ORDER BY rank``, its
    ``bm25()``), which gives the same ranking and is the reference the tests compare against, but
    takes 50-100 ms per query at 100,000 products. Instances pickle as their path and reopen the
    files in the receiving process.
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self._con: sqlite3.Connection | None = None
        self._arrays: _Arrays | None = None
        # Working memory of the pruned search (9 bytes per product), reused and left all zero
        # after each search; a search finding it in use (another thread) allocates its own.
        self._scratch: _Scratch | None = None
        self._scratch_lock = threading.Lock()

    @classmethod
    def for_catalogue(cls, catalogue: Catalogue, cache_dir: str | os.PathLike[str] | None = None) -> SearchIndex:
        """The index of ``catalogue``, built (once, atomically) if the cache has none."""
        folder = default_index_dir(catalogue, cache_dir)
        if not _valid(folder, catalogue):
            if folder.exists():  # stale or damaged: move it aside, then build afresh
                shutil.rmtree(folder, ignore_errors=True)
            try:
                _build(catalogue, folder)
            except OSError as err:
                raise NotAvailableError(
                    f"could not write the WebShop search index to {folder} ({err}); pass cache_dir= a writable "
                    "folder or set ENVGYM_CACHE_DIR."
                ) from err
        return cls(folder)

    def _load(self) -> _Arrays:
        if self._arrays is None:
            terms = json.loads((self.folder / "terms.json").read_text())
            # Plain ndarray views of the maps: slicing a np.memmap costs a Python-level __getitem__.
            offsets = np.load(self.folder / "offsets.npy", mmap_mode="r").view(np.ndarray)
            docs = np.load(self.folder / "docs.npy", mmap_mode="r").view(np.ndarray)
            impacts = np.load(self.folder / "impacts.npy", mmap_mode="r").view(np.ndarray)
            try:
                maxima = np.load(self.folder / "maxima.npy")
            except FileNotFoundError:  # an index written before the maxima were: derive them once
                maxima = _term_maxima(offsets, impacts)
            n_docs = int(json.loads((self.folder / _META).read_text())["documents"])
            shape = (len(terms), _n_blocks(n_docs))
            blocks: np.ndarray | None
            try:
                blocks = np.load(self.folder / "blocks.npy", mmap_mode="r").view(np.ndarray)
            except FileNotFoundError:  # an index written before the block bounds were: derive them
                blocks = None
            if blocks is not None and (blocks.shape != shape or blocks.dtype != np.uint8):
                logger.warning(
                    "%s holds %s %s, not uint8 %s: derived anew",
                    self.folder / "blocks.npy",
                    blocks.dtype,
                    blocks.shape,
                    shape,
                )
                blocks = None
            if blocks is None:
                blocks = _block_bounds(offsets, docs, impacts, maxima, n_docs)
            vocab = {t: i for i, t in enumerate(terms)}
            steps = _block_steps(maxima)
            self._arrays = _Arrays(vocab, offsets, docs, impacts, maxima, blocks, steps, n_docs)
        return self._arrays

    def _rows(self, query: str) -> tuple[_Arrays, list[int]]:
        """The index arrays and the query's term rows, in query order (a repeated word repeats)."""
        words = tuple(query_terms(query))
        if not words:
            return self._load(), []
        arrays = self._load()
        return arrays, [arrays.vocab[t] for t in _stem(words) if t in arrays.vocab]

    def search(self, query: str, limit: int = SEARCH_RETURN_N) -> list[int]:
        """Product indexes of the best ``limit`` matches of ``query``, best first (ties: lower index).

        Equal to :meth:`search_exhaustive` (the module docstring says how, and why exactly)."""
        ids, _ = self.scored(query, limit)
        return ids.tolist()

    def search_exhaustive(self, query: str, limit: int = SEARCH_RETURN_N) -> list[int]:
        """:meth:`search` without pruning: every document containing a query term is scored."""
        ids, _ = self.scored(query, limit, method="exhaustive")
        return ids.tolist()

    def scored(
        self, query: str, limit: int = SEARCH_RETURN_N, *, method: str = "auto"
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`search`'s product indexes (int32) and their BM25 scores (float64), best first.

        ``method``: ``"pruned"`` (MaxScore), ``"exhaustive"`` (every matching document scored) or
        ``"auto"`` (pruned when the query's lists hold :data:`PRUNE_FROM` postings or more). All
        three return the same arrays, bit for bit."""
        limit = _check_limit(limit)
        check_choice("method", method, _METHODS)
        arrays, rows = self._rows(query)
        if method == "auto":
            postings = sum(int(arrays.offsets[r + 1] - arrays.offsets[r]) for r in rows)
            method = "pruned" if postings >= PRUNE_FROM else "summed"
        if method == "exhaustive" or len(set(rows)) <= 1:  # one list: nothing to prune against
            return self._exhaustive(arrays, rows, limit)
        shared = self._scratch_lock.acquire(blocking=False)
        try:
            if not shared:
                work = _Scratch(arrays.n_docs)
            else:
                if self._scratch is None:
                    self._scratch = _Scratch(arrays.n_docs)
                work = self._scratch
            if method == "summed":
                return _summed(arrays, rows, limit, work.sums)
            return self._pruned(arrays, rows, limit, work)
        finally:
            if shared:
                self._scratch_lock.release()

    @staticmethod
    def _exhaustive(arrays: _Arrays, rows: list[int], limit: int) -> tuple[np.ndarray, np.ndarray]:
        if not rows:
            return _NONE
        if len(rows) == 1:
            ids, scores = arrays.postings(rows[0])
            return _top(ids, scores, limit)
        total = np.zeros(arrays.n_docs, dtype=np.float64)
        for r in rows:
            docs, impacts = arrays.postings(r)
            total[docs] += impacts  # a term lists each document once
        ids = np.flatnonzero(total)
        return _top(ids, total[ids], limit)

    @staticmethod
    def _pruned(arrays: _Arrays, rows: list[int], limit: int, work: _Scratch) -> tuple[np.ndarray, np.ndarray]:
        """MaxScore over the impact arrays; ``work`` (all zero) is left all zero."""
        weight: dict[int, int] = {}
        for r in rows:  # a repeated word counts again: its bound and score are multiplied
            weight[r] = weight.get(r, 0) + 1
        terms = sorted(weight, key=lambda r: -float(arrays.maxima[r]) * weight[r])
        lists = [arrays.postings(r) for r in terms]
        weights = [weight[r] for r in terms]
        rest = [0.0] * len(terms)  # rest[j]: the bound of terms j+1.. together
        for j in range(len(terms) - 2, -1, -1):
            rest[j] = rest[j + 1] + float(arrays.maxima[terms[j + 1]]) * weights[j + 1]
        # float64 sums of scores and float32 sums of block bounds (up to one unit of 2**-24 per
        # term and a few more for the products and the comparisons)
        margin = 1.0 + 8 * (len(rows) + 2) * _ULP + 4 * (len(terms) + 2) * _ULP32
        bounds = _suffix_block_bounds(arrays, terms, weights)
        # 0. Two thresholds from a slice of the products: its limit-th best score, a proven lower
        #    bound on the limit-th best of all; and a guess, a higher rank of the slice's, which
        #    holds when at least limit products score that much, as the search itself finds out.
        proven, guess = _slice_thresholds(lists, weights, limit, work.sums)
        if guess > proven:
            ids, total = _maxscore(arrays, rows, limit, work, terms, lists, weights, rest, bounds, margin, guess)
            if np.count_nonzero(total >= guess * margin) >= limit:
                order = np.lexsort((ids, -total))[:limit]
                return ids[order], total[order]
        ids, total = _maxscore(arrays, rows, limit, work, terms, lists, weights, rest, bounds, margin, proven)
        order = np.lexsort((ids, -total))[:limit]
        return ids[order], total[order]

    def search_fts5(self, query: str, limit: int = SEARCH_RETURN_N) -> list[int]:
        """The same search answered by FTS5's own ``bm25()`` ranking (slow; the reference)."""
        limit = _check_limit(limit)
        terms = query_terms(query)
        if not terms:
            return []
        if self._con is None:
            # immutable=1: no locking or change detection, the file never changes once renamed in.
            self._con = sqlite3.connect(
                f"file:{self.folder / _DB}?mode=ro&immutable=1", uri=True, check_same_thread=False
            )
        match = " OR ".join(f'"{t}"' for t in terms)
        rows = self._con.execute(
            "SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY rank, rowid LIMIT ?", (match, limit)
        )
        return [r[0] for r in rows]

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None
        self._arrays = None
        self._scratch = None

    def __getstate__(self) -> dict[str, Any]:
        return {"folder": self.folder}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["folder"])  # type: ignore[misc]


def _maxscore(
    arrays: _Arrays,
    rows: list[int],
    limit: int,
    work: _Scratch,
    terms: list[int],
    lists: list[tuple[np.ndarray, np.ndarray]],
    weights: list[int],
    rest: list[float],
    bounds: list[np.ndarray],
    margin: float,
    theta: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Every product that can score ``theta`` or more (if ``theta`` is at most the ``limit``-th best
    score), with its exact score; ``work`` is left all zero. ``bounds[j]``: per block, a bound on
    what ``terms[j:]`` add to a product in it."""
    scratch, marks = work.sums, work.marks
    live = bounds[0] * margin >= theta  # the blocks where a product can reach theta
    # 1. The essential terms, highest bound first, until the terms left cannot lift a document
    #    found in none of them to theta; read in full (in the live blocks) and summed.
    read = 1
    while read < len(terms) and rest[read - 1] * margin >= theta:
        read += 1
    essential = []
    for j in range(read):
        docs, impacts = lists[j]
        inside = live[docs >> _BLOCK_SHIFT]
        essential.append((docs[inside], impacts[inside] * weights[j] if weights[j] > 1 else impacts[inside]))
    if read == 1:  # one list: its scores are the sums (a copy: fancy indexing)
        seen, partial = essential[0]
    else:
        seen, partial = _accumulate(essential, scratch)
        order = np.argsort(seen)
        seen, partial = seen[order], partial[order]
    if read == len(terms):  # every term read: partial is the score
        theta = max(theta, _kth(partial, limit))
        keep = partial * margin >= theta
    else:
        keep = (partial + bounds[read][seen >> _BLOCK_SHIFT]) * margin >= theta
    ids, partial = seen[keep], partial[keep]
    # 2. The other terms, for the documents whose bound (partial sum and the block bounds of the
    #    terms left) still reaches theta: a pass over the term's list (marked documents only)
    #    while these are many, else a lookup of each. ``partial`` stays aligned with ``ids``.
    marks[ids] = True
    try:
        while read < len(terms):
            docs, impacts = lists[read]
            if len(ids) * _LOOKUP_COST > len(docs):
                hit = np.flatnonzero(marks[docs])
                add = impacts[hit]
                at = np.searchsorted(ids, docs[hit])  # ids are sorted; each hit is one of them
            else:
                add = _impacts_at(docs, impacts, ids)
                at = slice(None)
            partial[at] += add * weights[read] if weights[read] > 1 else add
            read += 1
            theta = max(theta, _kth(partial[partial > theta], limit))  # partial sums are lower bounds
            if read < len(terms):
                keep = (partial + bounds[read][ids >> _BLOCK_SHIFT]) * margin >= theta
            else:
                keep = partial * margin >= theta
            marks[ids] = keep
            ids, partial = ids[keep], partial[keep]
    finally:
        marks[ids] = False
    # 3. Exact scores of the survivors, summed in query order as the exhaustive search does.
    total = np.zeros(len(ids), dtype=np.float64)
    looked: dict[int, np.ndarray] = {}
    for r in rows:
        if r not in looked:
            looked[r] = _impacts_at(*arrays.postings(r), ids)
        total += looked[r]
    return ids, total


def _summed(arrays: _Arrays, rows: list[int], limit: int, sums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The exhaustive search summed in ``sums`` (all zero, left so) rather than a fresh dense array:
    the same sums in the same order, without allocating and scanning one float per product."""
    ids, total = _accumulate([arrays.postings(r) for r in rows], sums)
    return _top(ids, total, limit)  # _top orders by score, then id: input order is irrelevant


def _accumulate(lists: list[tuple[np.ndarray, np.ndarray]], scratch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sum the ``(docs, impacts)`` lists, in order, in ``scratch`` (all zero, and left so): the
    products met (each once, unsorted) and their sums."""
    touched: list[np.ndarray] = []
    try:
        for docs, impacts in lists:
            if not touched:  # scratch is all zero
                touched.append(docs)
                scratch[docs] = impacts
            else:
                before = scratch[docs]
                touched.append(docs[before == 0.0])  # impacts are > 0: zero means not seen yet
                scratch[docs] = before + impacts
        seen = np.concatenate(touched)
        return seen, scratch[seen]
    finally:
        for part in touched:
            scratch[part] = 0.0


def _suffix_block_bounds(arrays: _Arrays, terms: list[int], weights: list[int]) -> list[np.ndarray]:
    """``out[j]``: per block, the sum of the block bounds of ``terms[j:]`` (times their weights), in
    float32 (half the memory traffic of float64): each step's value is rounded up to a float32, and
    the rounding of the float32 products and sums is within the search's margin."""
    out: list[np.ndarray] = [np.zeros(0, np.float32)] * len(terms)
    acc = None
    for j in range(len(terms) - 1, -1, -1):
        t = terms[j]
        step = float(arrays.steps[t]) * weights[j]
        step32 = np.float32(step)
        if float(step32) < step:
            step32 = np.nextafter(step32, np.float32(np.inf))
        bound = np.multiply(arrays.blocks[t], step32, dtype=np.float32)
        acc = bound if acc is None else np.add(acc, bound, out=bound)
        out[j] = acc
    return out


def _kth(values: np.ndarray, k: int) -> float:
    """The ``k``-th largest of ``values`` (0.0 if there are fewer)."""
    if len(values) < k:
        return 0.0
    return float(np.partition(values, len(values) - k)[len(values) - k])


def _slice_thresholds(
    lists: list[tuple[np.ndarray, np.ndarray]], weights: list[int], limit: int, scratch: np.ndarray
) -> tuple[float, float]:
    """Score the first ``1 / _SLICE`` of the products in full (in ``scratch``, left clean) and
    return its ``limit``-th best score, no more than the ``limit``-th best of all products, and its
    best score of the rank that ``_GUESS * limit`` products overall would have in the slice."""
    width = min(len(scratch), max(len(scratch) // _SLICE, _SLICE_MIN * limit))
    part = scratch[:width]
    try:
        for (docs, impacts), w in zip(lists, weights):
            end = int(np.searchsorted(docs, docs.dtype.type(width)))  # a Python int would copy docs
            np.add.at(part, docs[:end], impacts[:end] * w if w > 1 else impacts[:end])  # faster than +=
        rank = max(1, -(-_GUESS * limit * width // len(scratch)))
        top = np.sort(np.partition(part, len(part) - limit)[len(part) - limit :]) if len(part) >= limit else None
        if top is None:
            return 0.0, 0.0
        return float(top[0]), float(top[-rank]) if rank < limit else float(top[0])
    finally:
        part[:] = 0.0
