"""Running a question set through the engine and writing a run folder.

A run folder holds ``results.jsonl`` (one record per question, appended as
each finishes so an interrupted run keeps its work), ``summary.json``,
``report.md`` and PNG plots (see eval.report). Per question the runner does
one ``engine.search(q, k=search_k)`` (the retrieval metrics, timed without
the LLM) and, unless retrieval-only, one ``engine.ask(q)`` (answer metrics;
latency from ``Answer.timings``).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from eval import metrics as M
from eval.dataset import Question, file_sha256

FP32_MINILM = "all-MiniLM-L6-v2"  # rag.embed.embed_model_name of fp32 MiniLM

SEARCH_K = 10  # depth of the search list the retrieval metrics read
KS: tuple[int, ...] = (1, 3, 5, 10)
DEFAULT_RUNS_DIR = Path(__file__).resolve().parent / "runs"


@dataclass
class RunConfig:
    set_path: Path | None
    use_llm: bool = True
    label: str = ""
    search_k: int = SEARCH_K
    overrides: dict[str, Any] = field(default_factory=dict)
    extra_corpus: list[str] = field(default_factory=list)
    n_boot: int = 1000
    seed: int = 0


def default_run_dir(label: str = "", root: Path = DEFAULT_RUNS_DIR) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return root / (f"{stamp}-{label}" if label else stamp)


def slim_paper(p: dict[str, Any]) -> dict[str, Any]:
    """A paper dict without the abstract (results stay small and readable)."""
    return {
        "paper_id": p.get("paper_id"),
        "title": p.get("display_title") or p.get("title"),
        "provenance": [
            {"path": v["path"], "ordinal": v["ordinal"]} for v in p.get("provenance") or []
        ],
    }


def _slim_answer(ans: dict[str, Any]) -> dict[str, Any]:
    out = dict(ans)
    out["retrieved"] = [
        {"rank": h["rank"], "score": h["score"], "paper_id": h["paper"]["paper_id"]}
        for h in ans.get("retrieved") or []
    ]
    out["citations"] = [
        {"number": c["number"], "score": c["score"], "snippet": c["snippet"],
         "paper": slim_paper(c["paper"])}
        for c in ans.get("citations") or []
    ]
    return out


def failed_answer(question: str, error: str) -> dict[str, Any]:
    """What a question whose ask() raised scores as: answered with nothing."""
    return {"question": question, "answer": "", "declined": False, "decline_reason": None,
            "citations": [], "sentences": [], "retrieved": [], "error": error,
            "timings": {"retrieval_ms": None, "ttft_ms": None, "total_ms": None}}


def as_indexed(engine: Any, q: Question) -> Question:
    """The question as this index makes it: an unanswerable question whose
    ``answered_by`` papers are indexed (the distractors hold one) is
    answerable, with the indexed ones as gold."""
    if not q.answered_by:
        return q
    provs = [[(v.path, v.ordinal) for v in p.provenance] for p in engine.retriever.snapshot().papers.values()]
    held = [g for g in q.answered_by if any(M.gold_index(pv, [g]) is not None for pv in provs)]
    return replace(q, gold=held, answerable_override=True) if held else q


def evaluate_question(engine: Any, q: Question, *, use_llm: bool, search_k: int,
                      k: int) -> dict[str, Any]:
    """Search (+ ask) one question and score it; returns the results.jsonl record."""
    from rag.errors import AqaError

    q = as_indexed(engine, q)
    t0 = time.perf_counter()
    hits = engine.search(q.question, k=search_k)
    search_ms = (time.perf_counter() - t0) * 1000
    ranked = [h.paper.to_dict() for h in hits]
    answer: dict[str, Any] | None = None
    timings: dict[str, Any] = {"search_ms": round(search_ms, 2)}
    error = None
    if use_llm:
        try:
            history, filters = conversation_of(engine, q)
            answer = engine.ask(q.question, history=history, filters=filters).to_dict()
        except AqaError as e:  # an LLM failure is a failed answer, not a crashed run
            error = str(e)
            answer = failed_answer(q.question, error)
        timings.update(answer["timings"])
    else:
        timings.update(retrieval_ms=None, ttft_ms=None, total_ms=None)
    if answer is not None and (getattr(q, "history", None) or getattr(q, "pinned", None)):
        # A follow-up or pinned question is searched as interpreted, by ask().
        ranked = [h["paper"] for h in answer.get("retrieved") or []]
        rows = [(h["rank"], h["score"], h.get("dense_score")) for h in answer.get("retrieved") or []]
    else:
        rows = [(h.rank, h.score, h.dense_score) for h in hits]
    scored = M.score_question(
        qtype=q.type, gold=q.gold, must_include=q.must_include, ranked_papers=ranked,
        answer=answer, k=k, ks=KS, answerable=q.answerable,
    )
    if answer is not None:
        scored["metrics"].update(conversation_metrics(q, answer))
    fd = floor_declines(hits[:k], engine.settings)
    scored["metrics"]["floor_correct_decline"] = None if q.answerable else float(fd)
    scored["metrics"]["floor_wrong_decline"] = float(fd) if q.answerable else None
    return {
        **q.to_dict(),
        "answerable": q.answerable,
        "retrieved": [
            {"rank": rank, "score": score, "dense_score": dense,
             "gold": rel is not None, **slim_paper(p)}
            for (rank, score, dense), p, rel in zip(rows, ranked, scored["relevance"], strict=True)
        ],
        "answer": _slim_answer(answer) if answer else None,
        "cited": scored["cited"],
        "metrics": scored["metrics"],
        "timings": timings,
        "error": error,
    }


def _paper_id(engine: Any, ref: Any) -> str:
    """A gold/history paper reference ({path, ordinal}) as an indexed paper id."""
    return engine.get_paper(f"{ref.path}#{ref.ordinal}" if hasattr(ref, "path")
                            else f"{ref['path']}#{ref['ordinal']}").paper_id


def conversation_of(engine: Any, q: Question) -> tuple[list[dict], Any]:
    """The history (with cited paper ids) and pinned-paper filter of a question."""
    from rag.types import Filters

    history = []
    for msg in getattr(q, "history", None) or []:
        m = {"role": msg["role"], "content": msg.get("content", "")}
        if msg.get("papers"):
            m["papers"] = [_paper_id(engine, p) for p in msg["papers"]]
        history.append(m)
    pinned = getattr(q, "pinned", None) or []
    filters = Filters(paper_ids=[_paper_id(engine, p) for p in pinned]) if pinned else None
    return history, filters


def conversation_metrics(q: Question, answer: dict[str, Any]) -> dict[str, Any]:
    """followup_resolved: the gold papers are among the papers the follow-up was
    resolved to or retrieved for; pinned_ok: a pinned question is answered, or
    declined only as "this abstract does not state it"."""
    out: dict[str, Any] = {"followup_resolved": None, "pinned_ok": None}
    if getattr(q, "history", None):
        got = set(answer.get("pinned") or [])
        for h in answer.get("retrieved") or []:
            got.add(h["paper"]["paper_id"] if "paper" in h else h.get("paper_id"))
        provs = {(v["path"], int(v["ordinal"]))
                 for h in answer.get("retrieved") or [] if "paper" in h
                 for v in h["paper"].get("provenance") or []}
        out["followup_resolved"] = float(all(
            any(o == g.ordinal and M.path_matches(p, g.path) for p, o in provs) for g in q.gold))
    if getattr(q, "pinned", None):
        out["pinned_ok"] = float(not answer.get("declined")
                                 or answer.get("decline_kind") == "missing_detail")
    return out


def floor_declines(hits: Sequence[Any], settings: Any) -> bool:
    """Whether ask() would decline before calling the LLM, by the engine's
    own gate (``rag.answer.rules.off_topic``, as ``rag.answer.pipeline`` applies it): no hit,
    or (unless BM25-only) the best dense cosine among the top-k papers is
    below ``relevance_floor``. Lets a retrieval-only run (and the ablation)
    measure the floor without an LLM."""
    from rag.answer.rules import off_topic

    if not hits:
        return True
    top_dense = max((h.dense_score or 0.0 for h in hits), default=0.0)
    return settings.retrieval.retriever != "bm25" and off_topic(top_dense, settings).fired


def metric_names(use_llm: bool) -> list[str]:
    """Aggregated metrics, in report order."""
    names = ["hit@1", "hit@3", "hit@k", "hit@10", "recall@k", "recall@10", "mrr", "ndcg@k",
             "ndcg@10", "floor_correct_decline", "floor_wrong_decline"]
    if use_llm:
        names += list(M.ANSWER_METRICS)
    return [*names, "pass"]


def summarize(records: Sequence[dict[str, Any]], *, use_llm: bool, k: int,
              n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    s = M.aggregate(records, metric_names(use_llm), n_boot=n_boot, seed=seed)
    s["k"] = k
    s["use_llm"] = use_llm
    s["n_boot"] = n_boot
    s["seed"] = seed
    s["n_errors"] = sum(1 for r in records if r.get("error"))
    s["failed_ids"] = [r["id"] for r in records if not r["metrics"].get("pass")]
    return s


def run_eval(
    engine: Any,
    questions: Sequence[Question],
    cfg: RunConfig,
    out_dir: Path,
    *,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run every question, write the run folder, return the summary."""
    from eval.report import write_report
    from rag.progress import Progress

    out_dir.mkdir(parents=True, exist_ok=True)
    k = int(engine.settings.retrieval.top_k)
    say = progress or (lambda msg: print(msg, file=sys.stderr, flush=True))
    results_path = out_dir / "results.jsonl"
    records: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    # Warm-up, untimed: the first search loads the embedding model and builds
    # the BM25 snapshot; that one-off cost is not a per-question latency.
    engine.search(questions[0].question, k=cfg.search_k)
    # Progress: a bar with counts and ETA on a terminal, a line per question
    # (with the ETA) in a log; a caller's own ``progress`` gets the lines.
    bar = Progress(len(questions), verb="evaluated", unit="question", every=1,
                   desc="eval") if progress is None else None
    with results_path.open("w", encoding="utf-8") as f:
        for i, q in enumerate(questions, 1):
            rec = evaluate_question(engine, q, use_llm=cfg.use_llm, search_k=cfg.search_k, k=k)
            records.append(rec)
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            f.flush()
            mark = "ok " if rec["metrics"].get("pass") else "FAIL"
            note = (f"{mark} {q.id} ({q.type}) "
                    f"{rec['timings'].get('total_ms') or rec['timings']['search_ms']:.0f} ms")
            if bar is not None:
                bar.step(note)
            else:
                say(f"[{i}/{len(questions)}] {note}")
    if bar is not None:
        bar.close()
    summary = summarize(records, use_llm=cfg.use_llm, k=k, n_boot=cfg.n_boot, seed=cfg.seed)
    summary["run"] = run_metadata(engine, cfg, time.perf_counter() - t0)
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    write_report(out_dir, summary, records)
    return summary


