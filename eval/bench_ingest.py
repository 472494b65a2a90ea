"""The ``ingest`` section of ``aqa bench`` (re-exported by ``eval.bench``): cold
ingest per embedding variant beside each raw model's own encode, and re-ingest
of the unchanged corpus in a fresh process.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eval.bench_common import (
    REPO_ROOT,
    VARIANTS,
    BenchContext,
    bundled_abstracts,
    dir_mb,
    peak_rss_mb,
    raw_encode,
    say,
)

# --- ingest --------------------------------------------------------------------


_FRESH_REINGEST = """
import json, sys, time
t0 = time.perf_counter()
from rag.config import Settings
from rag.engine import Engine
t_import = time.perf_counter() - t0
s = Settings(**json.loads(sys.argv[1]))
eng = Engine(s)
t1 = time.perf_counter()
rep = eng.ingest(json.loads(sys.argv[2]), prune=True, progress=False)
print(json.dumps({"ingest_s": time.perf_counter() - t1, "import_s": t_import,
                  "unchanged": rep.papers_unchanged, "embedded": rep.chunks_embedded}))
"""


def fresh_reingest(settings: Any, corpus: Sequence[Path]) -> dict[str, Any]:
    """Re-ingest of an unchanged corpus in a NEW process (cold caches, nothing
    warm from the cold ingest): the ingest call's own time, the process's wall
    time, and what it found."""
    import subprocess

    over = {k: (str(v) if isinstance(v, Path) else v)
            for k, v in settings.flat().items()
            if k in ("data_dir", "embed_provider", "embed_backend", "embed_precision",
                     "embed_workers", "collection", "chroma_host", "chroma_port",
                     "model_cache_dir", "llm_threads", "embed_batch_size")}
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _FRESH_REINGEST, json.dumps(over),
         json.dumps([str(p) for p in corpus])],
        capture_output=True, text=True, cwd=str(REPO_ROOT), timeout=1800,
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1][:300] if proc.stderr else "failed"}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"reingest_s": round(out["ingest_s"], 3), "reingest_process_s": round(wall, 2),
            "reingest_import_s": round(out["import_s"], 2),
            "reingest_unchanged": out["unchanged"], "reingest_chunks_embedded": out["embedded"]}


def bench_ingest(ctx: BenchContext) -> dict[str, Any]:
    from rag.chunking import embed_text
    from rag.config import BUNDLED_CORPUS

    if ctx.size != "tiny":
        corpus, n_nominal = ctx.mid_corpus()
    else:
        corpus, n_nominal = [BUNDLED_CORPUS], len(bundled_abstracts())
    say(f"\n## Ingest ({n_nominal} papers nominal; re-ingest in a fresh process)")
    out: dict[str, Any] = {"corpus": [str(p) for p in corpus], "providers": {}}
    ref_raw: float | None = None  # sentence-transformers' own encode, chunks/s, this run
    variants = [v for v in VARIANTS if v in (ctx.variants or VARIANTS)]
    for variant in variants:
        try:
            model, load_s = ctx.model(variant)
        except Exception as e:  # e.g. model files missing: report it, bench the rest
            out["providers"][variant] = {"error": f"{e.__class__.__name__}: {e}"[:300]}
            say(f"- {variant}: could not load the model ({e.__class__.__name__}: "
                f"{str(e)[:120]})")
            continue
        data_dir = ctx.root / f"idx-{n_nominal}-{variant}"
        shutil.rmtree(data_dir, ignore_errors=True)
        eng = ctx.engine(data_dir, variant, seed_cache=False)
        t0 = time.perf_counter()
        cold = eng.ingest(corpus, prune=True, progress=False)
        cold_s = time.perf_counter() - t0
        warm = fresh_reingest(eng.settings, corpus)
        snap = eng.retriever.snapshot()
        texts = [embed_text(snap.papers[pid], text) for _, pid, _, text in eng.index.catalog.chunks()
                 if pid in snap.papers]
        n_chunks = len(texts)
        # An evenly spaced sample of the same texts: a rate needs no full second pass.
        step = max(1, len(texts) // ctx.cfg["raw_sample"])
        sample = texts[::step][: ctx.cfg["raw_sample"]]
        raw_s = raw_encode(model, sample, eng.settings.embeddings.embed_batch_size)
        if ref_raw is None and variant != "minilm":
            # sentence-transformers not among the variants: its raw encode of the
            # same sample is still the reference every ratio is divided by.
            st, _ = ctx.model("minilm")
            st_s = raw_encode(st, sample, eng.settings.embeddings.embed_batch_size)
            ref_raw = round(len(sample) / st_s, 1) if st_s else None
        tmap = eng.topic_map()  # computed (and cached) inside the cold ingest
        r = {
            "model_load_s": round(load_s, 2),
            "papers": cold.papers_total,
            "chunks": n_chunks,
            "cold_s": round(cold_s, 2),
            "cold_abstracts_per_s": round(cold.papers_total / cold_s, 1),
            "cold_chunks_per_s": round(cold.chunks_embedded / cold_s, 1),
            "topic_map_s": tmap.seconds,  # part of cold_s
            **warm,
            "raw_encode_s": round(raw_s, 2),
            "raw_texts": len(sample),
            "raw_chunks_per_s": round(len(sample) / raw_s, 1) if raw_s else None,
            "index_mb": dir_mb(data_dir),
            "peak_rss_mb": peak_rss_mb(),
        }
        r["ingest_vs_raw"] = round(r["cold_chunks_per_s"] / r["raw_chunks_per_s"], 3) \
            if r["raw_chunks_per_s"] else None
        if variant == "minilm":
            ref_raw = r["raw_chunks_per_s"]
        # Every speed also as a ratio to the raw sentence-transformers encoder
        # measured in this same run (the "vs sentence-transformers fp32").
        r["cold_vs_st_raw"] = round(r["cold_chunks_per_s"] / ref_raw, 3) if ref_raw else None
        r["raw_vs_st_raw"] = round(r["raw_chunks_per_s"] / ref_raw, 3) \
            if ref_raw and r["raw_chunks_per_s"] else None
        out["providers"][variant] = r
        out["st_raw_chunks_per_s"] = ref_raw
        say(f"- {variant}: load {r['model_load_s']} s; cold {r['cold_s']} s "
            f"({r['cold_abstracts_per_s']} abstracts/s, {r['cold_chunks_per_s']} chunks/s, "
            f"{r['cold_vs_st_raw']}x raw sentence-transformers; topic map "
            f"{r['topic_map_s']} s of it); raw encode "
            f"{r['raw_chunks_per_s']} chunks/s ({r['raw_vs_st_raw']}x); ingest/raw "
            f"{r['ingest_vs_raw']}; fresh-process re-ingest {r.get('reingest_s')} s "
            f"(process {r.get('reingest_process_s')} s); index {r['index_mb']} MB")
        del eng
    return out
