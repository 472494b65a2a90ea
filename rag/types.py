"""Engine data types: the one vocabulary shared by the engine, CLI, UI and evals.

Everything here is a plain dataclass with ``to_dict()`` so the CLI's ``--json``
output, the UI and the eval reports all serialise the same structure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class Provenance:
    """Where a paper record came from: file (relative to its corpus root),
    1-based ordinal of the record in that file, 1-based line number."""

    path: str
    ordinal: int
    line: int

    @property
    def key(self) -> str:
        """Stable provenance key, e.g. ``icml2025/000_df6f.txt#3``."""
        return f"{self.path}#{self.ordinal}"


@dataclass
class Paper:
    paper_id: str
    abstract: str
    title: str  # display title; a derived label when ``title_derived``
    title_derived: bool = False
    authors: list[str] = field(default_factory=list)
    url: str | None = None
    links: dict[str, str] = field(default_factory=dict)  # pdf, openreview, software...
    venue: str | None = None
    year: int | None = None
    source: str = ""  # corpus/source name used for filtering (e.g. "icml2025")
    provenance: list[Provenance] = field(default_factory=list)

    @property
    def name(self) -> str:
        """What running text calls this paper ("MELON", "Packrat"): the one
        naming rule, ``rag.labels.paper_name`` (title before a colon, else the
        name its abstract gives its system, else the title)."""
        from rag.labels import paper_name  # labels reads abstracts; types stays import-free

        return paper_name(self.title, self.abstract)

    @property
    def display_title(self) -> str:
        """The title as lists show it, a derived label marked as one
        ("… (derived label)"); not a name for running text (``name``)."""
        return f"{self.title} (derived label)" if self.title_derived else self.title

    def to_dict(self) -> dict[str, Any]:
        # What asdict() gives (same keys, same order, copies), spelled out: the
        # catalog serialises every paper on each ingest, and asdict's generic
        # deep copy was 0.3 s of a 3,300-paper re-ingest.
        return {
            "paper_id": self.paper_id,
            "abstract": self.abstract,
            "title": self.title,
            "title_derived": self.title_derived,
            "authors": list(self.authors),
            "url": self.url,
            "links": dict(self.links),
            "venue": self.venue,
            "year": self.year,
            "source": self.source,
            "provenance": [{"path": p.path, "ordinal": p.ordinal, "line": p.line}
                           for p in self.provenance],
            "display_title": self.display_title,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Paper:
        d = {k: v for k, v in d.items() if k != "display_title"}
        d["provenance"] = [Provenance(**p) for p in d.get("provenance", [])]
        return cls(**d)


@dataclass
class Passage:
    """A chunk of one paper's abstract."""

    chunk_id: str
    paper_id: str
    text: str
    index: int = 0  # position of the chunk within the abstract
    score: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SearchHit:
    """One paper in a ranked result list, with its best passages (best first)."""

    paper: Paper
    score: float
    rank: int
    passages: list[Passage] = field(default_factory=list)
    dense_score: float | None = None
    bm25_score: float | None = None

    @property
    def snippet(self) -> str:
        return self.passages[0].text if self.passages else self.paper.abstract[:300]

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "score": self.score,
            "dense_score": self.dense_score,
            "bm25_score": self.bm25_score,
            "snippet": self.snippet,
            "paper": self.paper.to_dict(),
            "passages": [p.to_dict() for p in self.passages],
        }


class SearchResults(list[SearchHit]):
    """``Engine.search``'s hits, best first, and ``below_min_score``: how many
    more of the top ``k`` scored under its ``min_score`` cut-off (not listed)."""

    def __init__(self, hits: Iterable[SearchHit] = (), below_min_score: int = 0) -> None:
        super().__init__(hits)
        self.below_min_score = below_min_score


