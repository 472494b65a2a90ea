"""The answer to "which papers…" composed in code: each cited paper by its own words.

For a question that asks for papers, the papers are the answer and the
decision about them is already made (``rag.answer.paper_relevance``). The
bundled model, asked to write "one sentence per paper on what it does",
mostly copied the chosen sentences verbatim, motivation first ("Recent
research has explored…") and in the abstract's first person, and it spent
5-7 s doing so. Here each cited paper gets one line in code, its name, its
evidence number and, quoted, the sentence of its evidence that says what it
does (``paper_relevance.does_what``); when the question asks for a
value, the paper's chosen sentence stating one is quoted too. The model then
writes only what code cannot: with several papers, one sentence on how they
differ (prompt ``synthesis_papers_contrast``, or ``…_more`` naming every
paper when there are three or more), checked like any synthesis sentence.

A question that compares papers ("how do X and Y differ in …") is composed
the same way (``compared_lines``): each compared paper's chosen sentences
quoted under its name, then the model's one sentence on how they differ,
asked with the question (prompt ``synthesis_compare_contrast``, or
``synthesis_compare_common`` for what they share). Written
freely, the synthesis covered one of two quoted papers (tune q612) and could
hand one paper's numbers to the other.
"""

from __future__ import annotations

from collections.abc import Sequence

from rag.answer.evidence import Candidate, excerpts
from rag.answer.paper_relevance import does_what, says_what_it_does
from rag.answer.reading import asks_common
from rag.prompts import render
from rag.text import has_value
from rag.types import SearchHit


def quoted_lines(chosen: Sequence[Candidate], hits: Sequence[SearchHit], *, asks_value: bool
                 ) -> tuple[list[str], list[Candidate]]:
    """One line per cited paper, in evidence order (``Name [n]: “sentence”``),
    and the sentences quoted.

    Markers are candidate ids, as in a model's synthesis (the check maps them
    to the numbers shown).
    The quoted sentence is the paper's evidence sentence that best says what
    it does, else its one closest to the question; with ``asks_value``, a
    sentence of its evidence stating a number joins it (the asked detail)."""
    lines: list[str] = []
    quoted: list[Candidate] = []
    for hit in dict.fromkeys(c.hit for c in chosen):
        own = [c for c in chosen if c.hit == hit]
        abstract = hits[hit].paper.abstract
        doing = [c for c in own if does_what(c, abstract)]
        does = (max(doing, key=lambda c: says_what_it_does(c, abstract)) if doing
                else max(own, key=lambda c: c.relevance))
        quote = [does]
        if asks_value and not has_value(does.text):
            valued = [c for c in own if has_value(c.text)]
            if valued:
                quote.append(max(valued, key=lambda c: c.relevance))
        quote.sort(key=lambda c: c.position)
        marks = "".join(f"[{c.id}]" for c in quote)
        body = " ".join(c.text for c in quote)
        lines.append(f"{hits[hit].paper.name} {marks}: “{body}”")
        quoted += quote
    return lines, quoted


def compared_lines(chosen: Sequence[Candidate], hits: Sequence[SearchHit]
                   ) -> tuple[list[str], list[Candidate]]:
    """For a comparison: one line per compared paper, in evidence order,
    quoting every sentence chosen from it (``Name [a][b]: “…”``), and those
    sentences grouped by paper. What a comparison asks about is in the
    sentences the model chose for the question, not in what the paper does
    overall, so none is left out."""
    lines: list[str] = []
    quoted: list[Candidate] = []
    for hit in dict.fromkeys(c.hit for c in chosen):
        own = sorted((c for c in chosen if c.hit == hit), key=lambda c: c.position)
        marks = "".join(f"[{c.id}]" for c in own)
        lines.append(f"{hits[hit].paper.name} {marks}: “{' '.join(c.text for c in own)}”")
        quoted += own
    return lines, quoted


def contrast_prompt(said: Sequence[Candidate], hits: Sequence[SearchHit],
                    question: str | None = None) -> str:
    """The prompt for the one sentence on how the cited papers differ, over
    the quoted sentences ``said``: two papers in the form "A does this,
    whereas B does that"; three or more with a clause for each, in order
    (the two-paper form named only the first and the last). With
    ``question`` (a comparison), the sentence answers it."""
    names = [hits[h].paper.name for h in dict.fromkeys(c.hit for c in said)]
    common = {"excerpts": excerpts(list(said), list(hits)), "example": said[0].id,
              "first": names[0], "second": names[1], "last": names[-1]}
    if question is not None:
        # What they share is not said in the form of a difference.
        name = "synthesis_compare_common" if asks_common(question) else "synthesis_compare_contrast"
        return render(name, question=question, **common)
    if len(names) < 3:
        return render("synthesis_papers_contrast", **common)
    return render("synthesis_papers_contrast_more", names=", ".join(names), **common)
