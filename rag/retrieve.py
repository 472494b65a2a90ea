"""Hybrid retrieval: dense (Chroma) + BM25 (bm25s), fused with a tunable
weight and aggregated to paper level so each paper appears once with its best
passages.

Plain equal-weight RRF was measured worse than dense alone on paraphrased
questions, so fusion here is a weighted combination of per-query normalised
scores (``dense_weight``), tuned on eval/questions.jsonl (see README).
bm25s is used directly (LlamaIndex's BM25Retriever wraps the same library but
cannot restrict results by metadata filters).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from rag.config import Settings
from rag.embed import CachedEmbedder
from rag.index import VectorIndex
from rag.types import Filters, Paper, Passage, SearchHit


@dataclass
class _Snapshot:
    """In-memory view of the catalog for BM25 and filtering."""

    version: str
    papers: dict[str, Paper]
    chunk_ids: list[str]
    chunk_paper: list[str]
    chunk_idx: list[int]
    chunk_text: list[str]
    pos: dict[str, int]
    bm25: object | None


class HybridRetriever:
    def __init__(self, settings: Settings, index: VectorIndex, embedder: CachedEmbedder) -> None:
        self.settings = settings
        self.index = index
        self.embedder = embedder
        self._snap: _Snapshot | None = None
        self._lock = threading.Lock()

    # --- snapshot ---
    def snapshot(self) -> _Snapshot:
        cat = self.index.catalog
        version = f"{cat.get_meta('last_ingest')}|{cat.counts()}"
        with self._lock:
            if self._snap is None or self._snap.version != version:
                self._snap = self._build(version)
            return self._snap

    def _build(self, version: str) -> _Snapshot:
        cat = self.index.catalog
        papers = {p.paper_id: p for p in cat.papers()}
        rows = cat.chunks()
        ids = [r[0] for r in rows]
        texts = [r[3] for r in rows]
        bm25 = None
        if rows:
            import bm25s
            import Stemmer

            from rag.index import embed_text

            self._stemmer = Stemmer.Stemmer("english")
            corpus = [embed_text(papers[r[1]], r[3]) if r[1] in papers else r[3] for r in rows]
            tokens = bm25s.tokenize(
                corpus, stopwords="en", stemmer=self._stemmer, show_progress=False
            )
            bm25 = bm25s.BM25()
            bm25.index(tokens, show_progress=False)
        return _Snapshot(
            version=version,
            papers=papers,
            chunk_ids=ids,
            chunk_paper=[r[1] for r in rows],
            chunk_idx=[r[2] for r in rows],
            chunk_text=texts,
            pos={c: i for i, c in enumerate(ids)},
            bm25=bm25,
        )

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
    def dense(self, query: str, n: int, filters: Filters | None) -> dict[int, float]:
        snap = self.snapshot()
        vec = self.embedder.embed_query(query)
        out: dict[int, float] = {}
        for cid, sim in self.index.query(vec, n, self._where(filters)):
            i = snap.pos.get(cid)
            if i is not None:  # unknown ids are leftovers of an interrupted ingest
                out[i] = sim
        return out

    def lexical(self, query: str, n: int, filters: Filters | None) -> dict[int, float]:
        import bm25s

        snap = self.snapshot()
        if snap.bm25 is None:
            return {}
        q = bm25s.tokenize(
            [query], stopwords="en", stemmer=self._stemmer, return_ids=False, show_progress=False
        )
        vocab = snap.bm25.vocab_dict
        terms = [t for t in q[0] if t in vocab]
        if not terms:
            return {}
        mask = None
        if filters and not filters.is_empty():
            mask = np.array(
                [self._paper_ok(snap.papers[p], filters) if p in snap.papers else False
                 for p in snap.chunk_paper],
                dtype=np.float32,
            )
        k = min(n, len(snap.chunk_ids))
        docs, scores = snap.bm25.retrieve([terms], k=k, weight_mask=mask, show_progress=False)
        return {int(d): float(s) for d, s in zip(docs[0], scores[0], strict=True) if s > 0}

    def search(
        self,
        query: str,
        k: int | None = None,
        filters: Filters | None = None,
        mode: str | None = None,
    ) -> list[SearchHit]:
        s = self.settings
        k = k or s.top_k
        mode = mode or s.retriever
        snap = self.snapshot()
        if not snap.chunk_ids:
            return []
        n = max(s.candidate_k * 3, k * 4)
        dense = self.dense(query, n, filters) if mode in ("hybrid", "dense") else {}
        lex = self.lexical(query, n, filters) if mode in ("hybrid", "bm25") else {}
        w = {"hybrid": s.dense_weight, "dense": 1.0, "bm25": 0.0}[mode]

        # Per-query normalisation: cosine is already comparable across queries
        # but its useful range is narrow; BM25 is unbounded. Min-max over the
        # candidate pool puts both on [0, 1] before weighting.
        dn = _minmax(dense)
        ln = _minmax(lex)
        chunk_score: dict[int, float] = {}
        for i in set(dense) | set(lex):
            chunk_score[i] = w * dn.get(i, 0.0) + (1 - w) * ln.get(i, 0.0)

        by_paper: dict[str, list[int]] = defaultdict(list)
        for i in sorted(chunk_score, key=chunk_score.get, reverse=True):
            by_paper[snap.chunk_paper[i]].append(i)
        hits: list[SearchHit] = []
        for pid, idxs in by_paper.items():
            paper = snap.papers.get(pid)
            if paper is None or not self._paper_ok(paper, filters):
                continue
            best = chunk_score[idxs[0]]
            # A second matching passage is weak extra evidence for the paper.
            bonus = 0.1 * chunk_score[idxs[1]] if len(idxs) > 1 else 0.0
            passages = [
                Passage(
                    chunk_id=snap.chunk_ids[i],
                    paper_id=pid,
                    text=snap.chunk_text[i],
                    index=snap.chunk_idx[i],
                    score=round(chunk_score[i], 4),
                )
                for i in idxs[: s.passages_per_paper]
            ]
            hits.append(
                SearchHit(
                    paper=paper,
                    score=round(best + bonus, 4),
                    rank=0,
                    passages=passages,
                    dense_score=round(max((dense[i] for i in idxs if i in dense), default=0.0), 4)
                    if dense else None,
                    bm25_score=round(max((lex[i] for i in idxs if i in lex), default=0.0), 4)
                    if lex else None,
                )
            )
        hits.sort(key=lambda h: h.score, reverse=True)
        for r, h in enumerate(hits[:k], 1):
            h.rank = r
        return hits[:k]


def _minmax(scores: dict[int, float]) -> dict[int, float]:
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    if hi - lo < 1e-9:
        return {i: 1.0 for i in scores}
    return {i: (v - lo) / (hi - lo) for i, v in scores.items()}
