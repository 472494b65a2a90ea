"""How an answer ends when it does not answer: which kind of non-answer, and
its plain words.

Kinds (``DeclineKind``): nothing in the collection is about the question
("absent"); the paper is there but its abstract does not state the asked
detail ("missing_detail", quoting the closest sentence it does state); or the
decision was unsure and the closest passages are shown as such
("not_confirmed"). ``Declined`` carries the kind and the paper it is about
from wherever the pipeline stops to ``decline``, which writes the answer.
"""

from __future__ import annotations

import numpy as np

from rag.answer.citations import cite
from rag.answer.decision import Decision
from rag.answer.evidence import Candidate
from rag.config import Settings
from rag.text import split_sentences
from rag.types import Answer, DeclineKind, SearchHit


class Declined(Exception):
    """The answer declines: ``kind``, about ``hits[target]`` when it names one."""

    def __init__(self, kind: DeclineKind, target: int | None = None) -> None:
        self.kind, self.target = kind, target


def declined_as(d: Decision, *, target: int | None, hits: list[SearchHit], chosen: list[Candidate],
                pinned: list[str], top_cosine: float, settings: Settings) -> Declined:
    """Which kind of non-answer: for chosen papers, always the detail their
    abstracts lack; a low-confidence decision shows its closest passages
    (not confirmed); a confident one is a decline, "absent" only when
    retrieval itself found nothing close. ``target``: the hit the question names."""
    first = chosen[0].hit if chosen else 0
    if pinned:
        return Declined("missing_detail", first)
    if target is None and top_cosine < settings.retrieval.relevance_floor:
        return Declined("absent")  # retrieval itself found nothing close
    if d.outcome == "not_confirmed" and chosen:
        return Declined("not_confirmed", first)
    kind = kind_of(hits, target, settings)
    return Declined(kind, first if target is None else target)


def kind_of(hits: list[SearchHit], target: int | None, settings: Settings) -> DeclineKind:
    """A question about a specific paper lacks a detail; otherwise, when
    the best paper is a strong match, it is that paper's detail that is
    missing; else the collection has nothing on the topic."""
    if target is not None:
        return "missing_detail"
    top = hits[0].dense_score or 0.0
    return "missing_detail" if top >= settings.evidence.detail_floor else "absent"


def decline(answer: Answer, d: Declined, q: str, embedder, *, keep: bool = False,
            chosen: list[Candidate] | None = None) -> None:
    """Turn ``answer`` into the decline ``d``: its kind, reason and text.
    ``keep``: the synthesis sentences stay (marked withdrawn by the checker)."""
    hits = answer.retrieved
    answer.declined = True
    answer.decline_kind = d.kind
    if not keep:
        answer.evidence, answer.citations, answer.sentences = [], [], []
    else:
        answer.evidence, answer.citations = [], []
    if d.kind == "not_confirmed" and chosen:
        # The closest passages, shown as such: the reader judges them.
        cite(answer, chosen)
        answer.decline_reason = ("Not confirmed: these are the closest passages in the "
                                 "collection, and they may not answer the question.")
        quotes = "; ".join(f"{hits[c.hit].paper.name}: “{c.text}”" for c in chosen[:3])
        answer.text = f"{answer.decline_reason} {quotes}"
        return
    if d.kind == "missing_detail" and hits:
        h = hits[d.target or 0]
        near = closest(embedder, q, h)
        name = h.paper.name
        answer.decline_reason = f"The abstract of {name} does not state this."
        answer.text = answer.decline_reason + (
            f" The closest it says: “{near}”" if near else "")
        return
    answer.decline_kind = "absent"
    answer.decline_reason = "Nothing in the indexed abstracts answers this question."
    names = "; ".join(h.paper.display_title for h in hits[:3])
    answer.text = answer.decline_reason + (f" The nearest papers are: {names}." if names else "")


def closest(embedder, q: str, hit: SearchHit) -> str:
    """The sentence of ``hit``'s abstract closest to the question ("" for none)."""
    sents = split_sentences(hit.paper.abstract)
    if not sents:
        return ""
    sims = np.asarray(embedder.embed_texts(sents)) @ np.asarray(embedder.embed_query(q))
    return sents[int(np.argmax(sims))]
