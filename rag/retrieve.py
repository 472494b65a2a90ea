"""Hybrid retrieval: dense chunks + dense paper centroids (Chroma) + BM25
(bm25s), fused on absolute scales and aggregated to paper level so each paper
appears once with its best passages.

paper score = max chunk cosine
            + centroid_weight * cosine to the paper's mean chunk vector
            + bm25_weight * (best chunk BM25 / total IDF of the query's terms)

Plain equal-weight RRF was measured worse than dense alone on paraphrased
questions, and per-query min-max normalisation lets a weak BM25 match count
as much as a strong one; dividing BM25 by the query's total IDF instead gives
"share of the query's information matched", comparable across queries. The
weights were tuned on eval/questions.jsonl with ICML 2025 distractors
(docs/results/0.1.0.md, "Retrieval ablations").
bm25s is used directly (LlamaIndex's BM25Retriever wraps the same library but
cannot restrict results by metadata filters).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field

import numpy as np

from rag.chunking import embed_text
from rag.config import Settings
from rag.embed import CachedEmbedder
from rag.index import VectorIndex
from rag.lexical import Lexical, load_or_build
from rag.text import NAME
from rag.types import Filters, Paper, Passage, SearchHit


@dataclass
class _Snapshot:
    """In-memory view of one catalog generation, for BM25, filtering and
    fusion. Chunks are ordered by (paper_id, idx), so each paper's chunks are
    one contiguous range ``paper_start[r]:paper_end[r]``."""

    version: int
    papers: dict[str, Paper]
    chunk_ids: list[str]
    chunk_paper: list[str]
    chunk_idx: list[int]
    chunk_text: list[str]
    pos: dict[str, int]
    lexical: Lexical | None
    paper_ids: list[str] = field(default_factory=list)  # row -> paper id
    paper_row: dict[str, int] = field(default_factory=dict)
    chunk_prow: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    paper_start: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    paper_end: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    _masks: dict = field(default_factory=dict)

    @property
    def bm25(self):
        return self.lexical.bm25 if self.lexical else None

    def paper_mask(self, f: Filters | None) -> np.ndarray | None:
        """Boolean mask over paper rows (None: no filter), cached per filter."""
        if f is None or f.is_empty():
            return None
        key = (tuple(f.sources or ()), tuple(f.venues or ()), tuple(f.years or ()),
               tuple(f.paper_ids or ()))
        m = self._masks.get(key)
        if m is None:
            m = np.array([HybridRetriever._paper_ok(self.papers[p], f) for p in self.paper_ids],
                         dtype=bool)
            if len(self._masks) > 32:
                self._masks.clear()
            self._masks[key] = m
        return m


class HybridRetriever:
    def __init__(self, settings: Settings, index: VectorIndex, embedder: CachedEmbedder) -> None:
        self.settings = settings
        self.index = index
        self.embedder = embedder
        self._snap: _Snapshot | None = None
        self._lock = threading.Lock()

    # --- snapshot ---
    def snapshot(self) -> _Snapshot:
        """The current catalog view. Take it ONCE per request and pass it down:
        positions from one snapshot are meaningless in another."""
        gen = self.index.catalog.generation()
        with self._lock:
            # New papers from another process: catalog and vectors move together.
            self.index.sync_vectors(gen)
            if self._snap is None or self._snap.version != gen:
                self._snap = self._build()
            return self._snap

    def _build(self) -> _Snapshot:
        version, paper_list, rows = self.index.catalog.read_snapshot()
        papers = {p.paper_id: p for p in paper_list}
        rows = [r for r in rows if r[1] in papers]  # never split by one transaction; a guard
        ids = [r[0] for r in rows]
        chunk_paper = [r[1] for r in rows]
        lexical = None
        if rows:
            lexical = load_or_build(
                self.index.lexical_dir, ids,
                [embed_text(papers[r[1]], r[3]) for r in rows],
            )
        # Paper rows in chunk order, then papers without chunks (none normally).
        paper_ids = list(dict.fromkeys(chunk_paper))
        if len(paper_ids) < len(papers):
            have = set(paper_ids)
            paper_ids += [p for p in papers if p not in have]
        paper_row = {p: i for i, p in enumerate(paper_ids)}
        prow = np.fromiter((paper_row[p] for p in chunk_paper), dtype=np.int64,
                           count=len(chunk_paper))
        start = np.full(len(paper_ids), 0, dtype=np.int64)
        end = np.full(len(paper_ids), 0, dtype=np.int64)
        if len(prow):
            bounds = np.flatnonzero(np.diff(prow)) + 1
            starts = np.concatenate([[0], bounds])
            ends = np.concatenate([bounds, [len(prow)]])
            start[prow[starts]] = starts
            end[prow[starts]] = ends
        return _Snapshot(
            version=version,
            papers=papers,
            chunk_ids=ids,
            chunk_paper=chunk_paper,
            chunk_idx=[r[2] for r in rows],
            chunk_text=[r[3] for r in rows],
            pos={c: i for i, c in enumerate(ids)},
            lexical=lexical,
            paper_ids=paper_ids,
            paper_row=paper_row,
            chunk_prow=prow,
            paper_start=start,
            paper_end=end,
        )

    def unknown_names(self, question: str) -> list[str]:
        """Technical names in the question (NeRF, HumanEval, WikiText-2: an
        inner capital or a digit) that no indexed abstract or title contains.

        Plain capitalised words and short acronyms are left out on purpose:
        paraphrased questions use everyday names (Twitter, CCTV) that the
        abstracts never do."""
        lex = self.snapshot().lexical
        if lex is None:
            return []
        names = {
            m.group(0) for m in NAME.finditer(question)
            if re.search(r"[a-z][A-Z]|\d", m.group(0))
        }
        out = []
        for name in sorted(n for n in names if len(n) > 2):
            toks = lex.terms(name)
            if toks and not any(t in lex.vocab for t in toks):
                out.append(name)
        return out

    # --- filters ---
    @staticmethod
    def _paper_ok(p: Paper, f: Filters | None) -> bool:
        if f is None or f.is_empty():
            return True
        if f.sources and p.source not in f.sources:
            return False
        if f.venues and (p.venue or "") not in f.venues:
            return False
        if f.years and p.year not in f.years:
            return False
        return not (f.paper_ids and p.paper_id not in f.paper_ids)

    # Public: whether a paper passes the metadata filters (Engine.papers lists by it).
    paper_ok = _paper_ok

    @staticmethod
    def _where(f: Filters | None) -> dict | None:
        if f is None or f.is_empty():
            return None
        conds: list[dict] = []
        if f.sources:
            conds.append({"source": {"$in": list(f.sources)}})
        if f.venues:
            conds.append({"venue": {"$in": list(f.venues)}})
        if f.years:
            conds.append({"year": {"$in": [int(y) for y in f.years]}})
        if f.paper_ids:
            conds.append({"paper_id": {"$in": list(f.paper_ids)}})
        return conds[0] if len(conds) == 1 else {"$and": conds}

    # --- retrieval ---
    def dense(
        self, query: str, n: int, filters: Filters | None, snap: _Snapshot
    ) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
        """(chunk positions in ``snap``, their cosines, paper-centroid cosines by paper id)."""
        vec = self.embedder.embed_query(query)
        where = self._where(filters)
        pos, sims = [], []
        for cid, sim in self.index.query(vec, n, where):
            i = snap.pos.get(cid)
            if i is not None:  # unknown ids are leftovers of an interrupted ingest
                pos.append(i)
                sims.append(sim)
        papers = {
            pid: sim
            for pid, sim in self.index.query(vec, n, where, papers=True)
            if pid in snap.papers
        }
        return np.asarray(pos, dtype=np.int64), np.asarray(sims, dtype=np.float64), papers

    def lexical(
        self, query: str, n: int, filters: Filters | None, snap: _Snapshot
    ) -> tuple[np.ndarray, np.ndarray]:
        """(chunk positions in ``snap``, BM25 as a share of the query's total IDF)."""
        lex = snap.lexical
        if lex is None:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        pmask = snap.paper_mask(filters)
        mask = None if pmask is None else pmask[snap.chunk_prow].astype(np.float32)
        idx, scores = lex.top(lex.terms(query), n, mask)
        return idx.astype(np.int64), scores.astype(np.float64)

    def search(
        self,
        query: str,
        k: int | None = None,
        filters: Filters | None = None,
        mode: str | None = None,
    ) -> list[SearchHit]:
        s = self.settings
        k = k or s.retrieval.top_k
        mode = mode or s.retrieval.retriever
        snap = self.snapshot()  # one snapshot for the whole request
        if not snap.chunk_ids:
            return []
        n = max(s.retrieval.candidate_k * 3, k * 4)
        use_dense = mode in ("hybrid", "dense")
        use_lex = mode in ("hybrid", "bm25")
        empty = np.zeros(0, dtype=np.int64)
        d_pos, d_sim, cent = self.dense(query, n, filters, snap) if use_dense else (
            empty, np.zeros(0), {})
        l_pos, l_sc = self.lexical(query, n, filters, snap) if use_lex else (empty, np.zeros(0))
        w_lex = s.retrieval.bm25_weight if mode == "hybrid" else 1.0

        # A paper outside a retriever's candidate list gets that list's lowest
        # score: an upper bound on what it would have scored.
        chunk_floor = float(d_sim.min()) if len(d_sim) else 0.0
        cent_floor = min(cent.values(), default=0.0)

        # Candidate chunks: every chunk either retriever found, plus all chunks
        # of papers found by their centroid only (a contiguous range each).
        cand = np.union1d(d_pos, l_pos)
        found_rows = np.unique(snap.chunk_prow[cand])
        cent_rows = np.fromiter(
            (snap.paper_row[p] for p in cent if p in snap.paper_row), dtype=np.int64)
        extra = np.setdiff1d(cent_rows, found_rows, assume_unique=True)
        if len(extra):
            ranges = [np.arange(snap.paper_start[r], snap.paper_end[r]) for r in extra]
            cand = np.union1d(cand, np.concatenate(ranges))
        if not len(cand):
            return []
        dense_c = np.full(len(cand), chunk_floor)
        dense_c[np.searchsorted(cand, d_pos)] = d_sim
        lex_c = np.zeros(len(cand))
        lex_c[np.searchsorted(cand, l_pos)] = l_sc
        chunk_sc = (dense_c if use_dense else 0.0) + w_lex * lex_c
        rows = snap.chunk_prow[cand]
        pmask = snap.paper_mask(filters)
        if pmask is not None:
            keep = pmask[rows]
            cand, dense_c, lex_c, chunk_sc, rows = (
                cand[keep], dense_c[keep], lex_c[keep], chunk_sc[keep], rows[keep])
            if not len(cand):
                return []

        # Group by paper (rows ascending), best chunk first within a paper.
        order = np.lexsort((-chunk_sc, rows))
        cand, dense_c, lex_c, chunk_sc, rows = (
            cand[order], dense_c[order], lex_c[order], chunk_sc[order], rows[order])
        first = np.concatenate([[0], np.flatnonzero(np.diff(rows)) + 1])
        last = np.concatenate([first[1:], [len(rows)]])
        prows = rows[first]
        best_dense = np.maximum.reduceat(dense_c, first)
        best_lex = np.maximum.reduceat(lex_c, first)
        score = w_lex * best_lex
        if use_dense:
            cent_arr = np.array([cent.get(snap.paper_ids[r], cent_floor) for r in prows])
            score = score + best_dense + s.retrieval.centroid_weight * cent_arr
        score_r = np.round(score, 4)
        top = np.lexsort((prows, -score_r))[:k]

        hits: list[SearchHit] = []
        for rank, g in enumerate(top, 1):
            pid = snap.paper_ids[prows[g]]
            sl = slice(first[g], min(last[g], first[g] + s.retrieval.passages_per_paper))
            passages = [
                Passage(
                    chunk_id=snap.chunk_ids[i],
                    paper_id=pid,
                    text=snap.chunk_text[i],
                    index=snap.chunk_idx[i],
                    score=round(float(c), 4),
                )
                for i, c in zip(cand[sl], chunk_sc[sl], strict=True)
            ]
            hits.append(
                SearchHit(
                    paper=snap.papers[pid],
                    score=float(score_r[g]),
                    rank=rank,
                    passages=passages,
                    dense_score=round(float(best_dense[g]), 4) if use_dense else None,
                    bm25_score=round(float(best_lex[g]), 4) if use_lex else None,
                )
            )
        return hits
