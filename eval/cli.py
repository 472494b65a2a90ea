"""The ``aqa eval …`` and ``aqa bench …`` subcommands.

The ``aqa`` entry module (``aqa_cli``) calls ``register(subparsers)``; every
handler is stored as ``fn`` and returns an exit code. Also runnable alone: ``python -m eval.cli``.
This module owns the ``eval`` group, ``bench`` and ``main``; the subcommands are
``eval.cli_runs`` (run, compare, rescore, ablate) and ``eval.cli_decision``
(replay, signals, fit-decision), their shared options ``eval.cli_args``.

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
import sys
from pathlib import Path
from typing import Any

from eval import cli_decision, cli_runs
from eval.cli_args import _base_data_dir, _overrides, _settings_args, per_type
from eval.cli_decision import cmd_eval_fit_decision, cmd_eval_replay, cmd_eval_signals
from eval.cli_runs import cmd_eval_ablate, cmd_eval_compare, cmd_eval_rescore, cmd_eval_run

__all__ = ["cmd_bench", "cmd_eval_ablate", "cmd_eval_compare", "cmd_eval_fit_decision",
           "cmd_eval_replay", "cmd_eval_rescore", "cmd_eval_run", "cmd_eval_signals", "main",
           "per_type", "register"]


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

    cli_runs.register(esub)
    cli_decision.register(esub)
    cli_runs.register_ablate(esub)

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
