"""An answer's numbered citations, built from the evidence sentences chosen.

Owns the numbering: papers are numbered in the order their first chosen
sentence appears, and ``[n]`` in the synthesis, the answer's ``evidence`` and
its ``citations`` all use that number. Also the passages shown before any
model runs: each candidate paper's closest sentence, numbered by rank.
"""

from __future__ import annotations

from rag.answer.evidence import Candidate
from rag.types import Answer, Citation, Evidence, SearchHit


def passages(cands: list[Candidate], hits: list[SearchHit]) -> list[Evidence]:
    """Each candidate paper's closest sentence, in rank order (number = rank)."""
    best: dict[int, Candidate] = {}
    for c in cands:
        if c.hit not in best or c.relevance > best[c.hit].relevance:
            best[c.hit] = c
    return [Evidence(h + 1, hits[h].paper.paper_id, c.text, c.relevance)
            for h, c in sorted(best.items())]


def cite(answer: Answer, chosen: list[Candidate]) -> None:
    """Set ``answer.evidence`` and ``answer.citations`` from the chosen sentences."""
    hits = answer.retrieved
    number: dict[int, int] = {}
    for c in chosen:
        number.setdefault(c.hit, len(number) + 1)
    answer.evidence = [Evidence(number[c.hit], hits[c.hit].paper.paper_id, c.text, c.relevance)
                       for c in chosen]
    answer.citations = [
        Citation(number=n, paper=hits[h].paper,
                 snippet=" ".join(e.text for e in answer.evidence if e.number == n),
                 score=0.0,
                 relevance=max(e.relevance for e in answer.evidence if e.number == n),
                 quotes=[e.text for e in answer.evidence if e.number == n])
        for h, n in number.items()
    ]
