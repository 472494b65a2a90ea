"""Fitting the per-paper citation model (eval.paper_fit) on recorded rows."""

from __future__ import annotations

import random

import pytest

from eval.paper_fit import ONE, PAPERS, fit_papers, one_paper_report, split_rows
from rag.errors import AqaError


def _rows(n_questions: int, asks: str = PAPERS, seed: int = 0) -> list[dict]:
    """Questions with three candidate papers; the gold one holds more of the
    question's terms (with noise), the top-ranked one is gold half the time."""
    rnd = random.Random(seed)
    rows = []
    for q in range(n_questions):
        gold = rnd.randrange(3)
        for i in range(3):
            rows.append({"id": f"{asks[0]}{q}", "paper_id": f"p{i}", "gold": i == gold, "asks": asks,
                         "signals": {"coverage_ratio": (0.9 if i == gold else 0.4) + rnd.uniform(-0.3, 0.3),
                                     "score_ratio": 1.0 - 0.1 * i, "first": float(i == 0),
                                     "chosen": 1.0}})
    return rows


def test_fit_uses_which_papers_rows_and_reports_which_paper_rows_apart():
    rows = _rows(20) + _rows(8, ONE, seed=1)
    plural, one = split_rows(rows)
    assert len(plural) == 60 and len(one) == 24
    data = fit_papers(rows)
    assert data["questions"] == 20  # the one-paper questions are not fit on
    rep = data["one_paper"]
    assert rep["questions"] == 8 and rep["several_papers"] == 8
    # The fitted model picks the paper holding the question's terms: better than rank.
    assert rep["most_probable"] > rep["top_ranked"]
    assert rep["all_chosen_precision"] == pytest.approx(1 / 3, abs=0.01) and rep["all_chosen_recall"] == 1.0


def test_one_paper_report_counts_the_cited_paper():
    rows = [{"id": "a", "gold": True, "signals": {"score_ratio": 0.5}},
            {"id": "a", "gold": False, "signals": {"score_ratio": 1.0}},
            {"id": "b", "gold": True, "signals": {"score_ratio": 1.0}}]
    rep = one_paper_report(rows, [0.9, 0.2, 0.7])
    assert rep == {"questions": 2, "several_papers": 1, "most_probable": 1.0, "top_ranked": 0.5,
                   "all_chosen_precision": round(2 / 3, 3), "all_chosen_recall": 1.0}


def test_fit_refuses_heldout_rows_and_too_few_questions():
    rows = _rows(20)
    rows[0]["split"] = "heldout"
    with pytest.raises(AqaError, match="heldout"):
        fit_papers(rows)
    with pytest.raises(AqaError, match="at least"):
        fit_papers(_rows(5))
