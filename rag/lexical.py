"""The BM25 side of the index (bm25s), persisted beside the catalog.

The index for one exact list of chunks is saved under
``<data_dir>/bm25/<key>/`` where ``key`` is a hash of the ordered chunk ids
(a chunk id carries its paper's content hash, so the ids fix the text). Ingest
saves it once the catalog is committed; a fresh process loads it instead of
re-tokenising every chunk on its first query. A missing, stale or unreadable
copy is never trusted: the retriever then builds one in memory (and saves it).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)
logging.getLogger("bm25s").setLevel(logging.WARNING)  # its DEBUG lines flood CLI output

KEY_FILE = "chunk_key.txt"


def corpus_key(chunk_ids: Sequence[str]) -> str:
    h = hashlib.sha256()
    for c in chunk_ids:
        h.update(c.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()[:32]


def _quiet() -> None:
    logging.getLogger("bm25s").setLevel(logging.WARNING)  # its DEBUG lines flood CLI output


def _stemmer():
    import Stemmer

    return Stemmer.Stemmer("english")


@dataclass
class Lexical:
    bm25: Any  # bm25s.BM25
    idf: np.ndarray  # Lucene IDF by vocabulary id
    key: str
    loaded: bool = False  # True when read from disk rather than built

    @property
    def vocab(self) -> dict[str, int]:
        return self.bm25.vocab_dict

    @classmethod
    def build(cls, texts: Sequence[str], key: str) -> Lexical:
        import bm25s

        _quiet()

        tokens = bm25s.tokenize(list(texts), stopwords="en", stemmer=_STEMMER.get(),
                                show_progress=False)
        bm25 = bm25s.BM25()
        bm25.index(tokens, show_progress=False)
        return cls(bm25=bm25, idf=_idf(bm25, len(texts)), key=key)

    def save(self, root: Path) -> Path:
        """Write to a temporary folder, then rename into place (atomic: a
        concurrent reader sees the whole index or none), and drop older keys."""
        root.mkdir(parents=True, exist_ok=True)
        target = root / self.key
        if target.is_dir():
            return target
        tmp = root / f".tmp-{self.key}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        self.bm25.save(str(tmp), show_progress=False)
        (tmp / KEY_FILE).write_text(self.key, encoding="utf-8")
        try:
            tmp.rename(target)
        except OSError:  # another process saved the same key first
            shutil.rmtree(tmp, ignore_errors=True)
        for old in root.iterdir():
            if old.name != self.key and not old.name.startswith(".tmp-"):
                shutil.rmtree(old, ignore_errors=True)
        return target

    @classmethod
    def load(cls, root: Path, key: str, n_docs: int) -> Lexical | None:
        import bm25s

        path = root / key
        try:
            if (path / KEY_FILE).read_text(encoding="utf-8") != key:
                return None
            bm25 = bm25s.BM25.load(str(path), mmap=False, show_progress=False)
        except Exception as e:  # missing, half-deleted or damaged: rebuild instead
            if path.exists():
                log.info("BM25 index at %s unreadable (%s); rebuilding", path, e)
            return None
        if int(bm25.scores.get("num_docs", -1)) != n_docs:
            return None
        return cls(bm25=bm25, idf=_idf(bm25, n_docs), key=key, loaded=True)

    # --- query ---
    def terms(self, text: str) -> list[str]:
        """Stemmed, stop-worded tokens of ``text`` (vocabulary or not)."""
        return list(_tokenize(text))

    def top(self, terms: Sequence[str], k: int,
            mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(chunk positions, BM25 / total IDF of the query's terms), best first,
        only positive scores."""
        ids = sorted({self.bm25.vocab_dict[t] for t in terms if t in self.bm25.vocab_dict})
        if not ids:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        scores = self._scores(ids)
        if mask is not None:
            scores = scores * mask
        k = min(k, len(scores))
        idx = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        idx = idx[scores[idx] > 0]
        idx = idx[np.argsort(-scores[idx], kind="stable")]
        total = float(self.idf[ids].sum()) or 1.0
        return idx, (scores[idx] / total).astype(np.float32)

    def share(self, term: str) -> float:
        """The share of indexed chunks holding a stemmed term (0 if unknown)."""
        i = self.bm25.vocab_dict.get(term)
        if i is None:
            return 0.0
        indptr = self.bm25.scores["indptr"]
        return float(indptr[i + 1] - indptr[i]) / max(1, int(self.bm25.scores["num_docs"]))

    def _scores(self, token_ids: list[int]) -> np.ndarray:
        """Sum of the CSC columns of the query's terms: BM25 of every chunk."""
        s = self.bm25.scores
        data, indices, indptr = s["data"], s["indices"], s["indptr"]
        out = np.zeros(int(s["num_docs"]), dtype=np.float32)
        for t in token_ids:
            a, b = int(indptr[t]), int(indptr[t + 1])
            out[indices[a:b]] += data[a:b]  # a column lists each chunk once
        return out


class _LazyStemmer:
    def __init__(self) -> None:
        self._s = None

    def get(self):
        if self._s is None:
            self._s = _stemmer()
        return self._s


_STEMMER = _LazyStemmer()
# Distinct texts an answer tokenizes (its question, candidate sentences, titles
# and abstracts; about 50 calls an answer, most repeated across the rules).
TOKENIZE_CACHE = 8192


@lru_cache(maxsize=TOKENIZE_CACHE)
def _tokenize(text: str) -> tuple[str, ...]:
    """``LexicalIndex.terms``, cached: tokenizing is a pure function of the text."""
    import bm25s

    return tuple(bm25s.tokenize([text], stopwords="en", stemmer=_STEMMER.get(),
                                return_ids=False, show_progress=False)[0])


def _idf(bm25: Any, n: int) -> np.ndarray:
    # Lucene IDF per vocabulary term, from the CSC matrix's column sizes.
    df = np.diff(np.asarray(bm25.scores["indptr"]))
    return np.log(1 + (n - df + 0.5) / (df + 0.5)).astype(np.float64)


def load_or_build(root: Path, chunk_ids: Sequence[str], texts: Sequence[str],
                  save: bool = True) -> Lexical | None:
    """The persisted index for exactly these chunks, else a fresh one (saved
    when ``save``; a read-only data dir just keeps it in memory)."""
    if not chunk_ids:
        return None
    key = corpus_key(chunk_ids)
    lex = Lexical.load(root, key, len(chunk_ids))
    if lex is not None:
        return lex
    lex = Lexical.build(texts, key)
    if save:
        try:
            lex.save(root)
        except OSError as e:
            log.info("could not save the BM25 index under %s: %s", root, e)
    return lex
