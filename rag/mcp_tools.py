"""The MCP tools of ``aqa mcp`` as plain Python: ``Tools`` (search_papers, ask,
compare_papers, get_paper, list_papers), their pydantic inputs, the engine
built once on first use (``EngineHolder``), and the translation of engine
results into evidence objects with character offsets in the abstracts
(``locate``, ``answer_dict``, ``hit_dict``, …). Callable in process (tests)
as well as over MCP; needs no MCP SDK (``rag.mcp_server`` builds the server
over these and re-exports them).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

from pydantic import BaseModel, Field

from rag.errors import AqaError, EmptyIndexError
from rag.types import ASPECT_LABELS, Answer, Filters, Paper, SearchHit

if TYPE_CHECKING:
    from rag.api import EngineAPI

DEFAULT_K = 5
MAX_K = 20  # more hits than this only bloats the client's context
DEFAULT_PAGE_SIZE = 25  # list_papers page, when the caller gives no limit
MAX_PAGE_SIZE = 200
# Search scores in words, with the cut-offs of the UI's explorer
# (ui.render.papers.score_words; hybrid scores: ~0.6+ on topic, ~0.3 loosely).
SCORE_STRONG, SCORE_PARTIAL = 0.6, 0.45
# A quote's match with the answer sentence in words, as the UI's support_words.
SUPPORT_STRONG, SUPPORT_PARTIAL = 0.6, 0.45


# --- tool inputs --------------------------------------------------------------

class PaperFilters(BaseModel):
    """Metadata filters; a missing or empty list is no restriction."""

    sources: list[str] | None = Field(None, description="corpus/source names, e.g. icml2025")
    venues: list[str] | None = Field(None, description="venues, e.g. ICML")
    years: list[int] | None = Field(None, description="publication years")
    paper_ids: list[str] | None = Field(None, description="only these paper ids")

    def to_filters(self) -> Filters | None:
        return Filters.from_lists(self.sources, self.venues, self.years, self.paper_ids)


class Message(BaseModel):
    """One earlier chat message, for follow-up questions."""

    role: Literal["user", "assistant"]
    content: str


# --- evidence helpers ---------------------------------------------------------

def locate(quote: str | None, abstract: str) -> dict[str, Any]:
    """``start``/``end`` of ``quote`` in ``abstract`` (``abstract[start:end] ==
    quote``), or nulls and a note when it is not there verbatim: offsets are
    never guessed."""
    i = abstract.find(quote) if quote else -1
    if i < 0:
        return {"start": None, "end": None,
                "offsets_note": "quote not found verbatim in the abstract; no offsets given"}
    return {"start": i, "end": i + len(quote)}


def words(value: float, strong: float, partial: float) -> str:
    if value >= strong:
        return "strong match"
    return "partial match" if value >= partial else "weak match"


def paper_uri(paper_id: str) -> str:
    return f"paper://{quote(paper_id, safe='')}"


def paper_summary(p: Paper) -> dict[str, Any]:
    """A paper without its abstract (lists stay small; the abstract is one
    get_paper call or resource read away)."""
    return {"paper_id": p.paper_id, "title": p.display_title, "authors": list(p.authors),
            "venue": p.venue, "year": p.year, "source": p.source, "url": p.url,
            "resource": paper_uri(p.paper_id)}


def hit_dict(h: SearchHit) -> dict[str, Any]:
    abstract = h.paper.abstract
    passages = [{"text": ps.text, "score": ps.score, **locate(ps.text, abstract)}
                for ps in h.passages]
    if not passages:  # SearchHit.snippet falls back to the abstract's start
        passages = [{"text": h.snippet, "score": None, **locate(h.snippet, abstract)}]
    return {"rank": h.rank, **paper_summary(h.paper), "score": h.score,
            "score_words": words(h.score, SCORE_STRONG, SCORE_PARTIAL),
            "dense_score": h.dense_score, "bm25_score": h.bm25_score, "passages": passages}


def decision_dict(a: Answer) -> dict[str, Any]:
    """answered / not_confirmed / declined, and why, in plain words."""
    if not a.declined:
        outcome = "answered"
    elif a.decline_kind == "not_confirmed":
        outcome = "not_confirmed"
    else:
        outcome = "declined"
    d = a.decision or {}
    return {"outcome": outcome, "kind": a.decline_kind, "reason": a.decline_reason,
            "p_answered": d.get("p_answer")}


def synthesis_text(a: Answer) -> str | None:
    """The checked synthesis with its [n] markers (what the CLI prints), None when declined."""
    if a.declined:
        return None
    body = [s.text + " " + "".join(f"[{n}]" for n in s.citations)
            for s in a.sentences if not s.withdrawn]
    return " ".join(body).strip() or None


def answer_dict(a: Answer, abstract_of: Callable[[str], str]) -> dict[str, Any]:
    evidence = []
    for c in a.citations:
        abstract = abstract_of(c.paper.paper_id)
        quotes = c.quotes or [e.text for e in a.evidence if e.number == c.number] or [c.snippet]
        for q in quotes:
            evidence.append({
                "citation": c.number, "paper_id": c.paper.paper_id,
                "title": c.paper.display_title, "quote": q, **locate(q, abstract),
                "support": c.relevance_words, "relevance": c.relevance,
                "quote_match": c.score,
                "quote_match_words": words(c.score, SUPPORT_STRONG, SUPPORT_PARTIAL),
                "resource": paper_uri(c.paper.paper_id),
            })
    return {
        "question": a.question, "interpreted_as": a.interpreted,
        "decision": decision_dict(a), "synthesis": synthesis_text(a), "text": a.text,
        "sentences": [{"text": s.text, "citations": s.citations, "support": s.support,
                       "supported": s.supported, "withdrawn": s.withdrawn,
                       "withdrawn_reason": s.withdrawn_reason} for s in a.sentences],
        "evidence": evidence, "pinned": list(a.pinned),
        "nearest": [paper_summary(h.paper) for h in a.nearest] if a.declined else [],
        "model": a.model, "timings": a.timings.to_dict(),
    }


class EngineHolder:
    """Builds the engine on first use (or in the background at start), once:
    the server answers ``initialize`` before any model is loaded."""

    def __init__(self, make: Callable[[], EngineAPI]) -> None:
        self._make, self._engine = make, None
        self._lock = threading.Lock()

    def get(self) -> EngineAPI:
        with self._lock:
            if self._engine is None:
                eng = self._make()
                if not eng.status().papers:  # not kept: a later `aqa ingest` is seen
                    raise EmptyIndexError(
                        f"No papers indexed in {eng.settings.storage.data_dir}: "
                        "run `aqa ingest` first.")
                self._engine = eng
            return self._engine

    def warm(self) -> None:
        """Load the index and the embedding model now (the LLM loads on the first ask)."""
        try:
            warm = getattr(self.get(), "warm", None)
            if callable(warm):
                warm(llm=False)
        except Exception as e:  # reported again, to the client, on the first tool call
            print(f"aqa mcp: could not load the engine: {e}", file=sys.stderr, flush=True)


class Tools:
    """The tool functions, callable in process (tests) as well as over MCP.
    Each raises ``AqaError`` with a one-line message for an expected failure."""

    def __init__(self, engine: Callable[[], EngineAPI]) -> None:
        self.engine = engine

    def _abstract(self, paper_id: str) -> str:
        return self.engine().get_paper(paper_id).abstract

    def _resolve(self, refs: list[str]) -> list[str]:
        eng = self.engine()
        return list(dict.fromkeys(eng.get_paper(r).paper_id for r in refs))

    def search_papers(self, query: str, k: int = DEFAULT_K,
                      filters: PaperFilters | None = None) -> dict[str, Any]:
        if not query.strip():
            raise AqaError("Give a search query.")
        if not 1 <= k <= MAX_K:
            raise AqaError(f"k must be between 1 and {MAX_K}; got {k}.")
        f = filters.to_filters() if filters else None
        if f and f.paper_ids:
            f.paper_ids = self._resolve(f.paper_ids)
        hits = self.engine().search(query, k=k, filters=f)
        return {"query": query, "results": [hit_dict(h) for h in hits]}

    def ask(self, question: str, paper_ids: list[str] | None = None,
            history: list[Message] | None = None) -> dict[str, Any]:
        f = Filters.from_lists(None, None, None, self._resolve(paper_ids)) if paper_ids else None
        msgs = [m.model_dump() for m in history or []]
        a = self.engine().ask(question, history=msgs, filters=f)
        return answer_dict(a, self._abstract)

    def compare_papers(self, paper_ids: list[str],
                       aspects: list[str] | None = None) -> dict[str, Any]:
        unknown = sorted(set(aspects or ()) - set(ASPECT_LABELS))
        if unknown:
            raise AqaError(f"Unknown aspect(s) {', '.join(unknown)}: choose from "
                           f"{', '.join(ASPECT_LABELS)}.")
        c = self.engine().compare(paper_ids)
        wanted = aspects or list(ASPECT_LABELS)
        cells = {}
        for p in c.papers:
            row = c.cells[p.paper_id]
            cells[p.paper_id] = {
                a: {"label": ASPECT_LABELS[a], "text": row[a].text, "stated": row[a].stated,
                    "quote": row[a].quote,
                    **(locate(row[a].quote, p.abstract) if row[a].stated
                       else {"start": None, "end": None})}
                for a in wanted}
        return {"papers": [paper_summary(p) for p in c.papers], "aspects": wanted,
                "cells": cells, "synthesis": c.synthesis,
                "synthesis_sentences": [s.to_dict() for s in c.synthesis_sentences],
                "model": c.model}

    def get_paper(self, paper_id: str) -> dict[str, Any]:
        p = self.engine().get_paper(paper_id)
        return {**paper_summary(p), "abstract": p.abstract, "links": dict(p.links),
                "provenance": [{"path": v.path, "ordinal": v.ordinal, "line": v.line}
                               for v in p.provenance]}

    def list_papers(self, filters: PaperFilters | None = None, cursor: str | None = None,
                    limit: int = DEFAULT_PAGE_SIZE) -> dict[str, Any]:
        if not 1 <= limit <= MAX_PAGE_SIZE:
            raise AqaError(f"limit must be between 1 and {MAX_PAGE_SIZE}; got {limit}.")
        try:
            start = int(cursor) if cursor else 0
            if start < 0:
                raise ValueError
        except ValueError:
            raise AqaError(f"Invalid cursor {cursor!r}: pass the next_cursor of an earlier "
                           "list_papers result, or none for the first page.") from None
        papers = self.engine().papers(None, filters=filters.to_filters() if filters else None)
        page = papers[start:start + limit]
        nxt = start + limit if start + limit < len(papers) else None
        return {"papers": [paper_summary(p) for p in page], "total": len(papers),
                "next_cursor": str(nxt) if nxt is not None else None}

    def all_papers(self) -> list[Paper]:
        return self.engine().papers(None)
