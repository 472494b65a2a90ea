"""The ``search`` section of ``aqa bench`` (re-exported by ``eval.bench``):
search latency at 57 papers, ~3,300 papers and 100,000 chunks (the big level
built by direct insertion, ``build_big_index``), with index size and peak RSS.
"""

from __future__ import annotations

import random
import shutil
import time
from typing import Any

from eval import metrics as M
from eval.bench_common import (
    _SENT,
    CHUNKS_PER_SYNTH_PAPER,
    BenchContext,
    _r,
    dir_mb,
    peak_rss_mb,
    say,
    time_queries,
)

# --- search --------------------------------------------------------------------


def build_big_index(ctx: BenchContext, n_chunks: int, seed: int = 2) -> tuple[Any, float]:
    """An engine whose index holds ``n_chunks`` chunks: the bundled corpus,
    ingested normally, plus synthetic papers inserted directly (see module
    docstring). Cached by a stamp file. Returns (engine, build seconds)."""
    import numpy as np

    from rag.config import BUNDLED_CORPUS
    from rag.types import Paper, Provenance

    data_dir = ctx.root / f"idx-big2-{n_chunks}-{ctx.provider}"  # 2: with paper centroids
    stamp = data_dir / ".bench-complete"
    if stamp.is_file():
        return ctx.engine(data_dir), float(stamp.read_text() or 0)
    shutil.rmtree(data_dir, ignore_errors=True)
    t0 = time.perf_counter()
    eng = ctx.engine(data_dir)
    eng.ingest([BUNDLED_CORPUS], progress=False)
    cat, col, pcol = eng.index.catalog, eng.index.collection, eng.index.paper_collection
    base = col.get(include=["embeddings"], limit=100_000)
    base_vecs = np.asarray(base["embeddings"], dtype=np.float32)
    base_texts = [t for _, _, _, t in cat.chunks()]
    sents = [s for t in base_texts for s in _SENT.split(t) if len(s) > 20]
    rng = np.random.default_rng(seed)
    prng = random.Random(seed)
    have = cat.counts()[1]
    n_papers = max(0, (n_chunks - have) // CHUNKS_PER_SYNTH_PAPER)
    batch_papers = 1_000  # 4,000 vectors a batch: under Chroma's max batch size
    for start in range(0, n_papers, batch_papers):
        stop = min(n_papers, start + batch_papers)
        m = (stop - start) * CHUNKS_PER_SYNTH_PAPER
        a = base_vecs[rng.integers(0, len(base_vecs), m)]
        b = base_vecs[rng.integers(0, len(base_vecs), m)]
        vecs = 0.6 * a + 0.4 * b + rng.normal(0, 0.02, a.shape).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        rows, ids, metas, docs = [], [], [], []
        for i in range(start, stop):
            chunks = [" ".join(prng.sample(sents, 3)) for _ in range(CHUNKS_PER_SYNTH_PAPER)]
            pid = f"synth-{i:06d}"
            paper = Paper(paper_id=pid, abstract=" ".join(chunks), title=f"Synthetic paper {i}",
                          source="synthetic",
                          provenance=[Provenance("synthetic/big.txt", i + 1, i + 2)])
            crow = [(f"{pid}::{j}", j, c) for j, c in enumerate(chunks)]
            rows.append((paper, f"h{i}", crow))
            ids += [c[0] for c in crow]
            metas += [{"paper_id": pid, "source": "synthetic", "idx": j} for j in range(len(crow))]
            docs += chunks
        col.upsert(ids=ids, embeddings=vecs.tolist(), metadatas=metas, documents=docs)
        cent = vecs.reshape(-1, CHUNKS_PER_SYNTH_PAPER, vecs.shape[1]).mean(axis=1)
        cent /= np.linalg.norm(cent, axis=1, keepdims=True)
        pcol.upsert(ids=[r[0].paper_id for r in rows], embeddings=cent.tolist(),
                    metadatas=[{"paper_id": r[0].paper_id, "source": "synthetic", "idx": 0}
                               for r in rows])
        cat.commit_papers(rows)
    eng.index.persist_lexical()  # as ingest does: no query pays for BM25
    build_s = time.perf_counter() - t0
    stamp.write_text(f"{build_s:.2f}")
    return eng, build_s


def bench_search(ctx: BenchContext) -> dict[str, Any]:
    from rag.config import BUNDLED_CORPUS

    queries = ctx.queries()
    reps = ctx.cfg["reps"]
    say(f"\n## Search latency ({len(queries)} queries x {reps}, k=top_k, "
        f"embeddings {ctx.provider})")
    levels: list[dict[str, Any]] = []
    mid_paths, n_mid = ctx.mid_corpus()
    for label, paths, n in (("bundled", [BUNDLED_CORPUS], 57), ("mid", mid_paths, n_mid)):
        eng = ctx.engine(ctx.root / f"idx-{n}-{ctx.provider}")
        t0 = time.perf_counter()
        eng.ingest(paths, prune=True, progress=ctx.size == "full")
        ingest_s = time.perf_counter() - t0
        st = eng.status()
        lat = time_queries(eng, queries, reps)
        levels.append({"level": label, "papers": st.papers, "chunks": st.chunks,
                       "index_mb": dir_mb(eng.settings.storage.data_dir),
                       "ingest_s": round(ingest_s, 2),
                       **lat, "peak_rss_mb": peak_rss_mb()})
        del eng
    eng, build_s = build_big_index(ctx, ctx.cfg["big_chunks"])
    st = eng.status()
    lat = time_queries(eng, queries, reps)
    levels.append({"level": "big", "papers": st.papers, "chunks": st.chunks,
                   "index_mb": dir_mb(eng.settings.storage.data_dir), "build_s": round(build_s, 2),
                   "build": "bundled ingest + direct insertion of synthetic chunks",
                   **lat, "peak_rss_mb": peak_rss_mb()})
    # The raw encoder's time for one query (the floor under any search), this run.
    model, _ = ctx.model(ctx.provider)
    enc_ms = []
    for q in queries:
        t0 = time.perf_counter()
        model.get_query_embedding(q)
        enc_ms.append((time.perf_counter() - t0) * 1000)
    enc_p50 = M.percentile(enc_ms, 50)
    base = levels[0]
    for lv in levels:
        lv["query_embed_p50_ms"] = _r(enc_p50)
        lv["p50_over_query_embed"] = _r(lv["p50"] / enc_p50) if enc_p50 else None
        lv["p50_growth"] = _r(lv["p50"] / base["p50"]) if base["p50"] else None
        lv["size_growth"] = _r(lv["index_mb"] / base["index_mb"]) if base["index_mb"] else None
    say("| level | papers | chunks | index MB | first query ms | p50 ms | p95 ms | "
        "p50 / raw query encode | p50 growth | peak RSS MB |")
    say("|---|---|---|---|---|---|---|---|---|---|")
    for lv in levels:
        say(f"| {lv['level']} | {lv['papers']} | {lv['chunks']} | {lv['index_mb']} | "
            f"{lv['first_query_ms']} | {lv['p50']} | {lv['p95']} | "
            f"{lv['p50_over_query_embed']}x of {lv['query_embed_p50_ms']} ms | "
            f"{lv['p50_growth']}x | {lv['peak_rss_mb']} |")
    return {"queries": len(queries), "reps": reps, "provider": ctx.provider, "levels": levels}
