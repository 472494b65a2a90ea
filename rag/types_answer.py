"""Answer types: a cited answer (``Answer``) and its parts, the numbered
citations, the evidence sentences, each synthesis sentence's support, the named
rules that fired, the kind of a decline, the timings, and the events of
``ask_stream``. Part of the vocabulary ``rag.types`` re-exports; each has
``to_dict()``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from rag.types_paper import Paper, SearchHit

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
    decision: dict[str, Any] | None = None  # rag.answer.decision.Decision.to_dict(): outcome, P, signals

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
