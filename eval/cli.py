"""The ``aqa eval …`` and ``aqa bench …`` subcommands.

The ``aqa`` entry module (``aqa_cli``) calls ``register(subparsers)``; every
handler is stored as ``fn`` and returns an exit code. Also runnable alone: ``python -m eval.cli``.

    aqa eval run [--set FILE] [--out DIR] [--retriever hybrid|dense|bm25] [--no-llm]
                 [--limit N] [--per-type N [--sample-seed S]] [--type T ...] [--extra-corpus PATH ...]
    aqa eval compare RUN_A RUN_B
    aqa eval rescore RUN ...
    aqa eval replay (RUN ... | --live-choice [--type T ...] [--per-type N]) [--variants FILE]
                    [--out FILE] [--extra-corpus PATH ...]
    aqa eval signals [--split tune] [--type T ...] [--out FILE] [--extra-corpus PATH ...]
    aqa eval fit-decision SIGNALS.jsonl ... [--out FILE]
    aqa eval ablate [--set FILE] [--out DIR] [--config NAME ...] [--llm]
    aqa bench [ingest|search|llm|baseline|all] [--size tiny|mid|full] [--variants V,..] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

# Settings fields that have a command-line flag (--top-k sets top_k, ...).
_SETTING_FLAGS = (
    "retriever", "top_k", "centroid_weight", "bm25_weight", "relevance_floor", "chunk_tokens",
    "chunk_overlap", "embed_provider", "llm_provider", "local_model",
)


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Settings fields given on the command line (None = keep env/.env/default)."""
    return {f: getattr(args, f) for f in _SETTING_FLAGS if getattr(args, f, None) is not None}


def _settings_args(p: argparse.ArgumentParser, *, retriever: bool = True,
                   data_help: str = "base index location (default: AQA_DATA_DIR or .aqa); "
                   "evals index into <data-dir>/eval… so your own index is never touched",
                   ) -> None:
    g = p.add_argument_group("engine settings (override env/.env)")
    if retriever:
        g.add_argument("--retriever", choices=["hybrid", "dense", "bm25"])
        g.add_argument("--centroid-weight", type=float)
        g.add_argument("--bm25-weight", type=float)
        g.add_argument("--relevance-floor", type=float)
        g.add_argument("--chunk-tokens", type=int)
        g.add_argument("--chunk-overlap", type=int)
    g.add_argument("--top-k", type=int)
    g.add_argument("--embed-provider", choices=["minilm", "wordllama", "openai"])
    g.add_argument("--llm-provider", choices=["auto", "local", "openai"])
    g.add_argument("--local-model", choices=["qwen2.5-1.5b", "smollm2-135m"])
    g.add_argument("--data-dir", help=data_help)


def _base_data_dir(args: argparse.Namespace) -> Path:
    if getattr(args, "data_dir", None):
        return Path(args.data_dir)
    from rag.config import Settings

    return Settings().storage.data_dir


def _corpus(args: argparse.Namespace) -> list[Path]:
    from rag.config import BUNDLED_CORPUS

    base = [Path(p) for p in args.corpus] if getattr(args, "corpus", None) else [BUNDLED_CORPUS]
    extra = [Path(p) for p in getattr(args, "extra_corpus", None) or []]
    for p in base + extra:
        if not p.exists():
            from rag.errors import AqaError

            raise AqaError(f"{p}: corpus path not found")
    return base + extra


def per_type(qs: list, n: int, seed: int | None = None) -> list:
    """At most ``n`` questions of each type, in set order: the first ``n``, or
    with ``seed`` a seeded random ``n`` (the first ones of each type are the
    oldest, the ones earlier rules were written against)."""
    by_type: dict[str, list] = {}
    for q in qs:
        by_type.setdefault(q.type, []).append(q)
    if seed is None:
        keep = {id(q) for v in by_type.values() for q in v[:n]}
    else:
        rng = random.Random(seed)
        keep = {id(q) for _, v in sorted(by_type.items()) for q in (v if len(v) <= n else rng.sample(v, n))}
    return [q for q in qs if id(q) in keep]


