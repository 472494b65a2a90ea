"""The ``baseline`` section of ``aqa bench`` (re-exported by ``eval.bench``): the
plain LlamaIndex pipeline on the same corpus and questions as ours, compared on
hit@5, MRR, source precision@2, citation precision and speed.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from eval import metrics as M
from eval.bench_common import REPO_ROOT, BenchContext, _r, latency_stats, say

# --- baseline ------------------------------------------------------------------


def _gold_questions(ctx: BenchContext):
    from eval.dataset import DEFAULT_SET, load_questions

    path = Path(ctx.set_path or DEFAULT_SET)
    if not path.is_file():
        return []
    qs = [q for q in load_questions(path) if q.gold and q.answerable]
    n = ctx.cfg["baseline_questions"]
    return qs[:n] if n else qs


def baseline_corpus(ctx: BenchContext) -> tuple[list[Path], dict[str, dict]]:
    """(corpus paths, the --run's results by question id). The run's corpus is
    the bundled one plus its ``extra_corpus`` (summary.json)."""
    from rag.config import BUNDLED_CORPUS

    corpus: list[Path] = [BUNDLED_CORPUS]
    rows: dict[str, dict] = {}
    if ctx.run_dir:
        run = Path(ctx.run_dir)
        summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
        for e in (summary.get("run") or {}).get("extra_corpus") or []:
            p = Path(e)
            corpus.append(p if p.is_absolute() else REPO_ROOT / p)
        results = run / "results.jsonl"
        if results.is_file():
            for line in results.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    r = json.loads(line)
                    rows[r["id"]] = r
    return corpus, rows


def _ranked_metrics(ranked_provs: list[list[tuple[str, int]]], gold) -> dict[str, float]:
    rel = M.relevance_vector(ranked_provs, gold)
    top2 = ranked_provs[:2]
    return {
        "hit@5": M.hit_at_k(rel, 5),
        "mrr": M.reciprocal_rank(rel),
        "source_precision@2": (sum(M.gold_index(p, gold) is not None for p in top2) / len(top2))
        if top2 else 0.0,
    }


def bench_baseline(ctx: BenchContext) -> dict[str, Any]:
    import chromadb
    from chromadb.config import Settings as ChromaSettings
    from llama_index.core import Document, StorageContext, VectorStoreIndex
    from llama_index.vector_stores.chroma import ChromaVectorStore

    from rag.config import BUNDLED_CORPUS

    qs = _gold_questions(ctx)
    if not qs:
        say("\n## Baseline: skipped (no question set with gold papers)")
        return {"skipped": "no question set"}
    # Both pipelines index the SAME corpus: the one the --run eval used when
    # given (bundled + its extra corpus), else the bundled corpus.
    corpus, run_rows = baseline_corpus(ctx)
    say(f"\n## Baseline: plain LlamaIndex VectorStoreIndex over Chroma ({len(qs)} questions, "
        f"same corpus: {', '.join(Path(c).name for c in corpus)})")
    model, _ = ctx.model(ctx.provider)
    # Ours: build time = a cold ingest of the same corpus with the same model
    # (taken from the ingest section when it ingested exactly this corpus).
    ing = ctx.results.get("ingest", {})
    ours_build = None
    if ing.get("corpus") == [str(c) for c in corpus]:
        ours_build = ing["providers"].get(ctx.provider, {}).get("cold_s")
    if ours_build is None:
        cold_dir = ctx.root / f"baseline-ours-{ctx.provider}"
        shutil.rmtree(cold_dir, ignore_errors=True)
        t0 = time.perf_counter()
        ctx.engine(cold_dir, seed_cache=False).ingest(corpus, progress=False)
        ours_build = time.perf_counter() - t0
        shutil.rmtree(cold_dir, ignore_errors=True)
    tag = "57" if corpus == [BUNDLED_CORPUS] else f"run-{len(corpus)}"
    eng = ctx.engine(ctx.root / f"idx-{tag}-{ctx.provider}")
    eng.ingest(corpus, prune=True, progress=False)
    papers = list(eng.retriever.snapshot().papers.values())

    base_dir = ctx.root / f"baseline-llamaindex-{ctx.provider}"
    shutil.rmtree(base_dir, ignore_errors=True)
    t0 = time.perf_counter()
    client = chromadb.PersistentClient(path=str(base_dir),
                                       settings=ChromaSettings(anonymized_telemetry=False))
    store = ChromaVectorStore(chroma_collection=client.get_or_create_collection("baseline"))
    docs = [
        Document(text=p.abstract, metadata={"paper_id": p.paper_id},
                 excluded_embed_metadata_keys=["paper_id"], excluded_llm_metadata_keys=["paper_id"])
        for p in papers
    ]
    index = VectorStoreIndex.from_documents(
        docs, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=model
    )
    base_build = time.perf_counter() - t0
    retriever = index.as_retriever(similarity_top_k=5)
    by_id = {p.paper_id: p for p in papers}

    def provs(pids: list[str]) -> list[list[tuple[str, int]]]:
        return [M.provs_of(by_id[pid].to_dict()) for pid in pids if pid in by_id]

    rows = []
    ours_ms, base_ms = [], []
    eng.search(qs[0].question)  # warm-up (BM25 snapshot) for a fair latency
    retriever.retrieve(qs[0].question)
    for q in qs:
        t0 = time.perf_counter()
        hits = eng.search(q.question, k=5)
        ours_ms.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        nodes = retriever.retrieve(q.question)
        base_ms.append((time.perf_counter() - t0) * 1000)
        base_ids = list(dict.fromkeys(n.node.metadata.get("paper_id") for n in nodes))
        row = {
            "id": q.id,
            "ours": _ranked_metrics(provs([h.paper.paper_id for h in hits]), q.gold),
            "baseline": _ranked_metrics(provs(base_ids), q.gold),
        }
        # Same number of cited sources: as many as ours cited for this question
        # in the --run eval (its answered questions), never a fixed 2.
        cited = (run_rows.get(q.id) or {}).get("cited") or []
        if cited:
            top = provs(base_ids)[: len(cited)]
            row["n_cited"] = len(cited)
            row["baseline"]["citation_precision_same_n"] = (
                sum(M.gold_index(p, q.gold) is not None for p in top) / len(top) if top else 0.0)
        rows.append(row)
    out: dict[str, Any] = {"questions": len(rows), "provider": ctx.provider}
    for side in ("ours", "baseline"):
        out[side] = {m: _r(M.mean(r[side][m] for r in rows), 3)
                     for m in ("hit@5", "mrr", "source_precision@2")}
    out["ours"]["search_ms"] = latency_stats(ours_ms)
    out["baseline"]["search_ms"] = latency_stats(base_ms)
    out["ours"]["build_s"] = round(ours_build, 2)
    out["baseline"]["build_s"] = round(base_build, 2)
    o, b = out["ours"], out["baseline"]
    out["ratios"] = {
        "hit@5": _r(o["hit@5"] / b["hit@5"], 3) if b["hit@5"] else None,
        "mrr": _r(o["mrr"] / b["mrr"], 3) if b["mrr"] else None,
        "search_p50_ours_over_baseline": _r(o["search_ms"]["p50"] / b["search_ms"]["p50"], 3)
        if b["search_ms"]["p50"] else None,
        "build_ours_over_baseline": _r(o["build_s"] / b["build_s"], 3) if b["build_s"] else None,
    }
    # Citation precision: ours from an eval run with answers, when given; the
    # baseline has no inline citations, so its sources (default top-2) stand in.
    # Like for like: both counted as the share of cited/source papers that are
    # gold (ours also reports the engine-accepted "gold or supported" variant).
    if ctx.run_dir:
        summary = json.loads((Path(ctx.run_dir) / "summary.json").read_text())
        ov = summary["overall"]
        out["ours"]["citation_precision"] = _r(
            ov.get("citation_gold_precision", {}).get("mean"), 3)
        out["ours"]["citation_precision_gold_or_supported"] = _r(
            ov.get("citation_precision", {}).get("mean"), 3)
        out["ours"]["citation_precision_from"] = str(ctx.run_dir)
    same_n = [r["baseline"]["citation_precision_same_n"] for r in rows
              if "citation_precision_same_n" in r["baseline"]]
    if same_n:  # scored on as many sources as ours cited, question by question
        out["baseline"]["citation_precision"] = _r(M.mean(same_n), 3)
        out["baseline"]["citation_precision_basis"] = (
            f"top-n sources, n = papers ours cited, {len(same_n)} questions")
        out["ours"]["mean_cited"] = _r(M.mean(r["n_cited"] for r in rows if "n_cited" in r), 2)
    else:
        out["baseline"]["citation_precision"] = b["source_precision@2"]
        out["baseline"]["citation_precision_basis"] = "top-2 sources (no --run with citations)"
    out["corpus"] = [str(c) for c in corpus]
    out["papers"] = len(papers)
    out["per_question"] = rows
    say("| | hit@5 | MRR | source precision@2 | search p50 ms | build s |")
    say("|---|---|---|---|---|---|")
    for side in ("ours", "baseline"):
        s = out[side]
        say(f"| {side} | {s['hit@5']} | {s['mrr']} | {s['source_precision@2']} | "
            f"{s['search_ms']['p50']} | {s['build_s']} |")
    say(f"ratios (ours / baseline): {out['ratios']}")
    return out
