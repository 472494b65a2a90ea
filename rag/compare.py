"""Side-by-side comparison of 2-4 papers.

Cells are extracted, not generated: each aspect's cell is the abstract
sentence that best matches the aspect's cue words, quoted verbatim, so every
cell is grounded by construction and "not stated" is an honest answer. Only
the short synthesis of how the papers differ comes from the LLM, and it goes
through the same citation check as answers.
"""

from __future__ import annotations

import re

from rag.attribution import split_sentences
from rag.types import ASPECTS, CompareCell, Paper

CUES: dict[str, list[tuple[str, float]]] = {
    "problem": [
        (r"\b(however|challenge[s]?|challenging|problem|issue[s]?|remain[s]?|lack[s]?|"
         r"struggle[s]?|vulnerable|difficult|bottleneck|costly|expensive|unclear|"
         r"under-explored|fail[s]?|limited|hinder\w*)\b", 1.0),
    ],
    "approach": [
        (r"\bwe (propose|introduce|present|develop|design|formulate|devise)\b", 2.0),
        (r"\b(our (method|approach|framework|algorithm)|framework|algorithm|architecture|"
         r"by leveraging|we (derive|establish|study|analy[sz]e))\b", 0.6),
        (r"^(in addition|additionally|moreover|furthermore|finally|lastly)\b", -1.2),
    ],
    "data": [
        (r"\b(datasets?|benchmarks?|corpus|corpora|evaluat\w+ (on|across)|"
         r"experiments? (on|across|with)|real-world data|simulations?|environments)\b", 1.0),
    ],
    "results": [
        (r"\b(outperform\w*|achiev\w+|improv\w+|state-of-the-art|SOTA|results? (show|demonstrate)|"
         r"experiments? (show|demonstrate)|surpass\w*|speed-?up|reduc\w+|gains?|matches|"
         r"(less|fewer|faster|higher|lower|better) than|less data)\b", 1.0),
        (r"\d+(\.\d+)?\s?(%|x|×)", 0.8),
    ],
    "limitations": [
        (r"\b(our limitations?|limitation of (our|this)|limited to|future work|does not|do not|"
         r"cannot|only applies|restricted to|at the cost of|trade-?off)\b", 1.0),
        (r"^(existing|prior|previous|current)\b", -1.0),  # others' limits are the problem
    ],
}
_COMPILED = {a: [(re.compile(p, re.IGNORECASE), w) for p, w in cues] for a, cues in CUES.items()}
MIN_SCORE = {"problem": 0.9, "approach": 0.6, "data": 0.9, "results": 0.8, "limitations": 0.9}
REUSE_PENALTY = 0.5  # a sentence may fill two cells, but a fresh one is preferred


def _score(aspect: str, sentence: str, position: float) -> float:
    s = sum(w * len(rx.findall(sentence)) for rx, w in _COMPILED[aspect])
    if aspect == "problem":
        s += 0.6 * (1 - position)  # problems are stated early
    if aspect == "approach":
        s += 0.3 * (1 - position)  # the main contribution comes before the extras
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
            (_score(aspect, s, i / max(1, len(sents) - 1)) - (REUSE_PENALTY if i in used else 0), i)
            for i, s in enumerate(sents)
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

