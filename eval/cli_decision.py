"""The ``aqa eval`` decision-tuning commands: ``replay`` (the evidence check
re-scored on recorded choices), ``signals`` (each question's decision
signals), ``rescore-check`` (the check asked again in another wording on
stored rows), ``fit-decision`` (the calibrated decision fitted on them, written
to rag/answer/decision.json) and ``fit-papers`` (the per-paper citation model,
written to rag/answer/paper_relevance.json); their handlers and parsers. Tune questions only:
heldout ones are skipped or refused.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from eval.cli_args import _base_data_dir, _corpus, _overrides, _questions, _settings_args


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


def cmd_eval_rescore_check(args: argparse.Namespace) -> int:
    """The check asked again, in another wording, on signal rows' stored view."""
    from eval.decision_fit import read_rows, rescore_rows
    from rag.config import Settings
    from rag.config_sections import prompt_pair_problem
    from rag.errors import AqaError
    from rag.llm import make_llm

    if problem := prompt_pair_problem(args.prompt):
        raise AqaError(f"--prompt {args.prompt}: {problem}")
    rows = read_rows([Path(p) for p in args.signals])
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    model = make_llm(Settings(**_overrides(args)))
    kept, skipped = rescore_rows(model, rows, args.prompt, out)
    print(f"{len(kept)} rows in {out}" + (f"; {skipped} rows without the check's view skipped "
                                          "(collect them again with `aqa eval signals`)"
                                          if skipped else ""))
    return 0


def _print_coefficients(data: dict[str, Any], out: Path) -> None:
    """A fit's standardised coefficients, largest first, and where they went."""
    w = sorted(data["coef"].items(), key=lambda kv: -abs(kv[1]))
    print("coefficients (standardised): " + ", ".join(f"{n} {v:+.2f}" for n, v in w))
    print(f"wrote {out}")


def cmd_eval_fit_decision(args: argparse.Namespace) -> int:
    """Fit the calibrated decision on tune signal rows; print its curve."""
    from eval.decision_fit import curve_table, fit_rows, read_rows
    from rag.answer.decision import DECISION_FILE

    _, qs = _questions(args)
    data = fit_rows(read_rows([Path(p) for p in args.signals]), seed=args.seed,
                    signed=not args.free_signs, drop=args.drop or (), questions=qs)
    out = Path(args.out) if args.out else DECISION_FILE
    out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"fit on {data['n']} tune questions ({data['positives']} answerable), C={data['C']}; "
          f"out-of-fold ROC AUC {data['oof_auc']:.3f}")
    print(curve_table(data))
    print(f"suggested answer.decision_answer_at: {data['suggested_answer_at']} "
          f"(most unanswerable declined with ≤ 5% answerable declined, out of fold)")
    _print_coefficients(data, out)
    return 0


def cmd_eval_fit_papers(args: argparse.Namespace) -> int:
    """Fit the per-paper citation model on tune questions (``eval.paper_fit``)."""
    from eval.paper_fit import curve_table, fit_papers, paper_rows
    from eval.runner import build_engine, eval_data_dir, prepare_corpus
    from rag.answer.paper_relevance import PAPER_MODEL_FILE
    from rag.config import Settings
    from rag.embed import embed_model_name

    if args.from_rows:
        # Rows recorded by earlier runs (--rows): refit without running the model.
        rows = [json.loads(line) for f in args.from_rows
                for line in Path(f).read_text(encoding="utf-8").splitlines() if line.strip()]
    else:
        _, qs = _questions(args)
        qs = [q for q in qs if getattr(q, "split", "tune") == "tune"]  # never fit on heldout
        corpus = _corpus(args)
        over = _overrides(args)
        over["data_dir"] = eval_data_dir(_base_data_dir(args), corpus, embed_model_name(Settings(**over)))
        engine = build_engine(over)
        prepare_corpus(engine, corpus)
        rows = paper_rows(engine, qs)
    if args.rows and not args.from_rows:
        Path(args.rows).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    data = fit_papers(rows, seed=args.seed)
    out = Path(args.out) if args.out else PAPER_MODEL_FILE
    out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"fit on {data['n']} candidate papers of {data['questions']} tune questions "
          f"({data['positives']} gold), C={data['C']}; out-of-fold ROC AUC {data['oof_auc']:.3f}")
    print(curve_table(data))
    print(f"suggested answer.paper_cite_at: {data['suggested_cite_at']} (best F0.5 of the papers "
          "cited, out of fold)")
    if one := data.get("one_paper"):
        print(f"\"which paper\" questions (not fit on): {one['questions']}, {one['several_papers']} with "
              f"evidence from several papers; the cited paper is gold for {one['most_probable']:.3f} "
              f"citing the most probable, {one['top_ranked']:.3f} the top-ranked; citing all: "
              f"precision {one['all_chosen_precision']:.3f}, recall {one['all_chosen_recall']:.3f}")
    _print_coefficients(data, out)
    return 0