# CPU features that change numeric results: the int8 embedding kernels (VNNI or
# not) and llama.cpp's own build (recorded from the library, not the host).
_ISA_FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")


def host_fingerprint() -> dict[str, Any]:
    """The machine a run's figures came from: CPU model and the ISA flags that
    change numerics, the onnxruntime version and llama.cpp's compiled features.
    The same code gave different answers on different hosts (docs/decision.md),
    so ``aqa eval compare`` says when two runs' hosts differ."""
    import platform

    cpu, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, val = line.partition(":")
            if key.strip() == "model name" and cpu in ("", platform.machine()):
                cpu = val.strip()
            elif key.strip() == "flags":
                flags = set(val.split())
                break
    except OSError:  # not Linux: the model name from platform only
        pass
    out: dict[str, Any] = {"cpu": cpu, "isa": [f for f in _ISA_FLAGS if f in flags]}
    try:
        import onnxruntime

        out["onnxruntime"] = onnxruntime.__version__
    except ImportError:
        pass
    try:
        import llama_cpp

        info = llama_cpp.llama_print_system_info().decode(errors="replace")
        out["llama_cpp"] = f"{llama_cpp.__version__} ({' '.join(x.strip() for x in info.split('|') if x.strip().endswith('= 1'))})"
    except Exception:  # noqa: BLE001 - informative only (no local model installed)
        pass
    return out


