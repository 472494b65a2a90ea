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
weights were tuned on eval/questions.jsonl with ICML 2025 distractors (README).
bm25s is used directly (LlamaIndex's BM25Retriever wraps the same library but
cannot restrict results by metadata filters).
"""

from __future__ import annotations

import logging
import re
import threading
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from rag.attribution import _NAME
from rag.config import Settings
from rag.embed import CachedEmbedder
from rag.index import VectorIndex
from rag.types import Filters, Paper, Passage, SearchHit

logging.getLogger("bm25s").setLevel(logging.WARNING)  # its DEBUG lines flood CLI output


@dataclass
class _Snapshot:
    """In-memory view of the catalog for BM25 and filtering."""

    version: int
    papers: dict[str, Paper]
    chunk_ids: list[str]
    chunk_paper: list[str]
    chunk_idx: list[int]
    chunk_text: list[str]
    pos: dict[str, int]
    bm25: object | None
    idf: dict[str, float]


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
            if self._snap is None or self._snap.version != gen:
                self._snap = self._build()
            return self._snap

    def _build(self) -> _Snapshot:
        version, paper_list, rows = self.index.catalog.read_snapshot()
        papers = {p.paper_id: p for p in paper_list}
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
            # Lucene IDF per vocabulary term, from the CSC matrix's column sizes.
            df = np.diff(np.asarray(bm25.scores["indptr"]))
            n = len(rows)
            idf_arr = np.log(1 + (n - df + 0.5) / (df + 0.5))
            idf = {t: float(idf_arr[i]) for t, i in bm25.vocab_dict.items() if i < len(idf_arr)}
        else:
            idf = {}
        return _Snapshot(
            version=version,
            papers=papers,
            chunk_ids=ids,
            chunk_paper=[r[1] for r in rows],
            chunk_idx=[r[2] for r in rows],
            chunk_text=texts,
            pos={c: i for i, c in enumerate(ids)},
            bm25=bm25,
            idf=idf,
        )

    def unknown_names(self, question: str) -> list[str]:
        """Technical names in the question (NeRF, HumanEval, WikiText-2: an
        inner capital or a digit) that no indexed abstract or title contains.

        Plain capitalised words and short acronyms are left out on purpose:
        paraphrased questions use everyday names (Twitter, CCTV) that the
        abstracts never do."""
        import bm25s

        snap = self.snapshot()
        if snap.bm25 is None:
            return []
        names = {
            m.group(0) for m in _NAME.finditer(question)
            if re.search(r"[a-z][A-Z]|\d", m.group(0))
        }
        out = []
        for name in sorted(n for n in names if len(n) > 2):
            toks = bm25s.tokenize(
                [name], stopwords="en", stemmer=self._stemmer, return_ids=False, show_progress=False
            )[0]
            if toks and not any(t in snap.bm25.vocab_dict for t in toks):
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
    ) -> tuple[dict[int, float], dict[str, float]]:
        """Chunk cosines by chunk position in ``snap`` (the request's one
        snapshot), and paper-centroid cosines by paper id."""
        vec = self.embedder.embed_query(query)
        where = self._where(filters)
        chunks: dict[int, float] = {}
        for cid, sim in self.index.query(vec, n, where):
            i = snap.pos.get(cid)
            if i is not None:  # unknown ids are leftovers of an interrupted ingest
                chunks[i] = sim
        papers = {
            pid: sim
            for pid, sim in self.index.query(vec, n, where, papers=True)
            if pid in snap.papers
        }
        return chunks, papers

    def lexical(
        self, query: str, n: int, filters: Filters | None, snap: _Snapshot
    ) -> dict[int, float]:
        """BM25 share of the query's IDF, by chunk position in ``snap``."""
        import bm25s

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
        total_idf = sum(snap.idf.get(t, 0.0) for t in set(terms)) or 1.0
        return {
            int(d): float(s) / total_idf for d, s in zip(docs[0], scores[0], strict=True) if s > 0
        }

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
        snap = self.snapshot()  # one snapshot for the whole request
        if not snap.chunk_ids:
            return []
        n = max(s.candidate_k * 3, k * 4)
        use_dense = mode in ("hybrid", "dense")
        use_lex = mode in ("hybrid", "bm25")
        dense, cent = self.dense(query, n, filters, snap) if use_dense else ({}, {})
        lex = self.lexical(query, n, filters, snap) if use_lex else {}
        w_lex = s.bm25_weight if mode == "hybrid" else 1.0

        # A paper outside a retriever's candidate list gets that list's lowest
        # score: an upper bound on what it would have scored.
        chunk_floor = min(dense.values(), default=0.0)
        cent_floor = min(cent.values(), default=0.0)

        def chunk_score(i: int) -> float:
            return (dense.get(i, chunk_floor) if use_dense else 0.0) + w_lex * lex.get(i, 0.0)

        by_paper: dict[str, list[int]] = defaultdict(list)
        for i in set(dense) | set(lex):
            by_paper[snap.chunk_paper[i]].append(i)
        for pid in cent:
            by_paper.setdefault(pid, [])
        hits: list[SearchHit] = []
        for pid, idxs in by_paper.items():
            paper = snap.papers.get(pid)
            if paper is None or not self._paper_ok(paper, filters):
                continue
            if not idxs:  # found by its centroid only: score its chunks too
                idxs = [i for i, p in enumerate(snap.chunk_paper) if p == pid]
            idxs.sort(key=chunk_score, reverse=True)
            best_dense = max((dense.get(i, chunk_floor) for i in idxs), default=chunk_floor)
            best_lex = max((lex.get(i, 0.0) for i in idxs), default=0.0)
            score = w_lex * best_lex
            if use_dense:
                score += best_dense + s.centroid_weight * cent.get(pid, cent_floor)
            passages = [
                Passage(
                    chunk_id=snap.chunk_ids[i],
                    paper_id=pid,
                    text=snap.chunk_text[i],
                    index=snap.chunk_idx[i],
                    score=round(chunk_score(i), 4),
                )
                for i in idxs[: s.passages_per_paper]
            ]
            hits.append(
                SearchHit(
                    paper=paper,
                    score=round(score, 4),
                    rank=0,
                    passages=passages,
                    dense_score=round(best_dense, 4) if use_dense else None,
                    bm25_score=round(best_lex, 4) if use_lex else None,
                )
            )
        hits.sort(key=lambda h: h.score, reverse=True)
        for r, h in enumerate(hits[:k], 1):
            h.rank = r
        return hits[:k]

