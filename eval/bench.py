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
  caller side), answer latency (p50/p95) and tokens/s over 30 questions
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
``--size tiny`` shrinks every level so a smoke run takes seconds; ``--size mid``
(~1,000 papers) runs the ingest section in a few minutes; ``--variants``
picks ingest variants (the raw sentence-transformers encode is measured
either way: every ingest ratio is divided by it).

Each section is its own module (``eval.bench_ingest``, ``eval.bench_search``,
``eval.bench_llm``, ``eval.bench_baseline``) over the shared sizes, helpers and
``BenchContext`` of ``eval.bench_common``; this module keeps the targets, the
driver ``run_bench`` and the history, and re-exports every public name.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from eval.bench_baseline import baseline_corpus, bench_baseline
from eval.bench_common import (
    CHUNKS_PER_SYNTH_PAPER,
    DISTRACTORS,
    HISTORY,
    LLM_QUESTIONS,
    REPO_ROOT,
    SIZED_TARGETS,
    SIZES,
    TARGETS,
    VARIANTS,
    BenchContext,
    bundled_abstracts,
    copy_sqlite,
    dir_mb,
    distractor_count,
    latency_stats,
    peak_rss_mb,
    raw_encode,
    say,
    synth_abstracts,
    time_queries,
    write_seed_corpus,
)
from eval.bench_ingest import bench_ingest, fresh_reingest
from eval.bench_llm import bench_llm, llm_questions
from eval.bench_search import bench_search, build_big_index

__all__ = [
    "SIZES",
    "TARGETS",
    "CHUNKS_PER_SYNTH_PAPER",
    "VARIANTS",
    "HISTORY",
    "SIZED_TARGETS",
    "REPO_ROOT",
    "DISTRACTORS",
    "peak_rss_mb",
    "dir_mb",
    "say",
    "bundled_abstracts",
    "synth_abstracts",
    "write_seed_corpus",
    "copy_sqlite",
    "distractor_count",
    "latency_stats",
    "raw_encode",
    "BenchContext",
    "time_queries",
    "fresh_reingest",
    "bench_ingest",
    "build_big_index",
    "bench_search",
    "bench_llm",
    "llm_questions",
    "baseline_corpus",
    "bench_baseline",
    "check_targets",
    "run_bench",
    "headline",
    "append_history",
]


# --- targets and driver ------------------------------------------------------------


def check_targets(res: dict[str, Any], size: str) -> list[dict[str, Any]]:
    """Targets vs measured; ``met`` is None where the figure was not measured
    (or, at tiny size, where it is not the size the target is about)."""
    rows: list[dict[str, Any]] = []

    def add(key: str, measured: Any, met: bool | None, note: str = "") -> None:
        if size != "full" and key in SIZED_TARGETS:
            note = (note + "; " if note else "") + f"{size} size: not the target's corpus size"
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
    # sentence-transformers' index, else the fastest variant's (--variants)
    re_var = "minilm" if "cold_s" in provs.get("minilm", {}) else fastest
    ing = provs.get(re_var) if re_var else None
    re_s = ing.get("reingest_s") if ing else None
    add("reingest_s", re_s, None if re_s is None else re_s < 2,
        ing and f"{re_var}: {ing.get('papers')} papers; process wall "
                f"{ing.get('reingest_process_s')} s")
    levels = {lv["level"]: lv for lv in res.get("search", {}).get("levels", [])}
    mid, big = levels.get("mid"), levels.get("big")
    add("search_p50_ms_mid", mid and mid["p50"], None if not mid else mid["p50"] < 25,
        mid and f"{mid['papers']} papers")
    add("search_p50_ms_big", big and big["p50"], None if not big else big["p50"] < 60,
        big and f"{big['chunks']} chunks")
    add("search_p95_ms_big", big and big["p95"], None if not big else big["p95"] < 120,
        big and f"{big['chunks']} chunks")
    llm = res.get("llm")
    model = (llm or {}).get("model", "")
    is_default = "qwen" in model.lower()  # the targets are about the default local model
    enough = bool(llm) and llm.get("questions", 0) >= LLM_QUESTIONS
    note = (model + ("" if is_default or not llm else "; not the default model")
            + ("" if enough or not llm else f"; only {llm.get('questions')} questions"))
    for key, field, limit, needs_default in (("passages_s", "passages_s_p50", 1.0, False),
                                             ("ttft_s", "ttft_s_p50", 4.0, True),
                                             ("answer_s", "answer_s_p50", 8.0, True)):
        v = llm and llm.get(field)
        judged = v is not None and enough and (is_default or not needs_default)
        # passages precede any model call: "<", the model's figures "<=" (the wording)
        add(key, v, (v < limit if key == "passages_s" else v <= limit) if judged else None, note)
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
    variants: list[str] | None = None,
) -> dict[str, Any]:
    """Run the chosen sections, print figures and targets, write bench.json."""
    import logging

    from rag.config import Settings

    logging.getLogger("bm25s").setLevel(logging.WARNING)  # per-query index-build chatter
    if size not in SIZES:
        raise ValueError(f"size must be one of {list(SIZES)}")
    unknown = [v for v in variants or [] if v not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown ingest variant(s) {unknown}; choose from {list(VARIANTS)}")
    base_overrides = dict(base_overrides or {})
    root = (Path(data_root) if data_root else Settings().storage.data_dir) / "bench"
    root.mkdir(parents=True, exist_ok=True)
    ctx = BenchContext(size=size, root=root, base_overrides=base_overrides,
                       set_path=Path(set_path) if set_path else None,
                       run_dir=Path(run_dir) if run_dir else None, llm=llm,
                       variants=variants)
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
