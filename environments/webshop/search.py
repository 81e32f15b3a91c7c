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
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
from envgym.environments.webshop.catalogue import Catalogue
from envgym.environments.webshop.lexicon import STOP_WORDS

from envgym.errors import NotAvailableError
from envgym.models import cache_dir as envgym_cache_dir

__all__ = ["SEARCH_RETURN_N", "STOP_WORDS", "SearchIndex", "default_index_dir", "query_terms"]

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
    (folder / "terms.json").write_text(json.dumps(terms))


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


class SearchIndex:
    """Read-only BM25 search over one catalogue's index folder (see the module docstring).

    Build or open it with :meth:`for_catalogue`. :meth:`search` ranks with the impact arrays
    (memory-mapped, so processes share them); :meth:`search_fts5` asks FTS5 itself (``ORDER BY
    rank``, its ``bm25()``), which gives the same ranking and is the reference the tests compare
    against, but takes 50-100 ms per query at 100,000 products against ~1 ms. Instances pickle as
    their path and reopen the files in the receiving process.
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self._con: sqlite3.Connection | None = None
        self._arrays: tuple[dict[str, int], np.ndarray, np.ndarray, np.ndarray, int] | None = None

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

    def _load(self) -> tuple[dict[str, int], np.ndarray, np.ndarray, np.ndarray, int]:
        if self._arrays is None:
            terms = json.loads((self.folder / "terms.json").read_text())
            offsets = np.load(self.folder / "offsets.npy", mmap_mode="r")
            docs = np.load(self.folder / "docs.npy", mmap_mode="r")
            impacts = np.load(self.folder / "impacts.npy", mmap_mode="r")
            n_docs = json.loads((self.folder / _META).read_text())["documents"]
            self._arrays = ({t: i for i, t in enumerate(terms)}, offsets, docs, impacts, int(n_docs))
        return self._arrays

    def search(self, query: str, limit: int = SEARCH_RETURN_N) -> list[int]:
        """Product indexes of the best ``limit`` matches of ``query``, best first (ties: lower index)."""
        words = tuple(query_terms(query))
        if not words:
            return []
        vocab, offsets, docs, impacts, n_docs = self._load()
        rows = [vocab[t] for t in _stem(words) if t in vocab]
        if not rows:
            return []
        if len(rows) == 1:
            r = rows[0]
            ids = np.asarray(docs[offsets[r] : offsets[r + 1]])
            scores = np.asarray(impacts[offsets[r] : offsets[r + 1]], dtype=np.float64)
        else:
            total = np.zeros(n_docs, dtype=np.float64)
            for r in rows:
                lo, hi = offsets[r], offsets[r + 1]
                total[docs[lo:hi]] += impacts[lo:hi]  # a term lists each document once
            ids = np.flatnonzero(total)
            scores = total[ids]
        if len(ids) > limit:
            keep = np.argpartition(-scores, limit - 1)[:limit]
            cut = scores[keep].min()
            keep = np.flatnonzero(scores >= cut)  # every document tied with the last kept one
            ids, scores = ids[keep], scores[keep]
        order = np.lexsort((ids, -scores))[:limit]
        return [int(i) for i in ids[order]]

    def search_fts5(self, query: str, limit: int = SEARCH_RETURN_N) -> list[int]:
        """The same search answered by FTS5's own ``bm25()`` ranking (slow; the reference)."""
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
            "SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY rank, rowid LIMIT ?", (match, int(limit))
        )
        return [r[0] for r in rows]

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None
        self._arrays = None

    def __getstate__(self) -> dict[str, Any]:
        return {"folder": self.folder}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.folder = state["folder"]
        self._con = None
        self._arrays = None