@dataclass
class Filters:
    """Metadata filters; ``None`` means no restriction on that field."""

    sources: list[str] | None = None
    venues: list[str] | None = None
    years: list[int] | None = None
    paper_ids: list[str] | None = None

    def is_empty(self) -> bool:
        return not (self.sources or self.venues or self.years or self.paper_ids)

    @classmethod
    def from_lists(
        cls,
        sources: Iterable[str] | None = None,
        venues: Iterable[str] | None = None,
        years: Iterable[Any] | None = None,
        paper_ids: Iterable[str] | None = None,
    ) -> Filters | None:
        """Filters from optional lists (CLI flags, UI dropdowns); an empty or
        missing list is no restriction, and no restriction at all is None."""
        f = cls(
            sources=list(sources) if sources else None,
            venues=list(venues) if venues else None,
            years=[int(y) for y in years] if years else None,
            paper_ids=list(paper_ids) if paper_ids else None,
        )
        return None if f.is_empty() else f


# Question-to-evidence cosines of all-MiniLM-L6-v2 read as "strong" / "partial".
STRONG_MATCH = 0.5
PARTIAL_MATCH = 0.35


@dataclass
class Citation:
    """A numbered citation [n] in an answer; always a retrieved paper."""

    number: int
    paper: Paper
    snippet: str  # the passage that supports the cited sentence(s)
    score: float  # quote match: best support of the answer's sentences by this paper's quote
    # Does this paper answer the question? Cosine of the question and the
    # paper's best evidence sentence (independent of how the answer is worded).
    relevance: float = 0.0
    quotes: list[str] = field(default_factory=list)  # verbatim evidence sentences

    @property
    def relevance_words(self) -> str:
        """How well the paper answers the question, in words for the reader."""
        if self.relevance >= STRONG_MATCH:
            return "strong match"
        return "partial match" if self.relevance >= PARTIAL_MATCH else "weak match"

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "score": self.score,
            "relevance": self.relevance,
            "quotes": list(self.quotes),
            "snippet": self.snippet,
            "paper": self.paper.to_dict(),
        }


@dataclass
class SentenceSupport:
    """One answer sentence, the citation numbers it carries after validation,
    and its best-supporting retrieved passage with a support score in [0, 1]."""

    text: str
    citations: list[int]
    support: float
    supported: bool
    paper_id: str | None = None
    evidence: str | None = None  # the supporting passage text
    contentless: bool = False  # e.g. "Here is what I found:"; needs no source
    # Set when a check failed after the sentence was shown (streamed): the UI
    # and CLI keep the text visible and mark it withdrawn, with the reason.
    withdrawn: bool = False
    withdrawn_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Evidence:
    """A verbatim abstract sentence an answer rests on, chosen before any
    answer text is written."""

    number: int  # citation number [n] of its paper in the answer
    paper_id: str
    text: str
    relevance: float  # cosine of the question and this sentence

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RuleFiring:
    """One named decision rule evaluated on an answer: whether it fired and why."""

    name: str
    fired: bool
    detail: str = ""
    data: dict[str, Any] = field(default_factory=dict)  # structured figures (no prose to parse)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# absent: nothing in the collection is about it; missing_detail: the paper is
# there, its abstract does not state it; not_confirmed: the closest passages
# are shown, but the decision is not confident they answer (counts as declined).
DeclineKind = Literal["absent", "missing_detail", "not_confirmed"]


