"""Fitting the per-paper citation model (``aqa eval fit-papers``).

For each tune question that asks for papers ("which papers…") or for one
paper ("which paper…"), the questions the model judges, with gold papers,
asked as is (no conversation, no pinned papers), the real answer path runs up
to its citations, and each candidate paper becomes a row: the ``rag.answer.paper_relevance.PaperSignals`` the
trace holds (retrieval, the model's choice, its check of the paper's own
sentences) and whether it is a gold paper. ~30 s a question on 2 cores.
``fit_papers`` reuses ``rag.answer.decision.fit`` (L2 logistic regression, C by
cross-validation) and reports, out of fold (folds by question), the precision
and recall of the papers an answer would cite at each cut-off, beside the
model's own choice; ``AQA_PAPER_CITE_AT`` is chosen from it. The model is fit
on "which papers" rows only; ``one_paper_report`` says how well it picks the
one paper of "which paper" questions (rows it never saw).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eval.runner import _paper_id, as_indexed

# The suggested operating point maximises F-beta with precision weighted
# this many times recall: a wrongly cited paper misleads, a missed one is
# only incomplete.
PRECISION_WEIGHT = 2.0
# Questions the out-of-fold curve needs (5 folds by question, each with some
# questions left out and some to train on).
MIN_QUESTIONS = 10
# What a row's question asks for (rows written before this field: papers).
PAPERS, ONE = "papers", "one paper"


def split_rows(rows: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(rows of "which papers" questions, rows of "which paper" questions)."""
    one = [r for r in rows if r.get("asks", PAPERS) == ONE]
    return [r for r in rows if r.get("asks", PAPERS) != ONE], one


def one_paper_report(rows: Sequence[dict[str, Any]], p: Sequence[float]) -> dict[str, Any]:
    """For "which paper" questions (rows: the papers the evidence came from),
    the share of questions whose cited paper is gold when citing the most
    probable one (what the answer does), the top-ranked one, or every one
    (what it did before), with precision and recall of the last."""
    by_q: dict[str, list[tuple[dict[str, Any], float]]] = {}
    for r, pi in zip(rows, p, strict=True):
        by_q.setdefault(r["id"], []).append((r, pi))
    n = len(by_q)
    most = sum(bool(max(rs, key=lambda x: x[1])[0]["gold"]) for rs in by_q.values())
    ranked = sum(bool(max(rs, key=lambda x: x[0]["signals"].get("score_ratio", 0.0))[0]["gold"])
                 for rs in by_q.values())
    cited = sum(len(rs) for rs in by_q.values())
    hit = sum(any(x[0]["gold"] for x in rs) for rs in by_q.values())
    tp = sum(bool(x[0]["gold"]) for rs in by_q.values() for x in rs)
    return {"questions": n, "several_papers": sum(len(rs) > 1 for rs in by_q.values()),
            "most_probable": round(most / max(1, n), 3), "top_ranked": round(ranked / max(1, n), 3),
            "all_chosen_precision": round(tp / max(1, cited), 3),
            "all_chosen_recall": round(hit / max(1, n), 3)}


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
        one = reading.asks_for_one_paper(q.question)
        if (not q.answerable or not q.gold or getattr(q, "history", None)
                or getattr(q, "pinned", None) or not (one or reading.asks_for_papers(q.question))):
            continue  # the model judges papers only for "which paper(s)…" questions
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
                         "asks": ONE if one else PAPERS, "signals": row["signals"]})
        if progress:
            print(f"{q.id}: {len(papers)} papers", file=sys.stderr, flush=True)
    return rows


def cited_curve(rows: Sequence[dict[str, Any]], p: Sequence[float],
                cutoffs: Sequence[float]) -> list[dict[str, float]]:
    """Precision and recall of the papers an answer would cite, per cut-off,
    as ``rag.answer.paper_relevance.select_papers`` cites them: the most probable
    chosen paper always, and every paper at the cut-off or above. The row
    ``cutoff: None`` is the model's own choice (what was cited before)."""
    by_q: dict[str, list[tuple[dict[str, Any], float]]] = {}
    for r, pi in zip(rows, p, strict=True):
        by_q.setdefault(r["id"], []).append((r, pi))
    gold = sum(bool(r["gold"]) for r in rows)

    def score(cut: float | None) -> dict[str, float]:
        tp = n = 0
        for rs in by_q.values():
            chosen = [x for x in rs if x[0]["signals"].get("chosen")]
            if cut is None:
                cited = chosen
            else:
                best = max(chosen or rs, key=lambda x: x[1])
                cited = [x for x in rs if x is best or x[1] >= cut]
            tp += sum(bool(x[0]["gold"]) for x in cited)
            n += len(cited)
        return {"cutoff": cut, "precision": round(tp / max(1, n), 3),
                "recall": round(tp / max(1, gold), 3), "cited_per_question": round(n / len(by_q), 2)}

    return [score(None)] + [score(c) for c in cutoffs]


