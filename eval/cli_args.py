"""What the ``aqa eval`` / ``aqa bench`` subcommands share: the engine-settings
flags (``--top-k``, ``--retriever``, …) and the overrides they give, the base
data folder and corpus paths, and choosing the questions of a set
(``--split``, ``--type``, ``--per-type``, ``--limit``).
"""

from __future__ import annotations

import argparse
import random
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
