"""``aqa bench``: speed benchmarks that print figures and write them as JSON.
Not tests: nothing here asserts a time; the targets are printed beside the
measured figures.

Sections:

- ``ingest``: cold ingest (fresh data dir) for MiniLM on sentence-transformers,
  on ONNX Runtime fp32 and int8, and WordLlama, beside each raw model's own
  batched encode of the same chunk texts in the same process (an evenly
  spaced sample of them, 48 at tiny size, 1,000 at full): abstracts/s,
  chunks/s, the ingest/raw ratio, and every speed as a ratio to the raw
  sentence-transformers encoder of the same run. Re-ingest of the unchanged
  corpus runs in a fresh process. Model load time is reported apart.
- ``search``: search (no LLM) p50/p95 at 57 papers, at ~3,300 papers and at
  100,000 chunks; index size on disk and peak RSS after each level.
  The ~3,300-paper corpus is the bundled 57, the real PMLR posts in
  eval/distractors/ when present, and synthetic abstracts made by
  recombining sentences of different bundled abstracts (numbers perturbed),
  written as seed-format .txt files and ingested through the normal path.
  The 100,000-chunk level is built by direct insertion (embedding 100k
  chunks on 2 cores would take most of an hour): the bundled corpus is
  ingested normally, then synthetic papers of 4 recombined chunks each are
  written straight into the engine's own catalog and Chroma collection, each
  vector a normalised mix of two real chunk embeddings plus Gaussian noise.
  Queries then run through the unchanged engine.search path (query embedding,
  Chroma HNSW, BM25 over all chunks, fusion), which is what is timed. The
  first query, which builds the in-memory BM25 snapshot, is reported apart.
- ``llm``: model load time, then time to first token (p50/p95, engine and
  caller side), answer latency (p50/p95) and tokens/s over 20 questions
  (full size) through engine.ask_stream.
- ``baseline``: the plain LlamaIndex pipeline — one Document per abstract,
  VectorStoreIndex over a Chroma collection, the same embedding model object,
  default SentenceSplitter — with similarity_top_k=5 (the only change from
  the defaults, so hit@5 is defined), on the same corpus as ours (the --run
  eval's corpus when given). Reports hit@5, MRR and source precision@2 for
  both pipelines on the same answerable questions, the speed ratio of search
  and index build, and, with --run, the baseline's citation precision over as
  many sources as ours cited for each question.

Every run appends its headline figures to ``<data_dir>/bench/history.jsonl``
and prints the change against the previous run of the same size.

Indexes are cached under ``<data_dir>/bench`` (re-runs cost a re-ingest);
``--size tiny`` shrinks every level so a smoke run takes seconds.
"""

from __future__ import annotations

import json
import random
import re
import resource
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval import metrics as M

SIZES: dict[str, dict[str, Any]] = {
    "tiny": {"papers": 80, "big_chunks": 2_000, "queries": 12, "reps": 1, "raw_sample": 48,
             "baseline_questions": 10, "llm_questions": 2, "llm_max_tokens": 24},
    "full": {"papers": 3_300, "big_chunks": 100_000, "queries": 60, "reps": 3, "raw_sample": 1_000,
             "baseline_questions": None, "llm_questions": 20, "llm_max_tokens": None},
}
TARGETS: dict[str, str] = {
    "cold_ingest_s": "~3,300-paper cold ingest < 60 s on 2 cores (fastest MiniLM variant)",
    "cold_vs_st": "cold ingest >= 3.5x raw sentence-transformers fp32, same run",
    "reingest_s": "re-ingest of an unchanged ~3,300-paper corpus < 2 s, in a fresh process",
    "search_p50_ms_mid": "search p50 at ~3,300 papers < 25 ms",
    "search_p50_ms_big": "search p50 at 100,000 chunks < 60 ms",
    "search_p95_ms_big": "search p95 at 100,000 chunks < 120 ms",
    "ttft_s": "time to first token p50 < 1.5 s over >= 20 questions (default local model)",
    "hit5_vs_baseline": "hit@5 above the plain LlamaIndex baseline",
    "citation_precision_vs_baseline": "citation precision above the baseline",
}
CHUNKS_PER_SYNTH_PAPER = 4
# Ingest variants: settings over the base; "minilm" (sentence-transformers fp32)
# is the raw-encoder reference every other speed is divided by.
VARIANTS: dict[str, dict[str, Any]] = {
    "minilm": {"embed_provider": "minilm", "embed_backend": "torch"},
    "minilm-onnx": {"embed_provider": "minilm", "embed_backend": "onnx",
                    "embed_precision": "fp32"},
    "minilm-onnx-int8": {"embed_provider": "minilm", "embed_backend": "onnx",
                         "embed_precision": "int8"},
    "wordllama": {"embed_provider": "wordllama"},
}
HISTORY = "history.jsonl"
SIZED_TARGETS = ("cold_ingest_s", "cold_vs_st", "reingest_s", "search_p50_ms_mid",
                 "search_p50_ms_big", "search_p95_ms_big")