def _questions(args: argparse.Namespace):
    from eval.dataset import DEFAULT_SET, DatasetError, load_questions
    from rag.errors import AqaError

    path = Path(args.set) if args.set else DEFAULT_SET
    try:
        qs = load_questions(path)
    except DatasetError as e:
        raise AqaError(str(e)) from None
    if getattr(args, "split", None):  # tune while developing; report heldout, never tune on it
        qs = [q for q in qs if getattr(q, "split", None) == args.split]
    if getattr(args, "type", None):
        qs = [q for q in qs if q.type in args.type]
    if getattr(args, "per_type", None):
        qs = per_type(qs, args.per_type, getattr(args, "sample_seed", None))
    if getattr(args, "limit", None):
        qs = qs[: args.limit]
    if not qs:
        raise AqaError(f"{path}: no questions left after --type/--limit")
    return path, qs


def cmd_eval_run(args: argparse.Namespace) -> int:
    from eval.report import fmt, metric_label
    from eval.runner import (
        RunConfig,
        build_engine,
        default_run_dir,
        eval_data_dir,
        prepare_corpus,
        run_eval,
    )

    set_path, qs = _questions(args)
    corpus = _corpus(args)
    over = _overrides(args)
    if args.no_ingest and args.data_dir:
        data_dir = Path(args.data_dir)
    else:
        from rag.config import Settings
        from rag.embed import embed_model_name

        data_dir = eval_data_dir(_base_data_dir(args), corpus, embed_model_name(Settings(**over)))
    over["data_dir"] = data_dir
    engine = build_engine(over)
    if not args.no_ingest:
        rep = prepare_corpus(engine, corpus, progress=True)
        print(f"Index {data_dir}: {rep.papers_total} papers "
              f"({rep.papers_added} added, {rep.papers_pruned} pruned)", file=sys.stderr)
    label = args.label or ("retrieval" if args.no_llm else engine.settings.retrieval.retriever)
    out = Path(args.out) if args.out else default_run_dir(label)
    cfg = RunConfig(set_path=set_path, use_llm=not args.no_llm, label=label, overrides=over,
                    extra_corpus=[str(p) for p in args.extra_corpus or []], seed=args.seed)
    summary = run_eval(engine, qs, cfg, out)
    k = summary["k"]
    print(f"\n{summary['n_questions']} questions -> {out}")
    for name, v in summary["overall"].items():
        ci = v["ci95"]
        ci_s = f"  [{fmt(ci[0])}, {fmt(ci[1])}]" if ci else ""
        print(f"  {metric_label(name, k):24s} {fmt(v['mean'])}{ci_s}  (n={v['n']})")
    lat = summary["latency_ms"]
    for key in ("search_ms", "ttft_ms", "total_ms"):
        if lat[key]["n"]:
            print(f"  {key:24s} p50 {fmt(lat[key]['p50'], 1)}  p95 {fmt(lat[key]['p95'], 1)}")
    print(f"Report: {out / 'report.md'}")
    return 0


def cmd_eval_compare(args: argparse.Namespace) -> int:
    from eval.compare import compare_runs, render_comparison

    c = compare_runs(args.run_a, args.run_b)
    if args.json:
        print(json.dumps(c, indent=2))
    else:
        print(render_comparison(c))
    if args.out:
        Path(args.out).write_text(render_comparison(c), encoding="utf-8")
    return 0


def cmd_eval_rescore(args: argparse.Namespace) -> int:
    from eval.runner import rescore_run

    for d in args.runs:
        s = rescore_run(d)
        print(f"{d}: pass {s['overall']['pass']['mean']:.3f} (report rewritten)")
    return 0


