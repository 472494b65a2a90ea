"""Comparison types: the aspects a side-by-side comparison has, a cell (a short
statement and its verbatim quote, or "not stated") and the whole
``Comparison`` with its cited synthesis. Part of the vocabulary ``rag.types``
re-exports; each has ``to_dict()``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rag.types_answer import SentenceSupport, Timings
from rag.types_paper import Paper

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