REPO_ROOT = Path(__file__).resolve().parent.parent
DISTRACTORS = REPO_ROOT / "eval" / "distractors"


# --- helpers -------------------------------------------------------------------


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (Linux: ru_maxrss in KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def dir_mb(path: Path) -> float:
    if not path.exists():
        return 0.0
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20, 2)


def say(msg: str = "") -> None:
    print(msg, flush=True)


def bundled_abstracts(corpus: Path | None = None) -> list[str]:
    """Abstract lines of the seed-format .txt files (heading line skipped)."""
    from rag.config import BUNDLED_CORPUS

    out: list[str] = []
    for f in sorted((corpus or BUNDLED_CORPUS).glob("*.txt")):
        lines = [ln.strip() for ln in f.read_text(encoding="utf-8").splitlines() if ln.strip()]
        out += lines[1:]
    return out


_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_NUM = re.compile(r"\d+(?:\.\d+)?")


def synth_abstracts(n: int, seed: int = 0, source: Sequence[str] | None = None) -> list[str]:
    """``n`` abstracts recombined from sentences of different real abstracts,
    with numbers perturbed and ~10% of words swapped for random corpus words,
    so no two are near-duplicates while length, vocabulary and topic mix stay
    realistic (the vocabulary per document grows as it would in a real corpus)."""
    rng = random.Random(seed)
    real = list(source or bundled_abstracts())
    pool = [s for a in real for s in _SENT.split(a) if len(s) > 30]
    vocab = sorted({w for a in real for w in re.findall(r"[A-Za-z][a-z]{3,}", a)})
    out = []
    for i in range(n):
        sents = rng.sample(pool, k=min(len(pool), rng.randint(5, 9)))
        words = " ".join(sents).split(" ")
        words = [rng.choice(vocab) if rng.random() < 0.1 and w.isalpha() else w for w in words]
        text = _NUM.sub(lambda m: str(round(float(m.group()) * rng.uniform(0.5, 1.5), 1)),
                        " ".join(words))
        out.append(f"{text} (variant {i})")
    return out