def grouped_oof(rows: Sequence[dict[str, Any]], *, folds: int = 5, seed: int = 0) -> list[float]:
    """Out-of-fold P(answers) per row, folds by question (a question's papers
    never straddle training and scoring)."""
    import random

    from rag.answer.decision import DecisionModel, fit
    from rag.answer.paper_relevance import PaperSignals

    qids = sorted({r["id"] for r in rows})
    random.Random(seed).shuffle(qids)
    fold = {q: i % folds for i, q in enumerate(qids)}
    out = [0.0] * len(rows)
    for f in range(folds):
        train = [r for r in rows if fold[r["id"]] != f]
        data, _ = fit([r["signals"] for r in train], [int(r["gold"]) for r in train],
                      names=PaperSignals.names(), folds=3, seed=seed)
        m = DecisionModel(data["coef"], data["intercept"], data["mean"], data["scale"])
        for i, r in enumerate(rows):
            if fold[r["id"]] == f:
                out[i] = m.p_answer(PaperSignals(**r["signals"]))
    return out


def fit_papers(rows: list[dict[str, Any]], *, seed: int = 0) -> dict[str, Any]:
    """The fitted per-paper model (JSON data) with its out-of-fold curve of
    cited papers and the cut-off it suggests: the best F-beta (precision
    weighted ``PRECISION_WEIGHT`` times recall) among cut-offs that still
    cite more than one paper for some questions."""
    from rag.answer.decision import auc, fit
    from rag.answer.paper_relevance import PaperSignals
    from rag.errors import AqaError

    if any(r.get("split") == "heldout" for r in rows):
        raise AqaError("paper rows include heldout questions: fit on tune only")
    rows, one = split_rows(rows)
    labels = [int(r["gold"]) for r in rows]
    if len(set(labels)) < 2:
        raise AqaError("need both gold and other candidate papers to fit the paper model")
    n_q = len({r["id"] for r in rows})
    if n_q < MIN_QUESTIONS:
        raise AqaError(f"{n_q} question(s) with candidate papers: the fit's cross-validation "
                       f"needs at least {MIN_QUESTIONS} (rows are still written with --rows)")
    data, _ = fit([r["signals"] for r in rows], labels, seed=seed, names=PaperSignals.names())
    oof = grouped_oof(rows, seed=seed)
    pts = cited_curve(rows, oof, [i / 20 for i in range(2, 19)])
    b2 = PRECISION_WEIGHT ** -2

    def f_beta(c: dict[str, float]) -> float:
        p, r = c["precision"], c["recall"]
        return (1 + b2) * p * r / max(1e-9, b2 * p + r)

    # A cut-off that never cites a second paper turns "which papers" into "which paper".
    best = max((c for c in pts[1:] if c["cited_per_question"] > 1), key=f_beta, default=pts[1])
    data.update(oof_auc=round(auc(oof, labels), 4), curve=pts, suggested_cite_at=best["cutoff"],
                questions=len({r["id"] for r in rows}), fit_on=sorted({r["id"] for r in rows}))
    if one:
        from rag.answer.decision import DecisionModel

        m = DecisionModel(data["coef"], data["intercept"], data["mean"], data["scale"])
        data["one_paper"] = one_paper_report(one, [m.p_answer(PaperSignals(**r["signals"])) for r in one])
    return data


def curve_table(data: dict[str, Any]) -> str:
    lines = ["| cut-off | precision | recall | papers cited per question |", "|---|---|---|---|"]
    lines += [f"| {'model choice' if c['cutoff'] is None else format(c['cutoff'], '.2f')} | "
              f"{c['precision']:.3f} | {c['recall']:.3f} | {c['cited_per_question']:.2f} |"
              for c in data["curve"]]
    return "\n".join(lines)
