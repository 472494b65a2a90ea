"""``aqa eval ablate``: one command that runs the question set under several
engine configurations and tabulates them side by side.

Configurations (Settings overrides; each gets its own data dir under
``<data_dir>/ablate/<name>`` so chunk sizes never share an index):

- ``hybrid``: the defaults;
- ``dense`` / ``bm25``: one retriever only;
- ``hybrid-no-floor``: relevance_floor = 0 (never decline for distance);
- ``chunk-64`` / ``chunk-256``: other chunk sizes (overlap scaled to ~19%).

Retrieval-only by default (the LLM on 2 CPU cores would make six full runs
take hours); the relevance floor is still measured there through
``floor_correct_decline`` / ``floor_wrong_decline``, the declines ask() makes
before calling the LLM. ``--llm`` adds the answer metrics.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eval.bench import copy_sqlite
from eval.dataset import Question
from eval.report import fmt, metric_label
from eval.runner import RunConfig, build_engine, prepare_corpus, run_eval

CONFIGS: dict[str, dict[str, Any]] = {
    "hybrid": {},
    "dense": {"retriever": "dense"},
    "bm25": {"retriever": "bm25"},
    "hybrid-no-floor": {"relevance_floor": 0.0},
    "hybrid-no-centroid": {"centroid_weight": 0.0},
    "chunk-64": {"chunk_tokens": 64, "chunk_overlap": 12},
    "chunk-256": {"chunk_tokens": 256, "chunk_overlap": 48},
}
TABLE_METRICS: tuple[str, ...] = (
    "hit@1", "hit@k", "recall@k", "mrr", "ndcg@k", "floor_correct_decline",
    "floor_wrong_decline",
)
LLM_METRICS: tuple[str, ...] = (
    "citation_precision", "citation_recall", "must_include_recall", "support_rate",
    "correct_decline", "wrong_decline", "pass",
)


def run_ablation(
    questions: Sequence[Question],
    *,
    set_path: Path | None,
    out_dir: Path,
    base_overrides: dict[str, Any],
    data_root: Path,
    corpus: Sequence[Path | str],
    configs: Sequence[str] | None = None,
    use_llm: bool = False,
    llm: Any = None,
    embed_model: Any = None,
) -> dict[str, Any]:
    """Run every configuration; returns and writes ablation.json / ablation.md."""
    names = list(configs or CONFIGS)
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        raise ValueError(f"unknown ablation config(s) {unknown}; choose from {list(CONFIGS)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    if embed_model is None:  # load the embedding model once for all configs
        from rag.config import Settings
        from rag.embed import make_embed_model

        embed_model = make_embed_model(Settings(**base_overrides))
    donor: Path | None = None
    for name in names:
        data_dir = data_root / "ablate" / name
        over = {**base_overrides, **CONFIGS[name], "data_dir": data_dir}
        print(f"== ablation {name}: {CONFIGS[name] or 'defaults'}", file=sys.stderr, flush=True)
        cache = data_dir / "embed_cache.sqlite"
        if donor is not None and not cache.exists():
            # Same model, mostly the same chunk texts: reuse the embeddings.
            copy_sqlite(donor, cache)
        donor = donor or cache
        engine = build_engine(over, llm=llm, embed_model=embed_model)
        prepare_corpus(engine, corpus)
        cfg = RunConfig(set_path=set_path, use_llm=use_llm, label=f"ablate-{name}",
                        overrides=over)
        summary = run_eval(engine, questions, cfg, out_dir / name,
                           progress=lambda _msg: None)
        results[name] = {"overrides": CONFIGS[name], "summary": summary}
        del engine
    command = "aqa " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv else ""
    table = render_ablation(results, use_llm=use_llm, command=command)
    (out_dir / "ablation.md").write_text(table, encoding="utf-8")
    slim = {
        n: {"overrides": r["overrides"], "k": r["summary"]["k"],
            "overall": {m: v["mean"] for m, v in r["summary"]["overall"].items()},
            "search_p50_ms": r["summary"]["latency_ms"]["search_ms"]["p50"]}
        for n, r in results.items()
    }
    (out_dir / "ablation.json").write_text(
        json.dumps({"command": command, "use_llm": use_llm, "configs": slim}, indent=2) + "\n",
        encoding="utf-8",
    )
    return {"command": command, "configs": slim, "table": table}


def render_ablation(results: dict[str, Any], *, use_llm: bool, command: str = "") -> str:
    metrics = list(TABLE_METRICS) + (list(LLM_METRICS) if use_llm else [])
    k = next(iter(results.values()))["summary"]["k"] if results else 5
    header = ["config", "overrides"] + [metric_label(m, k) for m in metrics] + ["search p50 ms"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, r in results.items():
        s = r["summary"]
        over = ", ".join(f"{a}={b}" for a, b in r["overrides"].items()) or "defaults"
        cells = [fmt(s["overall"].get(m, {}).get("mean")) for m in metrics]
        lat = s["latency_ms"]["search_ms"]["p50"]
        lines.append(f"| {name} | {over} | " + " | ".join(cells) + f" | {fmt(lat, 1)} |")
    n = next(iter(results.values()))["summary"]["n_questions"] if results else 0
    foot = [
        "",
        f"{n} questions; retrieval metrics are paper-level means over questions with gold "
        "papers; floor_* = share of unanswerable (correct) / answerable (wrong) questions "
        "that ask() would decline before the LLM because the best dense score is under "
        "the relevance floor.",
    ]
    if command:
        foot.append(f"Command: `{command}`")
    return "\n".join(lines + foot) + "\n"