def cmd_eval_replay(args: argparse.Namespace) -> int:
    """Re-score the evidence check on the recorded choices of tune runs (``eval.replay``)."""
    from eval.replay import load_variants, read_results, recorded, replay, report
    from eval.runner import build_engine, eval_data_dir, prepare_corpus
    from rag.config import Settings
    from rag.embed import embed_model_name
    from rag.errors import AqaError

    if bool(args.runs) == args.live_choice:
        raise AqaError("give run folders, or --live-choice (the model chooses afresh), not both")
    choices: dict[str, dict[str, Any]] | None = None if args.live_choice else {}
    for d in args.runs:
        choices.update(recorded(read_results(d)))
    _, qs = _questions(args)
    qs = [q for q in qs if choices is None or q.id in choices]
    held = [q for q in qs if getattr(q, "split", None) == "heldout"]
    qs = [q for q in qs if getattr(q, "split", None) != "heldout"]
    if held:  # never tune on heldout: its questions are not replayed
        print(f"{len(held)} heldout questions skipped", file=sys.stderr)
    corpus = _corpus(args)
    over = _overrides(args)
    over["data_dir"] = eval_data_dir(_base_data_dir(args), corpus, embed_model_name(Settings(**over)))
    engine = build_engine(over)
    prepare_corpus(engine, corpus)
    variants = load_variants(Path(args.variants) if args.variants else None)
    rows = replay(engine, qs, choices, variants, progress=True)
    if args.out:
        Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    print(report(rows, variants))
    return 0


def cmd_eval_signals(args: argparse.Namespace) -> int:
    """Each question's decision signals, up to its decision (``eval.decision_fit``)."""
    from eval.decision_fit import collect
    from eval.runner import build_engine, eval_data_dir, prepare_corpus
    from rag.config import Settings
    from rag.embed import embed_model_name
    from rag.errors import AqaError

    _, qs = _questions(args)
    if any(getattr(q, "split", None) == "heldout" for q in qs) and not args.allow_heldout:
        raise AqaError("signals of heldout questions are for reporting only: pass --split tune, "
                       "or --allow-heldout to collect them without fitting on them")
    corpus = _corpus(args)
    over = _overrides(args)
    over["data_dir"] = eval_data_dir(_base_data_dir(args), corpus, embed_model_name(Settings(**over)))
    engine = build_engine(over)
    prepare_corpus(engine, corpus)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = collect(engine, qs, out)
    print(f"{len(rows)} rows in {out}")
    return 0


def cmd_eval_fit_decision(args: argparse.Namespace) -> int:
    """Fit the calibrated decision on tune signal rows; print its curve."""
    from eval.decision_fit import curve_table, fit_rows, read_rows
    from rag.decision import DECISION_FILE

    data = fit_rows(read_rows([Path(p) for p in args.signals]), seed=args.seed)
    out = Path(args.out) if args.out else DECISION_FILE
    out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"fit on {data['n']} tune questions ({data['positives']} answerable), C={data['C']}; "
          f"out-of-fold ROC AUC {data['oof_auc']:.3f}")
    print(curve_table(data))
    print(f"suggested answer.decision_answer_at: {data['suggested_answer_at']} "
          f"(most unanswerable declined with ≤ 5% answerable declined, out of fold)")
    w = sorted(data["coef"].items(), key=lambda kv: -abs(kv[1]))
    print("coefficients (standardised): " + ", ".join(f"{n} {v:+.2f}" for n, v in w))
    print(f"wrote {out}")
    return 0


def cmd_eval_ablate(args: argparse.Namespace) -> int:
    from eval.ablate import run_ablation
    from eval.runner import default_run_dir

    set_path, qs = _questions(args)
    out = Path(args.out) if args.out else default_run_dir("ablate")
    res = run_ablation(
        qs, set_path=set_path, out_dir=out, base_overrides=_overrides(args),
        data_root=_base_data_dir(args), corpus=_corpus(args), configs=args.config,
        use_llm=args.llm,
    )
    print(res["table"])
    print(f"Written: {out / 'ablation.md'}, {out / 'ablation.json'}, one run folder per config")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from eval.bench import run_bench

    run_bench(
        args.what, size=args.size, out=Path(args.out) if args.out else None,
        base_overrides=_overrides(args), data_root=_base_data_dir(args), set_path=args.set,
        run_dir=args.run,
        variants=[v.strip() for v in args.variants.split(",")] if args.variants else None,
    )
    return 0