def run_metadata(engine: Any, cfg: RunConfig, seconds: float) -> dict[str, Any]:
    flat = engine.settings.flat()
    try:
        st = engine.status().to_dict()
    except Exception as e:  # status is informative only
        st = {"error": str(e)}
    keys = ("retriever", "centroid_weight", "bm25_weight", "relevance_floor", "chunk_tokens", "chunk_overlap",
            "top_k", "candidate_k", "embed_provider", "llm_provider", "local_model",
            "support_threshold", "data_dir")
    return {
        "label": cfg.label,
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": round(seconds, 2),
        "set": str(cfg.set_path) if cfg.set_path else None,
        "set_sha256": file_sha256(cfg.set_path) if cfg.set_path else None,
        "extra_corpus": list(cfg.extra_corpus),
        "overrides": {k: str(v) for k, v in cfg.overrides.items()},
        "settings": {k: str(flat.get(k)) for k in keys},
        "corpus": st,
        "host": host_fingerprint(),
        "argv": sys.argv,
    }


KEPT_ON_RESCORE = ("floor_correct_decline", "floor_wrong_decline", "followup_resolved",
                   "pinned_ok")


def rescore_run(run_dir: Path | str) -> dict[str, Any]:
    """Recompute every metric of a finished run from its stored records (after
    a metric definition changed) without re-running retrieval or the LLM;
    rewrites results.jsonl, summary.json and the report. The floor-decline
    metrics, which need the engine's settings, and the follow-up/pinned ones,
    which need the full retrieved papers (results.jsonl keeps only their ids),
    are kept as recorded."""
    from eval.metrics import GoldRef

    run_dir = Path(run_dir)
    summary, records = load_run(run_dir)
    k = int(summary["k"])
    for r in records:
        scored = M.score_question(
            qtype=r["type"], gold=[GoldRef.from_dict(g) for g in r["gold"]],
            must_include=r.get("must_include") or [], ranked_papers=r["retrieved"],
            answer=r.get("answer"), k=k, ks=KS, answerable=r.get("answerable"),
        )
        keep = {key: r["metrics"][key] for key in KEPT_ON_RESCORE if key in r["metrics"]}
        r["metrics"] = {**scored["metrics"], **keep}
        r["cited"] = scored["cited"]
    run = {**summary.get("run", {}), "rescored": datetime.now(UTC).isoformat(timespec="seconds")}
    return _rewrite_run(run_dir, records, like=summary, run=run)


