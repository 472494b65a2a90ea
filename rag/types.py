"""Engine data types: the one vocabulary shared by the engine, CLI, UI and evals.

Everything here is a plain dataclass with ``to_dict()`` so the CLI's ``--json``
output, the UI and the eval reports all serialise the same structure.

The types live in three modules, by concept, all re-exported here (import them
from ``rag.types``): ``rag.types_paper`` (papers, search hits, filters, ingest
and status reports), ``rag.types_answer`` (answers, citations, evidence, rules,
timings, stream events) and ``rag.types_compare`` (comparisons).
"""

from __future__ import annotations

from rag.types_answer import (
    PARTIAL_MATCH,
    STRONG_MATCH,
    Answer,
    Citation,
    DeclineKind,
    Evidence,
    RuleFiring,
    SentenceSupport,
    StreamEvent,
    Timings,
)
from rag.types_compare import ASPECT_LABELS, ASPECTS, CompareCell, Comparison
from rag.types_paper import (
    CorpusStatus,
    Filters,
    IngestReport,
    Paper,
    Passage,
    Provenance,
    SearchHit,
    SearchResults,
)

__all__ = [
    "ASPECTS", "ASPECT_LABELS", "PARTIAL_MATCH", "STRONG_MATCH", "Answer", "Citation",
    "CompareCell", "Comparison", "CorpusStatus", "DeclineKind", "Evidence", "Filters",
    "IngestReport", "Paper", "Passage", "Provenance", "RuleFiring", "SearchHit",
    "SearchResults", "SentenceSupport", "StreamEvent", "Timings",
]