def register(subparsers: Any) -> None:
    """Add ``eval`` (run/compare/ablate) and ``bench`` to an argparse subparsers object."""
    ev = subparsers.add_parser("eval", help="offline answer-quality evaluation")
    esub = ev.add_subparsers(dest="eval_command", required=True)

    r = esub.add_parser("run", help="run a question set; writes a report folder")
    r.add_argument("--set", help="question set JSONL (default: eval/questions.jsonl)")
    r.add_argument("--out", help="run folder (default: eval/runs/<time>-<label>)")
    r.add_argument("--label", help="name of the run in its folder and report")
    r.add_argument("--no-llm", action="store_true", help="retrieval metrics only (no answers)")
    r.add_argument("--limit", type=int, help="only the first N questions")
    r.add_argument("--per-type", type=int, help="only the first N questions of each type")
    r.add_argument("--sample-seed", type=int,
                   help="with --per-type: a seeded random N of each type instead of the first N")
    r.add_argument("--type", action="append", help="only this question type (repeatable)")
    r.add_argument("--split", choices=["tune", "heldout"],
                   help="only this split of the set (heldout: report only, never tune on it)")
    r.add_argument("--corpus", nargs="+", help="corpus paths (default: the bundled corpus)")
    r.add_argument("--extra-corpus", nargs="+", help="distractor corpus paths added to the index")
    r.add_argument("--no-ingest", action="store_true",
                   help="evaluate the index in --data-dir itself, as it is (your own "
                   "corpus and question set); nothing is ingested or pruned")
    r.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    _settings_args(r)
    r.set_defaults(fn=cmd_eval_run)

    c = esub.add_parser("compare", help="metric deltas and flipped questions of two runs")
    c.add_argument("run_a")
    c.add_argument("run_b")
    c.add_argument("--json", action="store_true")
    c.add_argument("--out", help="also write the Markdown comparison here")
    c.set_defaults(fn=cmd_eval_compare)

    rs = esub.add_parser("rescore", help="recompute a run's metrics from its stored results")
    rs.add_argument("runs", nargs="+")
    rs.set_defaults(fn=cmd_eval_rescore)

    rp = esub.add_parser("replay", help="re-score the evidence check on tune runs' recorded "
                         "evidence choices (no choice, no synthesis: ~8 s a question)")
    rp.add_argument("runs", nargs="*", help="run folders of `aqa eval run`")
    rp.add_argument("--live-choice", action="store_true",
                    help="no run: the model chooses the evidence afresh (~10 s a question)")
    rp.add_argument("--type", action="append", help="only this question type (repeatable)")
    rp.add_argument("--per-type", type=int, help="only N questions of each type")
    rp.add_argument("--sample-seed", type=int, help="with --per-type: a seeded random N")
    rp.add_argument("--variants", help='JSON {"name": {"system": ..., "user": ...}}: check '
                    "wordings to score beside the engine's own")
    rp.add_argument("--out", help="write one JSON row per question here")
    rp.add_argument("--set", help="question set JSONL the runs used (default: eval/questions.jsonl)")
    rp.add_argument("--corpus", nargs="+", help="corpus paths the runs used (default: the bundled corpus)")
    rp.add_argument("--extra-corpus", nargs="+", help="distractor corpus paths the runs used")
    _settings_args(rp)
    rp.set_defaults(fn=cmd_eval_replay)

    sg = esub.add_parser("signals", help="each question's decision signals, stopping before the "
                         "synthesis (~10 s a question); resumes an interrupted --out")
    sg.add_argument("--out", required=True, help="JSONL file of rows (appended; resumed)")
    sg.add_argument("--set", help="question set JSONL (default: eval/questions.jsonl)")
    sg.add_argument("--split", choices=["tune", "heldout"], help="only this split")
    sg.add_argument("--allow-heldout", action="store_true",
                    help="collect heldout rows too (reporting only; fit-decision refuses them)")
    sg.add_argument("--type", action="append", help="only this question type (repeatable)")
    sg.add_argument("--per-type", type=int, help="only N questions of each type")
    sg.add_argument("--sample-seed", type=int, help="with --per-type: a seeded random N")
    sg.add_argument("--limit", type=int, help="only the first N questions")
    sg.add_argument("--corpus", nargs="+", help="corpus paths (default: the bundled corpus)")
    sg.add_argument("--extra-corpus", nargs="+", help="distractor corpus paths added to the index")
    _settings_args(sg)
    sg.set_defaults(fn=cmd_eval_signals)

    fd = esub.add_parser("fit-decision", help="fit the calibrated answer decision on tune "
                         "signal rows; prints the risk-coverage curve, writes rag/decision.json")
    fd.add_argument("signals", nargs="+", help="JSONL files of `aqa eval signals`")
    fd.add_argument("--out", help="where to write the coefficients (default: rag/decision.json)")
    fd.add_argument("--seed", type=int, default=0, help="cross-validation seed")
    fd.set_defaults(fn=cmd_eval_fit_decision)

    a = esub.add_parser("ablate", help="BM25/dense/hybrid, relevance floor, chunk sizes")
    a.add_argument("--set", help="question set JSONL (default: eval/questions.jsonl)")
    a.add_argument("--out", help="output folder (default: eval/runs/<time>-ablate)")
    a.add_argument("--config", action="append", help="only this configuration (repeatable)")
    a.add_argument("--llm", action="store_true", help="also generate answers (slow)")
    a.add_argument("--limit", type=int)
    a.add_argument("--per-type", type=int)
    a.add_argument("--type", action="append")
    a.add_argument("--corpus", nargs="+")
    a.add_argument("--extra-corpus", nargs="+")
    _settings_args(a, retriever=False)
    a.set_defaults(fn=cmd_eval_ablate)

    b = subparsers.add_parser("bench", help="speed benchmarks (prints figures, writes JSON)")
    b.add_argument("what", nargs="?", default="all",
                   choices=["ingest", "search", "llm", "baseline", "all"])
    b.add_argument("--size", choices=["tiny", "mid", "full"], default="full",
                   help="full: 57 / ~3,300 papers / 100k chunks (~30 min on 2 cores the first "
                   "time, indexes are cached); mid: ~1,000 papers / 20k chunks (ingest in a "
                   "few minutes); tiny: a smoke run of seconds")
    b.add_argument("--variants", help="ingest variants, comma-separated (default: all of "
                   "minilm, minilm-onnx, minilm-onnx-int8, wordllama); the raw "
                   "sentence-transformers encode is measured either way")
    b.add_argument("--out", help="folder for bench.json (default: eval/runs/<time>-bench-<size>)")
    b.add_argument("--set", help="question set for search/baseline queries")
    b.add_argument("--run", help="an eval run folder (with LLM) whose citation precision "
                   "the baseline section compares against")
    _settings_args(b, retriever=False,
                   data_help="bench indexes and synthetic corpora go to <data-dir>/bench")
    b.set_defaults(fn=cmd_bench)


def main(argv: list[str] | None = None) -> int:
    from rag.config import setup_offline_env
    from rag.errors import AqaError

    setup_offline_env()  # offline-safe environment before anything else loads

    p = argparse.ArgumentParser(prog="python -m eval.cli")
    register(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(argv)
    try:
        return int(args.fn(args) or 0)
    except AqaError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
