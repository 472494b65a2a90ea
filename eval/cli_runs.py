"""The ``aqa eval`` run commands: ``run`` (a question set -> a report
folder), ``compare`` (two runs), ``rescore`` (a run's metrics recomputed) and
``ablate`` (retrieval configurations side by side); their handlers and
parsers. ``eval.cli`` registers them (``ablate`` after the decision commands,
as ``aqa eval --help`` has always listed them).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from eval.cli_args import _base_data_dir, _corpus, _overrides, _questions, _settings_args


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



def cmd_eval_merge(args: argparse.Namespace) -> int:
    from eval.runner import merge_runs

    s = merge_runs(args.base, args.partial, args.out)
    m = s["run"]["merged"]
    print(f"{args.out}: {m['replaced']} of {m['of']} questions from {args.partial}; "
          f"pass {s['overall']['pass']['mean']:.3f}")
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



def register(esub: Any) -> None:
    """Add ``run``, ``compare`` and ``rescore`` to the ``aqa eval`` subparsers."""
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

    mg = esub.add_parser("merge", help="a run's questions, with those a partial run also "
                         "ran taken from it (after a change that only some questions see)")
    mg.add_argument("base")
    mg.add_argument("partial")
    mg.add_argument("--out", required=True, help="folder for the merged run")
    mg.set_defaults(fn=cmd_eval_merge)

    rs = esub.add_parser("rescore", help="recompute a run's metrics from its stored results")
    rs.add_argument("runs", nargs="+")
    rs.set_defaults(fn=cmd_eval_rescore)


def register_ablate(esub: Any) -> None:
    """Add ``ablate`` to the ``aqa eval`` subparsers."""
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
