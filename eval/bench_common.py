"""What every ``aqa bench`` section shares (re-exported by ``eval.bench``): the
sizes, targets and ingest variants, the synthetic-corpus helpers
(``synth_abstracts``, ``write_seed_corpus``), timing and memory helpers, and
``BenchContext``, which builds and caches the engines a section measures.
"""

from __future__ import annotations

import random
import re
import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval import metrics as M

LLM_QUESTIONS = 30  # the speed targets are p50s over at least this many questions (issue #26)
SIZES: dict[str, dict[str, Any]] = {
    "tiny": {"papers": 80, "big_chunks": 2_000, "queries": 12, "reps": 1, "raw_sample": 48,
             "baseline_questions": 10, "llm_questions": 2, "llm_max_tokens": 24},
    # ~1,000 papers: the ingest section in a few minutes on 2 cores (targets are
    # about the full size, so they are reported there but not judged).
    "mid": {"papers": 1_000, "big_chunks": 20_000, "queries": 30, "reps": 2, "raw_sample": 400,
            "baseline_questions": None, "llm_questions": LLM_QUESTIONS, "llm_max_tokens": None},
    "full": {"papers": 3_300, "big_chunks": 100_000, "queries": 60, "reps": 3, "raw_sample": 1_000,
             "baseline_questions": None, "llm_questions": LLM_QUESTIONS, "llm_max_tokens": None},
}
TARGETS: dict[str, str] = {
    "cold_ingest_s": "~3,300-paper cold ingest < 60 s on 2 cores (fastest MiniLM variant)",
    "cold_vs_st": "cold ingest >= 3.5x raw sentence-transformers fp32, same run",
    "reingest_s": "re-ingest of an unchanged ~3,300-paper corpus < 2 s, in a fresh process",
    "search_p50_ms_mid": "search p50 at ~3,300 papers < 25 ms",
    "search_p50_ms_big": "search p50 at 100,000 chunks < 60 ms",
    "search_p95_ms_big": "search p95 at 100,000 chunks < 120 ms",
    "passages_s": f"ranked passages on screen p50 < 1 s over >= {LLM_QUESTIONS} questions",
    "ttft_s": f"first answer token p50 <= 4 s over >= {LLM_QUESTIONS} questions (default local model)",
    "answer_s": f"whole answer p50 <= 8 s over >= {LLM_QUESTIONS} questions (default local model)",
    "hit5_vs_baseline": "hit@5 above the plain LlamaIndex baseline",
    "citation_precision_vs_baseline": "citation precision above the baseline",
}
CHUNKS_PER_SYNTH_PAPER = 4
# Ingest variants: settings over the base; "minilm" (sentence-transformers fp32)
# is the raw-encoder reference every other speed is divided by.
VARIANTS: dict[str, dict[str, Any]] = {
    "minilm": {"embed_provider": "minilm", "embed_backend": "torch", "embed_precision": "fp32"},
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
    variants: list[str] | None = None  # ingest variants to run (None: all of VARIANTS)
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
        if s.embeddings.embed_provider == "minilm" and s.embeddings.embed_backend == "onnx":
            return "minilm-onnx-int8" if s.embeddings.embed_precision == "int8" else "minilm-onnx"
        return s.embeddings.embed_provider

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
        """Paths of the ~3,300-paper corpus (mid: 1,000; tiny: 150) and its nominal size."""
        from rag.config import BUNDLED_CORPUS

        n = self.cfg["papers"]
        paths = [BUNDLED_CORPUS]
        n_bundled = len(bundled_abstracts())
        n_distr = distractor_count() if self.size != "tiny" else 0
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