def _rewrite_run(run_dir: Path, records: list[dict[str, Any]], *, like: dict[str, Any],
                 run: dict[str, Any]) -> dict[str, Any]:
    """Summarise ``records`` as ``like`` was (k, LLM, bootstrap) and write the
    run folder: results.jsonl, summary.json (with ``run``) and the report."""
    from eval.report import write_report

    new = summarize(records, use_llm=like["use_llm"], k=int(like["k"]),
                    n_boot=like.get("n_boot", 1000), seed=like.get("seed", 0))
    new["run"] = run
    run_dir.mkdir(parents=True, exist_ok=True)
    with (run_dir / "results.jsonl").open("w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    (run_dir / "summary.json").write_text(json.dumps(new, indent=2) + "\n", encoding="utf-8")
    write_report(run_dir, new, records)
    return new


def merge_runs(base: Path | str, partial: Path | str, out: Path | str) -> dict[str, Any]:
    """A run of ``base``'s questions in which those ``partial`` also ran take
    its records: after a change that can only affect some questions (say, only
    "which papers" ones), rerun those and merge instead of rerunning all.
    Both runs must have the same k and LLM setting; the merged summary is
    recomputed and records both runs."""
    from rag.errors import AqaError

    (sb, rb), (sp, rp) = load_run(base), load_run(partial)
    if (sb["k"], sb["use_llm"]) != (sp["k"], sp["use_llm"]):
        raise AqaError(f"{partial}: k / use_llm differ from {base}; runs cannot be merged")
    newer = {r["id"]: r for r in rp}
    unknown = sorted(set(newer) - {r["id"] for r in rb})
    if unknown:
        raise AqaError(f"{partial}: questions not in {base}: {', '.join(unknown[:5])}")
    records = [newer.get(r["id"], r) for r in rb]
    run = {**sp.get("run", {}), "merged": {"base": str(base), "partial": str(partial),
                                           "replaced": len(newer), "of": len(rb)}}
    return _rewrite_run(Path(out), records, like=sb, run=run)


def load_run(run_dir: Path | str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(summary, records) of a finished run folder; a folder without a
    summary (missing, cut short, not a run) is an ``AqaError`` naming it."""
    from rag.errors import AqaError

    run_dir = Path(run_dir)
    if not (run_dir / "summary.json").is_file() or not (run_dir / "results.jsonl").is_file():
        what = "does not exist" if not run_dir.exists() else "lacks summary.json or results.jsonl"
        raise AqaError(f"{run_dir}: {what}; pass the folder of a finished `aqa eval run` "
                       "(a run cut short writes no summary: run it again)")
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    records = [
        json.loads(line)
        for line in (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    return summary, records


# --- engine set-up for eval commands -------------------------------------------


def eval_data_dir(base: Path, corpus: Sequence[Path | str], embed_name: str = FP32_MINILM) -> Path:
    """Eval indexes live apart from the user's own index (ingest here prunes):
    ``<data_dir>/eval`` for the bundled corpus, ``eval-<hash>`` otherwise, with
    a suffix naming any embedding but fp32 MiniLM (``eval-int8``): an index
    refuses another model's vectors, so fp32 and int8 runs keep one each."""
    import re

    from rag.config import BUNDLED_CORPUS
    from rag.embed import INT8_SUFFIX

    suffix = {FP32_MINILM: "", FP32_MINILM + INT8_SUFFIX: "-int8"}.get(
        embed_name, "-" + re.sub(r"[^a-z0-9]+", "-", embed_name.lower()).strip("-"))
    paths = [str(Path(p).resolve()) for p in corpus]
    if paths == [str(BUNDLED_CORPUS.resolve())]:
        return Path(base) / f"eval{suffix}"
    import hashlib

    h = hashlib.sha1("\n".join(sorted(paths)).encode()).hexdigest()[:8]
    return Path(base) / f"eval-{h}{suffix}"


def build_engine(overrides: dict[str, Any], *, llm: Any = None, embed_model: Any = None) -> Any:
    """``rag.Engine(Settings(**overrides))``; explicit overrides beat env/.env."""
    from rag.config import Settings
    from rag.engine import Engine

    return Engine(Settings(**overrides), llm=llm, embed_model=embed_model)


def prepare_corpus(engine: Any, corpus: Sequence[Path | str], *, progress: bool = False) -> Any:
    """Make the engine's index hold exactly ``corpus`` (idempotent: unchanged
    papers cost nothing; papers from an earlier, different corpus are pruned)."""
    return engine.ingest(list(corpus), prune=True, progress=progress)
