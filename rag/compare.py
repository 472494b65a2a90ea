"""Side-by-side comparison of 2-4 papers.

Cells are extracted, not generated: each aspect's cell is the abstract
sentence that best matches the aspect's cue words, quoted verbatim, so every
cell is grounded by construction and "not stated" is an honest answer. Only
the short synthesis of how the papers differ comes from the LLM, and it goes
through the same citation check as answers.
"""

from __future__ import annotations

import re
import time

from rag.attribution import split_sentences
from rag.types import ASPECTS, CompareCell, Paper

CUES: dict[str, list[tuple[str, float]]] = {
    "problem": [
        (r"\b(however|challenge|challenging|problem|issue|limitation of existing|remain[s]?|"
         r"lack|struggle|vulnerable|difficult|bottleneck|costly|expensive|unclear|"
         r"under-explored|fail[s]?)\b", 1.0),
    ],
    "approach": [
        (r"\bwe (propose|introduce|present|develop|design|formulate|derive|establish|study|"
         r"analy[sz]e|show|prove|provide)\b", 1.5),
        (r"\b(our (method|approach|framework|algorithm)|framework|algorithm|by leveraging|"
         r"which (uses|leverages))\b", 0.7),
    ],
    "data": [
        (r"\b(dataset[s]?|benchmark[s]?|experiments? (on|across|with)|evaluat\w+ on|"
         r"tasks?|environments?|corpus|simulat\w+|real-world data)\b", 1.0),
        (r"\b[A-Z][A-Za-z]*[A-Z0-9][A-Za-z0-9\-]*\b", 0.2),
    ],
    "results": [
        (r"\b(outperform\w*|achiev\w+|improv\w+|state-of-the-art|SOTA|results? (show|demonstrate)|"
         r"experiments? (show|demonstrate)|surpass\w*|speed-?up|reduc\w+|gain[s]?)\b", 1.0),
        (r"\d+(\.\d+)?\s?(%|x|×)", 0.8),
    ],
    "limitations": [
        (r"\b(limitation[s]?|limited to|future work|does not|do not|cannot|only (applies|works)|"
         r"restricted|assum\w+|at the cost of|trade-?off)\b", 1.0),
    ],
}
_COMPILED = {a: [(re.compile(p, re.IGNORECASE if a != "data" or w > 0.5 else 0), w)
                 for p, w in cues] for a, cues in CUES.items()}
MIN_SCORE = {"problem": 0.9, "approach": 0.7, "data": 0.9, "results": 0.8, "limitations": 0.9}


def _score(aspect: str, sentence: str, position: float) -> float:
    s = sum(w * len(rx.findall(sentence)) for rx, w in _COMPILED[aspect])
    if aspect == "problem":
        s += 0.6 * (1 - position)  # problems are stated early
    if aspect == "results":
        s += 0.4 * position  # results come late
    return s


def shorten(sentence: str, words: int = 28) -> str:
    w = sentence.split()
    return sentence if len(w) <= words else " ".join(w[:words]) + " …"


def extract_cells(paper: Paper) -> dict[str, CompareCell]:
    sents = split_sentences(paper.abstract)
    cells: dict[str, CompareCell] = {}
    used: set[int] = set()
    # Fill the most specific aspects first so one sentence is not reused everywhere.
    for aspect in ("approach", "results", "data", "limitations", "problem"):
        scored = [
            (_score(aspect, s, i / max(1, len(sents) - 1)), i)
            for i, s in enumerate(sents)
            if i not in used
        ]
        best = max(scored, default=(0.0, -1))
        if best[1] >= 0 and best[0] >= MIN_SCORE[aspect]:
            used.add(best[1])
            quote = sents[best[1]]
            cells[aspect] = CompareCell(text=shorten(quote), quote=quote)
        else:
            cells[aspect] = CompareCell(text="not stated", quote=None)
    return {a: cells[a] for a in ASPECTS}


def synthesis_notes(papers: list[Paper], cells: dict[str, dict[str, CompareCell]]) -> str:
    lines = []
    for n, p in enumerate(papers, 1):
        row = cells[p.paper_id]
        bits = [row[a].text for a in ("problem", "approach", "results") if row[a].stated]
        lines.append(f"[{n}] {p.title}: " + " ".join(bits))
    return "\n".join(lines)


def now() -> float:
    return time.perf_counter()
