"""Hybrid retrieval on the bundled corpus with the real MiniLM: known
questions, phrased in other words than the abstracts, must find their paper."""

from __future__ import annotations

import pytest

from rag.types import Filters

pytestmark = pytest.mark.slow

# (question in other words, a phrase only the gold abstract contains)
KNOWN = [
    ("a watchdog agent that checks another agent's actions against rules taken from policy documents",
     "ShieldAgent"),
    ("theory for how image transformations used in self-supervised learning affect generalization",
     "augmentation-aware error bound"),
]


@pytest.mark.parametrize("question,marker", KNOWN)
def test_known_questions_find_their_paper(real_engine, question, marker):
    hits = real_engine.search(question, k=5)
    assert any(marker in h.paper.abstract for h in hits[:3]), [h.paper.title for h in hits]


def test_each_paper_appears_once_with_best_passages(real_engine):
    hits = real_engine.search("large language model agents", k=10)
    ids = [h.paper.paper_id for h in hits]
    assert len(ids) == len(set(ids)) == 10
    assert [h.rank for h in hits] == list(range(1, 11))
    assert all(h.passages and h.passages[0].text in h.paper.abstract for h in hits)
    assert hits == sorted(hits, key=lambda h: -h.score)


def test_modes_and_filters(real_engine):
    q = "ShieldAgent-Bench 3K safety-related pairs"
    for mode in ("bm25", "dense", "hybrid"):
        assert real_engine.search(q, k=3, mode=mode)[0].paper.title.startswith("ShieldAgent"), mode
    only = real_engine.papers()[0].paper_id
    hits = real_engine.search(q, k=5, filters=Filters(paper_ids=[only]))
    assert [h.paper.paper_id for h in hits] == [only]
    assert real_engine.search(q, k=5, filters=Filters(sources=["nope"])) == []
    assert real_engine.search(q, k=5, filters=Filters(years=[2025], venues=["ICML"]))
