"""Paper and corpus types: a paper record and where it came from, search hits
and their passages, metadata filters, and the reports of ingest and ``aqa
status``. Part of the vocabulary ``rag.types`` re-exports; each has
``to_dict()``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any


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
    pages: str | None = None  # page range in the proceedings ("1-26"), where the source gives it
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
            "pages": self.pages,
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