@dataclass
class Timings:
    retrieval_ms: float = 0.0
    # ranked papers with their closest sentences known: the "passages" event
    passages_ms: float | None = None
    evidence_ms: float | None = None  # evidence chosen: quotes can be shown from here
    ttft_ms: float | None = None  # first token of the synthesis
    total_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Answer:
    question: str
    standalone_question: str  # the question as interpreted (follow-ups resolved)
    text: str  # final answer: synthesis with [n] markers, then the quoted evidence
    sentences: list[SentenceSupport]  # the synthesis sentences, checked
    citations: list[Citation]
    retrieved: list[SearchHit]
    declined: bool
    decline_reason: str | None  # plain words for the user; internals go to ``rules``
    model: str
    timings: Timings
    decline_kind: DeclineKind | None = None  # absent topic, or a missing detail of a paper
    evidence: list[Evidence] = field(default_factory=list)
    # The closest sentence of each top paper, known before any model runs
    # (``number`` is the paper's rank); what the UI shows while it decides.
    passages: list[Evidence] = field(default_factory=list)
    rules: list[RuleFiring] = field(default_factory=list)
    pinned: list[str] = field(default_factory=list)  # paper ids the question was restricted to
    decision: dict[str, Any] | None = None  # rag.decision.Decision.to_dict(): outcome, P, signals

    @property
    def interpreted(self) -> str | None:
        """The interpreted question when it differs from what was typed."""
        s = (self.standalone_question or "").strip()
        return s if s and s.lower() != self.question.strip().lower() else None

    @property
    def nearest(self) -> list[SearchHit]:
        """Nearest papers, for a declined answer."""
        return self.retrieved[:3]

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "standalone_question": self.standalone_question,
            "answer": self.text,
            "declined": self.declined,
            "decline_reason": self.decline_reason,
            "decline_kind": self.decline_kind,
            "pinned": list(self.pinned),
            "evidence": [e.to_dict() for e in self.evidence],
            "passages": [e.to_dict() for e in self.passages],
            "rules": [r.to_dict() for r in self.rules],
            "decision": self.decision,
            "model": self.model,
            "timings": self.timings.to_dict(),
            "sentences": [s.to_dict() for s in self.sentences],
            "citations": [c.to_dict() for c in self.citations],
            "retrieved": [h.to_dict() for h in self.retrieved],
        }


@dataclass
class StreamEvent:
    """``ask_stream`` yields optional ``status`` events (text = progress
    message), one ``passages`` event as soon as the ranked papers and their
    closest sentences are known (``answer.retrieved`` and ``answer.passages``;
    not yet evidence: nothing is decided), one ``evidence`` event once the evidence is chosen (``answer``
    holds a preliminary Answer with ``evidence``/``citations`` filled, no text),
    ``token`` events (text = the new piece of the synthesis), then one final
    ``answer`` event. Streamed text is never silently replaced: sentences that
    fail a check afterwards come back with ``withdrawn=True``."""

    kind: Literal["token", "status", "passages", "evidence", "answer"]
    text: str = ""
    answer: Answer | None = None


ASPECTS: tuple[str, ...] = ("problem", "approach", "data", "results", "limitations")
ASPECT_LABELS: dict[str, str] = {
    "problem": "Problem",
    "approach": "Approach",
    "data": "Data / benchmarks",
    "results": "Key results",
    "limitations": "Stated limitations",
}


@dataclass
class CompareCell:
    """One cell: a short statement and the verbatim supporting quote from the
    abstract; ``quote is None`` means "not stated"."""

    text: str
    quote: str | None

    @property
    def stated(self) -> bool:
        return self.quote is not None

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "quote": self.quote, "stated": self.stated}


@dataclass
class Comparison:
    papers: list[Paper]
    cells: dict[str, dict[str, CompareCell]]  # paper_id -> aspect -> cell
    synthesis: str  # cited with [n], n = 1-based position in ``papers``
    synthesis_sentences: list[SentenceSupport]
    model: str
    timings: Timings

    def to_dict(self) -> dict[str, Any]:
        return {
            "papers": [p.to_dict() for p in self.papers],
            "aspects": list(ASPECTS),
            "cells": {
                pid: {a: c.to_dict() for a, c in row.items()} for pid, row in self.cells.items()
            },
            "synthesis": self.synthesis,
            "synthesis_sentences": [s.to_dict() for s in self.synthesis_sentences],
            "model": self.model,
            "timings": self.timings.to_dict(),
        }


@dataclass
class IngestReport:
    papers_total: int = 0
    papers_added: int = 0
    papers_updated: int = 0
    papers_unchanged: int = 0
    papers_pruned: int = 0
    duplicates_merged: int = 0
    chunks_embedded: int = 0
    embeddings_cached: int = 0
    errors: list[str] = field(default_factory=list)  # "file:line: message"
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class CorpusStatus:
    papers: int
    chunks: int
    sources: dict[str, int]  # source name -> paper count
    embed_model: str
    llm_model: str
    last_ingest: str | None  # ISO timestamp
    data_dir: str
    # Index health: {"ok", "catalog", "vectors", "problems"}; problems name the file and the fix.
    health: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