def write_seed_corpus(folder: Path, abstracts: Sequence[str], per_file: int = 100) -> Path:
    """Write abstracts as seed-format .txt files (heading line, one abstract a
    line); rewritten only when the content changes, so re-ingest stays cached."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp = folder / ".count"
    if stamp.is_file() and stamp.read_text() == str(len(abstracts)):
        return folder
    for f in folder.glob("*.txt"):
        f.unlink()
    for i in range(0, len(abstracts), per_file):
        body = "\n\n".join(abstracts[i : i + per_file])
        (folder / f"{i // per_file:03d}_synthetic.txt").write_text(
            f"Synthetic papers\n\n{body}\n", encoding="utf-8"
        )
    stamp.write_text(str(len(abstracts)))
    return folder


def copy_sqlite(src: Path, dst: Path) -> None:
    """Consistent copy of a (WAL-mode) sqlite file through the backup API."""
    import sqlite3

    dst.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)


def distractor_count() -> int:
    return len(list(DISTRACTORS.rglob("*.md"))) if DISTRACTORS.is_dir() else 0


def latency_stats(ms: Sequence[float]) -> dict[str, Any]:
    return {"n": len(ms), "p50": _r(M.percentile(ms, 50)), "p95": _r(M.percentile(ms, 95)),
            "mean": _r(M.mean(ms)), "max": _r(max(ms) if ms else None)}


def _r(v: float | None, d: int = 2) -> float | None:
    return None if v is None else round(v, d)


def raw_encode(model: Any, texts: Sequence[str], batch_size: int) -> float:
    """Seconds for the underlying model's own batched encode of ``texts``
    (SentenceTransformer.encode / WordLlama.embed), bypassing LlamaIndex."""
    inner = getattr(model, "_model", None)
    t0 = time.perf_counter()
    if inner is not None and hasattr(inner, "encode") and not hasattr(inner, "embed"):
        inner.encode(list(texts), batch_size=batch_size, normalize_embeddings=True,
                     show_progress_bar=False)
    elif inner is not None and hasattr(inner, "embed"):
        inner.embed(list(texts))
    else:
        model.get_text_embedding_batch(list(texts))
    return time.perf_counter() - t0


@dataclass
class BenchContext:
    size: str
    root: Path  # bench cache dir: indexes, synthetic corpora
    base_overrides: dict[str, Any]
    set_path: Path | None = None
    run_dir: Path | None = None
    llm: Any = None  # tests pass a fake
    results: dict[str, Any] = field(default_factory=dict)
    _models: dict[str, Any] = field(default_factory=dict)

    @property
    def cfg(self) -> dict[str, Any]:
        return SIZES[self.size]

    @property
    def provider(self) -> str:
        """The configured embedding as a VARIANTS key (search, LLM and baseline
        sections run with it), else the provider name."""
        s = self.settings()
        if s.embed_provider == "minilm" and s.embed_backend == "onnx":
            return "minilm-onnx-int8" if s.embed_precision == "int8" else "minilm-onnx"
        return s.embed_provider

    def settings(self, **over: Any):
        from rag.config import Settings

        return Settings(**{**self.base_overrides, **over})

    def variant_settings(self, variant: str, **over: Any):
        """Settings of an ingest variant (a VARIANTS key) or a plain provider."""
        return self.settings(**{**VARIANTS.get(variant, {"embed_provider": variant}), **over})

    def model(self, provider: str) -> tuple[Any, float]:
        """(embedding model, load seconds); loaded once per process.
        ``provider``: a VARIANTS key or a provider name."""
        if provider not in self._models:
            from rag.embed import make_embed_model

            t0 = time.perf_counter()
            m = make_embed_model(self.variant_settings(provider))
            m.get_text_embedding_batch(["warm up the model"])  # lazy init out of the timings
            self._models[provider] = (m, time.perf_counter() - t0)
        return self._models[provider]

    def engine(self, data_dir: Path, provider: str | None = None, *, llm: Any = None,
               seed_cache: bool = True, **over: Any):
        """An engine on ``data_dir``; a new data dir gets a copy of the bundled
        index's embedding cache (so only new texts are embedded), unless
        ``seed_cache`` is False (cold-ingest measurements)."""
        from rag.engine import Engine

        provider = provider or self.provider
        model, _ = self.model(provider)
        donor = self.root / f"idx-57-{provider}" / "embed_cache.sqlite"
        target = Path(data_dir) / "embed_cache.sqlite"
        if seed_cache and donor.is_file() and not target.exists() and donor != target:
            copy_sqlite(donor, target)
        from rag.embed import embed_model_name

        s = self.variant_settings(provider, data_dir=data_dir, **over)
        eng = Engine(s, llm=llm or self.llm, embed_model=model)
        # The shared model object is the configured one: record its real name,
        # so a fresh process with the same settings opens this index.
        eng.embed_name = embed_model_name(s)
        return eng

    # --- corpora ---
    def mid_corpus(self) -> tuple[list[Path], int]:
        """Paths of the ~3,300-paper corpus (tiny: 150) and its nominal size."""
        from rag.config import BUNDLED_CORPUS

        n = self.cfg["papers"]
        paths = [BUNDLED_CORPUS]
        n_bundled = len(bundled_abstracts())
        n_distr = distractor_count() if self.size == "full" else 0
        if n_distr:
            paths.append(DISTRACTORS)
        n_synth = max(0, n - n_bundled - n_distr)
        paths.append(write_seed_corpus(self.root / f"synth-{n_synth}",
                                       synth_abstracts(n_synth, seed=1)))
        return paths, n

    def queries(self) -> list[str]:
        """Queries for the search timings: the eval questions, else abstract openings."""
        from eval.dataset import DEFAULT_SET, load_questions

        path = self.set_path or DEFAULT_SET
        qs: list[str] = []
        if Path(path).is_file():
            qs = [q.question for q in load_questions(path)]
        if not qs:
            qs = [" ".join(a.split()[:10]) for a in bundled_abstracts()]
        return qs[: self.cfg["queries"]]


def time_queries(engine: Any, queries: Sequence[str], reps: int) -> dict[str, Any]:
    """First query apart (it builds the BM25 snapshot), then every query ``reps`` times."""
    t0 = time.perf_counter()
    engine.search(queries[0])
    first_ms = (time.perf_counter() - t0) * 1000
    ms: list[float] = []
    for _ in range(reps):
        for q in queries:
            t0 = time.perf_counter()
            engine.search(q)
            ms.append((time.perf_counter() - t0) * 1000)
    return {"first_query_ms": round(first_ms, 1), **latency_stats(ms)}


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
            for k, v in settings.model_dump().items()
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
    from rag.config import BUNDLED_CORPUS
    from rag.index import embed_text

    if ctx.size == "full":
        corpus, n_nominal = ctx.mid_corpus()
    else:
        corpus, n_nominal = [BUNDLED_CORPUS], len(bundled_abstracts())
    say(f"\n## Ingest ({n_nominal} papers nominal; re-ingest in a fresh process)")
    out: dict[str, Any] = {"corpus": [str(p) for p in corpus], "providers": {}}
    ref_raw: float | None = None  # sentence-transformers' own encode, chunks/s, this run
    for variant in VARIANTS:
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
        raw_s = raw_encode(model, sample, eng.settings.embed_batch_size)
        r = {
            "model_load_s": round(load_s, 2),
            "papers": cold.papers_total,
            "chunks": n_chunks,
            "cold_s": round(cold_s, 2),
            "cold_abstracts_per_s": round(cold.papers_total / cold_s, 1),
            "cold_chunks_per_s": round(cold.chunks_embedded / cold_s, 1),
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
        say(f"- {variant}: load {r['model_load_s']} s; cold {r['cold_s']} s "
            f"({r['cold_abstracts_per_s']} abstracts/s, {r['cold_chunks_per_s']} chunks/s, "
            f"{r['cold_vs_st_raw']}x raw sentence-transformers); raw encode "
            f"{r['raw_chunks_per_s']} chunks/s ({r['raw_vs_st_raw']}x); ingest/raw "
            f"{r['ingest_vs_raw']}; fresh-process re-ingest {r.get('reingest_s')} s "
            f"(process {r.get('reingest_process_s')} s); index {r['index_mb']} MB")
        del eng
    return out


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
                       "index_mb": dir_mb(eng.settings.data_dir), "ingest_s": round(ingest_s, 2),
                       **lat, "peak_rss_mb": peak_rss_mb()})
        del eng
    eng, build_s = build_big_index(ctx, ctx.cfg["big_chunks"])
    st = eng.status()
    lat = time_queries(eng, queries, reps)
    levels.append({"level": "big", "papers": st.papers, "chunks": st.chunks,
                   "index_mb": dir_mb(eng.settings.data_dir), "build_s": round(build_s, 2),
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


# --- LLM -----------------------------------------------------------------------


def bench_llm(ctx: BenchContext) -> dict[str, Any]:
    from rag.config import BUNDLED_CORPUS
    from rag.llm import make_llm

    over: dict[str, Any] = {}
    if ctx.cfg["llm_max_tokens"]:
        over["max_tokens"] = ctx.cfg["llm_max_tokens"]
    t0 = time.perf_counter()
    llm = ctx.llm or make_llm(ctx.settings(**over))
    list(llm.stream_chat([{"role": "user", "content": "Say OK."}], max_tokens=1, temperature=0.0))
    load_s = time.perf_counter() - t0
    eng = ctx.engine(ctx.root / f"idx-57-{ctx.provider}", llm=llm, **over)
    eng.ingest([BUNDLED_CORPUS], prune=True, progress=False)
    say(f"\n## LLM ({llm.name}; load + 1 token {load_s:.2f} s)")
    questions = llm_questions(ctx, eng, ctx.cfg["llm_questions"])
    runs = []
    for q in questions:
        n_tok, t_first, t_last, answer = 0, None, None, None
        t0 = time.perf_counter()
        for ev in eng.ask_stream(q):
            if ev.kind == "token":
                now = time.perf_counter()
                t_first = t_first or now
                t_last = now
                n_tok += 1
            elif ev.kind == "answer":
                answer = ev.answer
        gen_s = (t_last - t_first) if t_first and t_last else 0.0
        r = {
            "question": q,
            # Seen by the caller: from ask_stream() to the first token event.
            "ttft_client_s": _r(t_first - t0) if t_first else None,
            "ttft_s": _r(answer.timings.ttft_ms / 1000 if answer and answer.timings.ttft_ms
                         else None),
            "retrieval_ms": answer.timings.retrieval_ms if answer else None,
            "total_s": _r(time.perf_counter() - t0),
            "tokens": n_tok,
            "tokens_per_s": _r((n_tok - 1) / gen_s) if gen_s > 0 and n_tok > 1 else None,
            "declined": answer.declined if answer else None,
            "answer": (answer.text[:200] if answer else None),
        }
        runs.append(r)
        say(f"- TTFT {r['ttft_s']} s, {r['tokens']} tokens at {r['tokens_per_s']} tok/s, "
            f"total {r['total_s']} s: {q}")
    def pct(key: str, q: int) -> float | None:
        vals = [r[key] for r in runs if r[key] is not None]
        return _r(M.percentile(vals, q)) if vals else None

    out = {"model": llm.name, "load_s": round(load_s, 2), "questions": len(runs), "runs": runs,
           "ttft_s_median": pct("ttft_s", 50), "ttft_s_p50": pct("ttft_s", 50),
           "ttft_s_p95": pct("ttft_s", 95),
           "ttft_client_s_p50": pct("ttft_client_s", 50),
           "ttft_client_s_p95": pct("ttft_client_s", 95),
           "answer_s_p50": pct("total_s", 50), "answer_s_p95": pct("total_s", 95),
           "tokens_per_s_median": pct("tokens_per_s", 50),
           "peak_rss_mb": peak_rss_mb()}
    say(f"TTFT p50 {out['ttft_s_p50']} s, p95 {out['ttft_s_p95']} s (caller-side p50 "
        f"{out['ttft_client_s_p50']} s); answer p50 {out['answer_s_p50']} s, p95 "
        f"{out['answer_s_p95']} s over {len(runs)} questions")
    return out


def llm_questions(ctx: BenchContext, eng: Any, n: int) -> list[str]:
    """``n`` questions: the answerable ones of the eval set first (what users
    ask), then questions drawn from the corpus."""
    from eval.dataset import DEFAULT_SET, load_questions

    path = Path(ctx.set_path or DEFAULT_SET)
    qs: list[str] = []
    if path.is_file():  # single-turn, unpinned: what ask_stream(q) alone can answer
        qs = [q.question for q in load_questions(path) if q.answerable
              and not getattr(q, "history", None) and not getattr(q, "pinned", None)][:n]
    if len(qs) < n:
        qs += eng.example_questions(n - len(qs))
    return qs[:n]


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


# --- targets and driver ------------------------------------------------------------


def check_targets(res: dict[str, Any], size: str) -> list[dict[str, Any]]:
    """Targets vs measured; ``met`` is None where the figure was not measured
    (or, at tiny size, where it is not the size the target is about)."""
    rows: list[dict[str, Any]] = []

    def add(key: str, measured: Any, met: bool | None, note: str = "") -> None:
        if size != "full" and key in SIZED_TARGETS:
            note = (note + "; " if note else "") + "tiny size: not the target's corpus size"
            met = None
        rows.append({"target": TARGETS[key], "key": key, "measured": measured, "met": met,
                     "note": note})

    provs = res.get("ingest", {}).get("providers", {})
    minis = {k: v for k, v in provs.items() if k.startswith("minilm") and "cold_s" in v}
    fastest = min(minis, key=lambda k: minis[k]["cold_s"]) if minis else None
    f = minis.get(fastest) if fastest else None
    add("cold_ingest_s", f and f["cold_s"], None if not f else f["cold_s"] < 60,
        f and f"{fastest}: {f['papers']} papers, {f['cold_abstracts_per_s']} abstracts/s")
    add("cold_vs_st", f and f.get("cold_vs_st_raw"),
        None if not f or f.get("cold_vs_st_raw") is None else f["cold_vs_st_raw"] >= 3.5,
        fastest or "")
    ing = provs.get("minilm")
    re_s = ing.get("reingest_s") if ing else None
    add("reingest_s", re_s, None if re_s is None else re_s < 2,
        ing and f"{ing.get('papers')} papers; process wall {ing.get('reingest_process_s')} s")
    levels = {lv["level"]: lv for lv in res.get("search", {}).get("levels", [])}
    mid, big = levels.get("mid"), levels.get("big")
    add("search_p50_ms_mid", mid and mid["p50"], None if not mid else mid["p50"] < 25,
        mid and f"{mid['papers']} papers")
    add("search_p50_ms_big", big and big["p50"], None if not big else big["p50"] < 60,
        big and f"{big['chunks']} chunks")
    add("search_p95_ms_big", big and big["p95"], None if not big else big["p95"] < 120,
        big and f"{big['chunks']} chunks")
    llm = res.get("llm")
    ttft = llm and llm.get("ttft_s_p50")
    model = (llm or {}).get("model", "")
    is_default = "qwen" in model.lower()  # the target is about the default local model
    enough = bool(llm) and llm.get("questions", 0) >= 20
    add("ttft_s", ttft, None if ttft is None or not is_default or not enough else ttft < 1.5,
        model + ("" if is_default or not llm else "; not the default model")
        + ("" if enough or not llm else f"; only {llm.get('questions')} questions"))
    base = res.get("baseline") or {}
    if "ours" in base:
        o, b = base["ours"], base["baseline"]
        add("hit5_vs_baseline", f"{o['hit@5']} vs {b['hit@5']}", o["hit@5"] > b["hit@5"])
        cp = o.get("citation_precision")
        add("citation_precision_vs_baseline",
            f"{cp} vs {b['citation_precision']}" if cp is not None else None,
            None if cp is None else cp > b["citation_precision"],
            "share of cited papers that are gold; baseline: "
            + str(b.get("citation_precision_basis", "top-2 sources"))
            + ("" if cp is not None else "; ours needs --run RUN_DIR (an eval run with answers)"))
    else:
        add("hit5_vs_baseline", None, None)
        add("citation_precision_vs_baseline", None, None)
    return rows


def run_bench(
    what: str = "all",
    *,
    size: str = "full",
    out: Path | None = None,
    base_overrides: dict[str, Any] | None = None,
    data_root: Path | None = None,
    set_path: str | Path | None = None,
    run_dir: str | Path | None = None,
    llm: Any = None,
) -> dict[str, Any]:
    """Run the chosen sections, print figures and targets, write bench.json."""
    import logging

    from rag.config import Settings

    logging.getLogger("bm25s").setLevel(logging.WARNING)  # per-query index-build chatter
    if size not in SIZES:
        raise ValueError(f"size must be one of {list(SIZES)}")
    base_overrides = dict(base_overrides or {})
    root = (Path(data_root) if data_root else Settings().data_dir) / "bench"
    root.mkdir(parents=True, exist_ok=True)
    ctx = BenchContext(size=size, root=root, base_overrides=base_overrides,
                       set_path=Path(set_path) if set_path else None,
                       run_dir=Path(run_dir) if run_dir else None, llm=llm)
    sections = ["ingest", "search", "llm", "baseline"] if what == "all" else [what]
    res: dict[str, Any] = {"size": size, "sections": sections, "argv": sys.argv,
                           "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    fns = {"ingest": bench_ingest, "search": bench_search, "llm": bench_llm,
           "baseline": bench_baseline}
    t_all = time.perf_counter()
    for name in sections:
        t0 = time.perf_counter()
        res[name] = ctx.results[name] = fns[name](ctx)
        res[name]["section_s"] = round(time.perf_counter() - t0, 2)
    res["seconds"] = round(time.perf_counter() - t_all, 2)
    res["peak_rss_mb"] = peak_rss_mb()
    res["targets"] = check_targets(res, size)
    say("\n## Targets")
    say("| target | measured | met | note |")
    say("|---|---|---|---|")
    for t in res["targets"]:
        met = {True: "yes", False: "NO", None: "–"}[t["met"]]
        say(f"| {t['target']} | {t['measured'] if t['measured'] is not None else '–'} | "
            f"{met} | {t['note'] or ''} |")
    if out is None:
        from eval.runner import default_run_dir

        out = default_run_dir(f"bench-{size}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(res, indent=2, default=str) + "\n",
                                    encoding="utf-8")
    say(f"\nPeak RSS {res['peak_rss_mb']} MB; {res['seconds']} s; written {out / 'bench.json'}")
    res["history"] = str(append_history(root / HISTORY, res))
    return res


# --- history ---------------------------------------------------------------------

# (figure, True when higher is better)
_LOWER, _HIGHER = False, True


def headline(res: dict[str, Any]) -> dict[str, tuple[float, bool]]:
    """The figures a run is compared on, flat: name -> (value, higher is better)."""
    out: dict[str, tuple[float, bool]] = {}

    def put(name: str, v: Any, better: bool) -> None:
        if isinstance(v, int | float) and not isinstance(v, bool):
            out[name] = (float(v), better)

    for var, r in res.get("ingest", {}).get("providers", {}).items():
        put(f"ingest.{var}.cold_abstracts_per_s", r.get("cold_abstracts_per_s"), _HIGHER)
        put(f"ingest.{var}.cold_vs_st_raw", r.get("cold_vs_st_raw"), _HIGHER)
        put(f"ingest.{var}.reingest_s", r.get("reingest_s"), _LOWER)
    for lv in res.get("search", {}).get("levels", []):
        put(f"search.{lv['level']}.p50_ms", lv.get("p50"), _LOWER)
        put(f"search.{lv['level']}.p95_ms", lv.get("p95"), _LOWER)
        put(f"search.{lv['level']}.first_query_ms", lv.get("first_query_ms"), _LOWER)
    llm = res.get("llm") or {}
    for k in ("ttft_s_p50", "ttft_s_p95", "answer_s_p50", "answer_s_p95"):
        put(f"llm.{k}", llm.get(k), _LOWER)
    base = res.get("baseline") or {}
    for side in ("ours", "baseline"):
        put(f"baseline.{side}.hit@5", (base.get(side) or {}).get("hit@5"), _HIGHER)
    return out


def append_history(path: Path, res: dict[str, Any]) -> Path:
    """Append this run's headline figures to ``path`` (JSON lines) and print
    the change against the previous run of the same size."""
    figures = {k: v for k, (v, _) in headline(res).items()}
    better = {k: b for k, (_, b) in headline(res).items()}
    prev = None
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if row.get("size") == res["size"]:
                prev = row
    entry = {"started": res["started"], "size": res["size"], "sections": res["sections"],
             "figures": figures}
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")
    if prev is None:
        say(f"\nHistory: first {res['size']} run recorded in {path}")
        return path
    say(f"\n## Change since the previous {res['size']} run ({prev['started']})")
    say("| figure | before | now | change |")
    say("|---|---|---|---|")
    for k, now in figures.items():
        was = prev.get("figures", {}).get(k)
        if was is None:
            continue
        pct = (now - was) / was * 100 if was else 0.0
        good = (now >= was) == better[k] if now != was else None
        mark = {True: "better", False: "worse", None: "same"}[good]
        say(f"| {k} | {was:g} | {now:g} | {pct:+.1f}% ({mark}) |")
    return path
