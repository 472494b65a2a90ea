"""Eval metrics: pure, deterministic functions over plain values.

This module owns every number the eval reports: paper-level retrieval metrics
(hit@k, recall@k, MRR, nDCG@k), citation precision/recall, must-include
recall, sentence support rate, decline rates, latency percentiles, seeded
bootstrap confidence intervals and the aggregation of per-question metrics
into a summary. It imports nothing from the engine, so it is unit-tested on
hand-made cases and can re-score stored ``results.jsonl`` files. The
retrieval metrics live in ``eval.metrics_retrieval`` and the citation and
answer-content metrics in ``eval.metrics_answer`` (all re-exported here); this
module keeps the aggregation and the scoring of one question.

Conventions:
- ``None`` means "not applicable" (e.g. retrieval metrics of a question with
  no gold papers); means skip ``None`` values and report how many counted.
- Relevance is binary and paper-level: a ranked list is first mapped to
  "which gold entry (if any) does this paper match", and each gold entry
  counts once, at its best rank (a paper listed twice cannot score twice).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from eval.metrics_answer import (
    CitedPaper,
    citation_precision,
    citation_recall,
    cited_supported,
    claimed_specifics,
    fabricated_sentences,
    fabrication_rate,
    includes,
    must_include_recall,
    normalize_text,
    support_rate,
)
from eval.metrics_retrieval import (
    GoldRef,
    ProvLike,
    first_gold_rank,
    gold_index,
    hit_at_k,
    ndcg_at_k,
    path_matches,
    recall_at_k,
    reciprocal_rank,
    relevance_vector,
    retrieval_metrics,
)

__all__ = [
    "GoldRef",
    "ProvLike",
    "path_matches",
    "gold_index",
    "relevance_vector",
    "hit_at_k",
    "recall_at_k",
    "reciprocal_rank",
    "ndcg_at_k",
    "first_gold_rank",
    "retrieval_metrics",
    "CitedPaper",
    "citation_precision",
    "citation_recall",
    "cited_supported",
    "normalize_text",
    "includes",
    "must_include_recall",
    "support_rate",
    "claimed_specifics",
    "fabricated_sentences",
    "fabrication_rate",
    "mean",
    "percentile",
    "bootstrap_ci",
    "summarize_metric",
    "summarize_latency",
    "aggregate",
    "provs_of",
    "score_question",
    "answer_passes",
]

# --- aggregation -------------------------------------------------------------


def mean(values: Iterable[float | None]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def percentile(values: Sequence[float | None], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default method), q in [0, 100]."""
    vals = sorted(float(v) for v in values if v is not None)
    if not vals:
        return None
    pos = (len(vals) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return vals[lo] + (vals[hi] - vals[lo]) * (pos - lo)


def bootstrap_ci(
    values: Sequence[float | None], *, n_boot: int = 1000, alpha: float = 0.05, seed: int = 0
) -> tuple[float, float] | None:
    """Percentile bootstrap CI of the mean; seeded, so reruns give the same
    interval. None for no values; a single value gives a zero-width interval."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return None
    rng = random.Random(seed)
    n = len(vals)
    means = sorted(sum(rng.choices(vals, k=n)) / n for _ in range(n_boot))
    lo = percentile(means, 100 * alpha / 2)
    hi = percentile(means, 100 * (1 - alpha / 2))
    assert lo is not None and hi is not None
    return lo, hi


def summarize_metric(
    values: Sequence[float | None], *, n_boot: int = 1000, seed: int = 0
) -> dict[str, Any]:
    """Mean, count and 95% bootstrap CI of one metric."""
    vals = [v for v in values if v is not None]
    ci = bootstrap_ci(vals, n_boot=n_boot, seed=seed)
    return {
        "mean": mean(vals),
        "n": len(vals),
        "ci95": list(ci) if ci else None,
    }


def summarize_latency(values: Sequence[float | None]) -> dict[str, Any]:
    vals = [v for v in values if v is not None]
    return {
        "n": len(vals),
        "mean": mean(vals),
        "p50": percentile(vals, 50),
        "p95": percentile(vals, 95),
        "max": max(vals) if vals else None,
    }


LATENCY_KEYS: tuple[str, ...] = ("retrieval_ms", "evidence_ms", "ttft_ms", "total_ms", "search_ms")


def aggregate(
    records: Sequence[Mapping[str, Any]],
    metric_names: Sequence[str],
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """Summary of per-question records (``{"id", "type", "metrics": {...},
    "timings": {...}}``): overall and per-type metric means with CIs,
    latency percentiles and decline rates."""

    def block(recs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        return {
            name: summarize_metric(
                [r["metrics"].get(name) for r in recs], n_boot=n_boot, seed=seed
            )
            for name in metric_names
        }

    types = sorted({r["type"] for r in records})
    return {
        "n_questions": len(records),
        "n_by_type": {t: sum(1 for r in records if r["type"] == t) for t in types},
        "overall": block(records),
        "by_type": {t: block([r for r in records if r["type"] == t]) for t in types},
        "latency_ms": {
            key: summarize_latency([(r.get("timings") or {}).get(key) for r in records])
            for key in LATENCY_KEYS
        },
    }


# --- one question ------------------------------------------------------------


def provs_of(paper: Mapping[str, Any]) -> list[ProvLike]:
    """(path, ordinal) pairs of a ``Paper.to_dict()``."""
    return [(p["path"], int(p["ordinal"])) for p in paper.get("provenance") or []]


def score_question(
    *,
    qtype: str,
    gold: Sequence[GoldRef],
    must_include: Sequence[str],
    ranked_papers: Sequence[Mapping[str, Any]],
    answer: Mapping[str, Any] | None,
    k: int,
    ks: Sequence[int] = (1, 3, 5, 10),
    answerable: bool | None = None,
) -> dict[str, Any]:
    """Every metric of one question from plain dicts.

    ``ranked_papers``: ``Paper.to_dict()`` of the search results, best first.
    ``answer``: ``Answer.to_dict()``, or None for a retrieval-only run.
    ``k``: the engine's top_k (the "@k" the headline numbers use).
    Returns ``{"metrics": {...}, "relevance": [...], "cited": [...]}``.
    """
    if answerable is None:
        answerable = qtype != "unanswerable"
    rel = relevance_vector([provs_of(p) for p in ranked_papers], gold)
    ks_all = sorted({*ks, k})
    m: dict[str, Any] = retrieval_metrics(rel, len(gold), ks_all)
    m["hit@k"] = m[f"hit@{k}"]
    m["recall@k"] = m[f"recall@{k}"]
    m["ndcg@k"] = m[f"ndcg@{k}"]
    m["first_gold_rank"] = first_gold_rank(rel)
    cited_out: list[dict[str, Any]] = []
    if answer is None:
        m["retrieval_pass"] = m["hit@k"]
        m["pass"] = m["hit@k"]
        return {"metrics": m, "relevance": rel, "cited": cited_out}

    sentences = answer.get("sentences") or []
    cited: list[CitedPaper] = []
    for c in answer.get("citations") or []:
        paper = c["paper"]
        gi = gold_index(provs_of(paper), gold)
        cp = CitedPaper(
            number=int(c["number"]),
            is_gold=gi is not None,
            gold_idx=gi,
            supported=cited_supported(int(c["number"]), sentences),
        )
        cited.append(cp)
        cited_out.append(
            {"number": cp.number, "paper_id": paper.get("paper_id"), "title": paper.get("title"),
             "gold": cp.is_gold, "supported": cp.supported}
        )
    declined = bool(answer.get("declined"))
    m["declined"] = 1.0 if declined else 0.0
    m["correct_decline"] = None if answerable else m["declined"]
    m["wrong_decline"] = m["declined"] if answerable else None
    # Only a gold paper counts as a correct citation: the engine's own support
    # flag is not evidence that the paper answers the question.
    m["citation_precision"] = (
        sum(c.is_gold for c in cited) / len(cited) if cited and gold else None
    )
    m["citation_supported_share"] = citation_precision(cited)
    m["citation_recall"] = citation_recall(cited, len(gold)) if answerable else None
    # Pinned and follow-up questions: declined only of the "missing detail" kind.
    m["decline_kind"] = answer.get("decline_kind")
    # A decline's text names the nearest papers; that is not content the answer gives.
    text = "" if declined else answer.get("answer") or ""
    m["must_include_recall"] = must_include_recall(text, must_include)
    m["support_rate"] = support_rate([bool(s.get("supported")) for s in sentences])
    # The fabrication audit: shown sentences stating a name or number that
    # their cited evidence lacks (0 is the target).
    fabricated = fabricated_sentences(answer)
    m["fabrication_rate"] = fabrication_rate(answer)
    m["fabricated_sentences"] = None if declined else float(len(fabricated))
    if fabricated:
        m["fabricated"] = fabricated
    m["n_citations"] = len(cited)
    m["retrieval_pass"] = m["hit@k"]
    m["pass"] = 1.0 if answer_passes(answerable, declined, m) else 0.0
    return {"metrics": m, "relevance": rel, "cited": cited_out}


def answer_passes(answerable: bool, declined: bool, m: Mapping[str, Any]) -> bool:
    """Pass/fail of one answer, for the report tables and ``eval compare``:
    an unanswerable question passes iff declined; an answerable one passes iff
    it was answered, cites at least one gold paper (when it has gold) and
    contains every must-include string."""
    if not answerable:
        return declined
    if declined:
        return False
    if m.get("citation_recall") is not None and m["citation_recall"] <= 0:
        return False
    return m.get("must_include_recall") in (None, 1.0)


# Metrics the summary aggregates, in report order.
ANSWER_METRICS: tuple[str, ...] = (
    "citation_precision", "citation_recall", "must_include_recall", "support_rate",
    "fabrication_rate", "fabricated_sentences",
    "correct_decline", "wrong_decline", "followup_resolved", "pinned_ok",
)
