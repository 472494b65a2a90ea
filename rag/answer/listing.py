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

A comparison ("how do X and Y differ in …") is written by the model, which
can draw on every candidate sentence (quoted to the reader by rule
evidence_extended when used); a compared paper its synthesis leaves out
(tune q184, q612: two papers quoted, one written about) is then quoted by
its chosen sentences under its name (``compared_lines``, rule
each_paper_quoted). Composing comparisons wholly in code lost what the model
drew from unchosen sentences (37 tune comparisons: pass 0.676 -> 0.595).
"""

from __future__ import annotations

from collections.abc import Sequence

from rag.answer.evidence import Candidate, excerpts
from rag.answer.paper_relevance import does_what, says_what_it_does
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
    """For a comparison: one line per paper of ``chosen``, in evidence order,
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


def contrast_prompt(said: Sequence[Candidate], hits: Sequence[SearchHit]) -> str:
    """The prompt for the one sentence on how the cited papers differ, over
    the quoted sentences ``said``: two papers in the form "A does this,
    whereas B does that"; three or more with a clause for each, in order
    (the two-paper form named only the first and the last)."""
    names = [hits[h].paper.name for h in dict.fromkeys(c.hit for c in said)]
    common = {"excerpts": excerpts(list(said), list(hits)), "example": said[0].id,
              "first": names[0], "second": names[1], "last": names[-1]}
    if len(names) < 3:
        return render("synthesis_papers_contrast", **common)
    return render("synthesis_papers_contrast_more", names=", ".join(names), **common)
