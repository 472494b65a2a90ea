"""Compare: grounded cells (verbatim quotes or "not stated") and a cited synthesis."""

from __future__ import annotations

import pytest

from rag.errors import AqaError, PaperNotFoundError
from rag.llm import FakeLLM
from rag.types import ASPECTS


def test_compare_by_label_and_fuzzy_title(fake_engine):
    eng = fake_engine(llm=FakeLLM(
        "ShieldAgent enforces safety policy compliance for agent action trajectories [1]. "
        "MELON detects indirect prompt injection attacks by masking the user prompt [2]."))
    melon = next(p for p in eng.papers() if p.title == "MELON")
    assert eng.get_paper("shieldagnt").title == "ShieldAgent"  # fuzzy
    c = eng.compare(["ShieldAgent", melon.title.lower()])
    assert [p.title for p in c.papers] == ["ShieldAgent", melon.title]
    for p in c.papers:
        row = c.cells[p.paper_id]
        assert list(row) == list(ASPECTS)
        for cell in row.values():
            assert cell.quote is None or cell.quote in p.abstract
        assert row["approach"].stated and row["results"].stated
    assert [s.citations for s in c.synthesis_sentences] == [[1], [2]]
    assert all(s.supported for s in c.synthesis_sentences)


def test_compare_by_query_and_errors(fake_engine):
    eng = fake_engine(llm=FakeLLM("They differ [1][2]."))
    c = eng.compare(query="prompt injection attacks on LLM agents")
    assert 2 <= len(c.papers) <= 4
    with pytest.raises(PaperNotFoundError):
        eng.compare(["ShieldAgent", "qwertyuiop zxcv"])
    with pytest.raises(AqaError):
        eng.compare(["ShieldAgent"])


def test_synthesis_failure_keeps_the_table(fake_engine):
    from rag.errors import LLMError

    class Down:
        name = "down"

        def stream_chat(self, *a, **k):
            raise LLMError("Cannot reach the LLM server")
            yield ""

    eng = fake_engine(llm=Down())
    c = eng.compare(query="agents safety")
    assert "Synthesis unavailable" in c.synthesis and c.cells
