"""Fitting the per-paper citation model (``aqa eval fit-papers``).

For each tune question that asks for papers ("which papers…", the only
questions the model judges) with gold papers, asked as is (no conversation,
no pinned papers), the real answer path runs up to its citations, and each
candidate paper becomes a row: the ``rag.answer.paper_relevance.PaperSignals`` the
trace holds (retrieval, the model's choice, its check of the paper's own
sentences) and whether it is a gold paper. ~30 s a question on 2 cores.
``fit`` reuses ``rag.answer.decision.fit`` (L2 logistic regression, C by
cross-validation) and reports the out-of-fold precision/recall curve over
cut-offs, from which ``AQA_PAPER_CITE_AT`` is chosen.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eval.runner import _paper_id, as_indexed

# The suggested operating point maximises F-beta with precision weighted
# this many times recall: a wrongly cited paper misleads, a missed one is
# only incomplete.
PRECISION_WEIGHT = 2.0


def paper_rows(engine: Any, questions: Sequence[Any], *, progress: bool = True
               ) -> list[dict[str, Any]]:
    """One row per candidate paper of each eligible question, with the
    ``PaperSignals`` the real answer path computed (its ``paper_relevance``
    trace: the model's evidence choice and its check of each paper's own
    sentences); the stream is left before the synthesis. A question the
    decision does not answer has no rows (the paper model never sees it)."""
    import sys

    from rag.answer import reading

    rows: list[dict[str, Any]] = []
    for q in questions:
        q = as_indexed(engine, q)
        if (not q.answerable or not q.gold or getattr(q, "history", None)
                or getattr(q, "pinned", None) or not reading.asks_for_papers(q.question)):
            continue  # the model judges papers only for "which papers…" questions
        gold = {_paper_id(engine, g) for g in q.gold}
        answer = None
        for ev in engine.ask_stream(q.question):
            if ev.answer is not None:
                answer = ev.answer
                if ev.kind in ("evidence", "answer"):
                    break
        trace = next((r for r in (answer.rules if answer else []) if r.name == "paper_relevance"), None)
        papers = trace.data["papers"] if trace else []
        for row in papers:
            rows.append({"id": q.id, "type": q.type, "split": getattr(q, "split", "tune"),
                         "paper_id": row["paper_id"], "gold": row["paper_id"] in gold,
                         "signals": row["signals"]})
        if progress:
            print(f"{q.id}: {len(papers)} papers", file=sys.stderr, flush=True)
    return rows


def pr_curve(p: Sequence[float], labels: Sequence[int], steps: int = 21) -> list[dict[str, float]]:
    """Per cut-off: the share of cited papers that are gold (precision) and
    the share of gold candidate papers cited (recall)."""
    out = []
    for i in range(steps):
        t = i / (steps - 1)
        cited = [y for pi, y in zip(p, labels, strict=True) if pi >= t]
        tp, pos = sum(cited), sum(labels)
        out.append({"cutoff": round(t, 3), "precision": round(tp / max(1, len(cited)), 3),
                    "recall": round(tp / max(1, pos), 3)})
    return out


def fit_papers(rows: list[dict[str, Any]], *, seed: int = 0) -> dict[str, Any]:
    """The fitted per-paper model (JSON data) with its curve and suggested cut-off."""
    from rag.answer.decision import auc, fit
    from rag.answer.paper_relevance import PaperSignals
    from rag.errors import AqaError

    if any(r.get("split") == "heldout" for r in rows):
        raise AqaError("paper rows include heldout questions: fit on tune only")
    labels = [int(r["gold"]) for r in rows]
    if len(set(labels)) < 2:
        raise AqaError("need both gold and other candidate papers to fit the paper model")
    data, oof = fit([r["signals"] for r in rows], labels, seed=seed, names=PaperSignals.names())
    pts = pr_curve(oof, labels)
    b2 = PRECISION_WEIGHT ** -2  # F-beta with beta = 1/PRECISION_WEIGHT

    def f_beta(c: dict[str, float]) -> float:
        p, r = c["precision"], c["recall"]
        return (1 + b2) * p * r / max(1e-9, b2 * p + r)

    best = max(pts, key=f_beta)
    data.update(oof_auc=round(auc(oof, labels), 4), curve=pts, suggested_cite_at=best["cutoff"],
                questions=len({r["id"] for r in rows}))
    return data


def curve_table(data: dict[str, Any]) -> str:
    lines = ["| cut-off | precision | recall |", "|---|---|---|"]
    lines += [f"| {c['cutoff']:.2f} | {c['precision']:.3f} | {c['recall']:.3f} |" for c in data["curve"]]
    return "\n".join(lines)