def register(esub: Any) -> None:
    """Add ``replay``, ``signals``, ``rescore-check``, ``fit-decision`` and
    ``fit-papers`` to the ``aqa eval`` subparsers."""
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

    rs = esub.add_parser("rescore-check", help="ask the check again in another wording on the "
                         "sentences signal rows' check read (~4 s a row); writes rows to fit on")
    rs.add_argument("signals", nargs="+", help="JSONL files of `aqa eval signals`")
    rs.add_argument("--out", required=True, help="JSONL file of rescored rows (appended; resumed)")
    rs.add_argument("--prompt", default="check_strict",
                    help="prompt pair prompts/NAME_system.txt and NAME_user.txt (default: check_strict)")
    _settings_args(rs)
    rs.set_defaults(fn=cmd_eval_rescore_check)

    fd = esub.add_parser("fit-decision", help="fit the calibrated answer decision on tune "
                         "signal rows; prints the risk-coverage curve, writes rag/answer/decision.json")
    fd.add_argument("signals", nargs="+", help="JSONL files of `aqa eval signals`")
    fd.add_argument("--out", help="where to write the coefficients (default: rag/answer/decision.json)")
    fd.add_argument("--seed", type=int, default=0, help="cross-validation seed")
    fd.add_argument("--free-signs", action="store_true",
                    help="let every coefficient take either sign (default: rag.answer.decision.SIGNS)")
    fd.add_argument("--drop", action="append", help="leave this signal out of the fit (repeatable)")
    fd.add_argument("--set", help="question set the rows come from, to weigh a sample by "
                    "stratum (default: eval/questions.jsonl)")
    fd.set_defaults(fn=cmd_eval_fit_decision)

    fp = esub.add_parser("fit-papers", help="fit the per-paper citation model on tune questions' "
                         "gold papers (~30 s a question, the real answer path up to its citations); prints its precision/recall "
                         "curve, writes rag/answer/paper_relevance.json")
    fp.add_argument("--out", help="where to write the coefficients (default: rag/answer/paper_relevance.json)")
    fp.add_argument("--rows", help="also write the candidate-paper rows here (JSONL)")
    fp.add_argument("--from-rows", nargs="+", metavar="FILE",
                    help="fit on rows written by earlier runs (--rows) instead of running the model")
    fp.add_argument("--seed", type=int, default=0, help="cross-validation seed")
    fp.add_argument("--set", help="question set JSONL (default: eval/questions.jsonl)")
    fp.add_argument("--type", action="append", help="only this question type (repeatable)")
    fp.add_argument("--corpus", nargs="+", help="corpus paths (default: the bundled corpus)")
    fp.add_argument("--extra-corpus", nargs="+", help="distractor corpus paths added to the index")
    _settings_args(fp)
    fp.set_defaults(fn=cmd_eval_fit_papers)
