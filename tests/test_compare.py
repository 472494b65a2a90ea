"""Compare: grounded cells (verbatim quotes or "not stated") and a cited synthesis."""

from __future__ import annotations

import re

import pytest

from rag.errors import AqaError, PaperNotFoundError

try:
    from tests.fakes import FakeLLM
except ImportError:  # older layout
    from rag.llm import FakeLLM  # type: ignore[no-redef]
from rag.compare import (
    answering_clause,
    clean_latex,
    extract_cells,
    marker_subjects,
    synthesize,
)
from rag.config import BUNDLED_CORPUS
from rag.corpus import load_corpus
from rag.text import split_sentences
from rag.types import ASPECTS, Paper, SentenceSupport


def test_compare_by_label_and_fuzzy_title(fake_engine):
    eng = fake_engine(llm=FakeLLM(
        "ShieldAgent enforces safety policy compliance for agent action trajectories [1]. "
        "MELON detects indirect prompt injection attacks by masking the user prompt [2]."))
    shield = next(p for p in eng.papers() if p.title.startswith("ShieldAgent"))
    melon = next(p for p in eng.papers() if p.title.startswith("MELON"))
    assert eng.get_paper(shield.title[:-3].lower() + "nin").paper_id == shield.paper_id  # fuzzy
    # by the paper's name: "MELON" of "MELON: Provable …", "MeCo" from its abstract
    assert eng.get_paper("MELON").paper_id == melon.paper_id
    assert eng.get_paper("meco").title.startswith("Metadata Conditioning")
    c = eng.compare([shield.paper_id, melon.title.lower()])
    assert [p.paper_id for p in c.papers] == [shield.paper_id, melon.paper_id]
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


@pytest.fixture(scope="module")
def bundled() -> list[Paper]:
    return load_corpus([BUNDLED_CORPUS]).papers


def test_clean_latex():
    assert clean_latex("an error rate of $<7$\\%") == "an error rate of <7%"
    assert clean_latex("a $2\\times$ speed-up in $\\mathcal{O}(n^{2})$") == "a 2× speed-up in O(n^2)"
    assert clean_latex("$\\alpha$-divergence") == "α-divergence"
    # Sizing commands read as nothing and accents sit on their argument:
    # "\\tilde{O}\\left(" once read "tildeOleft(" and named a paper "tildeOleft".
    assert clean_latex(r"regret $\tilde{O}\left(\sqrt{K}\right)$") == "regret Õ(√K)"
    assert clean_latex(r"$\hat f$ over $x_1, \dots, x_n$") == "f̂ over x_1, …, x_n"
    assert clean_latex("plain text") == "plain text"


def test_cells_are_whole_clauses_without_latex(bundled):
    """Every cell of every bundled paper: no truncation mark, no LaTeX, and
    its text is a contiguous piece of its (cleaned) quote."""
    for p in bundled:
        for aspect, cell in extract_cells(p).items():
            if not cell.stated:
                continue
            assert cell.quote in p.abstract
            assert "…" not in cell.text and "$" not in cell.text and "\\%" not in cell.text
            for part in split_sentences(cell.text):  # a cell may join adjacent sentences
                core = part.rstrip(".").lower()
                assert core[1:] in clean_latex(cell.quote).lower(), (p.title, aspect, cell.text)


def test_cells_are_self_contained(bundled):
    """Issue #29, item 8: no cell opens with "However," or a word referring
    back ("they", "this"); an approach cell that only names the method also
    says how it works (the next sentence, quoted with it)."""
    opens = re.compile(r"^(however|moreover|furthermore|additionally|in addition|therefore|"
                       r"thus|also|they|it|this|these|their|its|such)\b", re.IGNORECASE)
    for p in bundled:
        for aspect, cell in extract_cells(p).items():
            if cell.stated:
                assert not opens.match(cell.text), (p.title, aspect, cell.text)
    melon = next(p for p in bundled if p.title.startswith("MELON"))
    approach = extract_cells(melon)["approach"]
    assert approach.text.startswith("We present MELON") and "builds on the observation" in approach.text
    assert approach.quote in melon.abstract


def test_limitations_never_hold_the_problem_statement(bundled):
    recflow = next(p for p in bundled if "RecFlow" in p.abstract)
    cells = extract_cells(recflow)
    lim = cells["limitations"]
    assert not lim.stated or "existing models" not in lim.quote, lim.quote
    # General rule: no paper's limitations cell quotes a sentence from before its
    # own contribution ("we propose…"), nor others' shortcomings.
    contribution = re.compile(r"\bwe (propose|introduce|present|develop|design|formulate|devise)\b",
                              re.IGNORECASE)
    for p in bundled:
        lim = extract_cells(p)["limitations"]
        if not lim.stated:
            continue
        sents = [s for s in re.split(r"(?<=[.!?])\s+", p.abstract)]
        first_own = next((i for i, s in enumerate(sents) if contribution.search(s)), 0)
        idx = next(i for i, s in enumerate(sents) if lim.quote.startswith(s[:40]))
        assert idx >= first_own, (p.title, lim.quote)
        assert not re.search(r"\bexisting (\w+ )?(methods|models|approaches)\b", lim.quote,
                             re.IGNORECASE), (p.title, lim.quote)


def test_answering_clause_keeps_the_part_that_answers():
    sent = ("Extensive evaluation on the IPI benchmark AgentDojo demonstrates that MELON "
            "outperforms SOTA defenses in both attack prevention and utility preservation.")
    assert answering_clause("results", sent, 0.9) == (
        "MELON outperforms SOTA defenses in both attack prevention and utility preservation.")
    long = ("We propose a sparse attention kernel that skips blocks whose scores are provably "
            "small; this reduces the memory traffic of long-context inference by a factor of "
            "three while keeping the accuracy of dense attention on every benchmark we tried.")
    assert answering_clause("approach", long, 0.2).startswith("We propose a sparse attention")
    assert answering_clause("results", long, 0.8).startswith("This reduces the memory traffic")


def test_marker_subjects_restore_the_subject():
    out = marker_subjects("[1] focuses on safety, while [2] detects attacks.", ["A", "B"])
    assert out == "A [1] focuses on safety, while B [2] detects attacks."
    assert marker_subjects("A is new [1].", ["A"]) == "A is new [1]."


def test_synthesis_covers_every_paper(bundled):
    papers = [p for p in bundled if p.title.startswith(("ShieldAgent", "MELON"))][:2]
    papers.append(next(p for p in bundled if "RecFlow" in p.abstract))
    cells = {p.paper_id: extract_cells(p) for p in papers}

    class Attr:
        def __init__(self, s):
            self.sentence = s

    def attribute(text, hits):  # the model wrote about paper 1 only
        return [Attr(SentenceSupport(re.sub(r"\s*\[\d\]", "", s), [int(n) for n in
                                     re.findall(r"\[(\d)\]", s)], 0.8, True))
                for s in re.split(r"(?<=\.)\s+", text) if s]

    text, sents = synthesize(papers, cells, "[1] enforces safety policies.", attribute, [])
    cited = {c for s in sents for c in s.citations}
    assert cited == {1, 2, 3}, text
    for s in sents:
        assert re.match(r"^[A-Z0-9]", s.text), s.text  # every sentence has its subject
    assert sents[0].text.startswith(papers[0].title.split(":")[0])
