"""Evidence first: the abstract sentences an answer may rest on, numbered for
the model, and the model's constrained choice among them.

Candidates are the sentences of the retrieved (or pinned) papers closest to
the question; the model answers with JSON ``{"ids": [...]}`` under a JSON
schema (a llama.cpp grammar locally, ``response_format`` on OpenAI-compatible
servers), so it can only pick sentence ids or none, never free text. The
selection and the synthesis that follows share one prompt prefix, so the
local model reads the sentences once (llama.cpp reuses its KV cache for a
common prefix).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

from rag.text import short_title, split_sentences
from rag.types import SearchHit


@dataclass
class Candidate:
    """One numbered sentence shown to the model."""

    id: int  # 1-based number in the prompt
    hit: int  # index into the hits list
    text: str
    relevance: float  # cosine of the question and this sentence
    position: int  # index of the sentence within its abstract


def candidates(question: str, hits: list[SearchHit], embedder, *, total: int,
               per_paper: int) -> list[Candidate]:
    """The sentences most similar to the question, at most ``per_paper`` from
    one paper and ``total`` in all, grouped by paper (retrieval order) and in
    abstract order within a paper."""
    qv = embedder.embed_query(question)
    scored: list[tuple[float, int, int, str, float]] = []
    top = max((h.score for h in hits), default=0.0) or 1.0
    for h_i, h in enumerate(hits):
        sents = split_sentences(h.paper.abstract)
        if not sents:
            continue
        sims = np.asarray(embedder.embed_texts(sents)) @ np.asarray(qv)
        # The retriever's ranking is evidence too: a small prior for higher-ranked papers.
        prior = 0.1 * h.score / top
        scored += [(float(s) + prior, h_i, i, t, float(s)) for i, (t, s) in enumerate(zip(sents, sims, strict=True))]
    scored.sort(key=lambda x: -x[0])
    chosen: dict[int, list[tuple[int, str, float]]] = {}
    n = 0
    for _, h_i, i, t, sim in scored:
        if n >= total:
            break
        if len(chosen.get(h_i, [])) >= per_paper:
            continue
        chosen.setdefault(h_i, []).append((i, t, sim))
        n += 1
    out: list[Candidate] = []
    for h_i in sorted(chosen):
        for i, t, sim in sorted(chosen[h_i]):
            out.append(Candidate(len(out) + 1, h_i, t, round(sim, 4), i))
    return out


def excerpts(cands: list[Candidate], hits: list[SearchHit]) -> str:
    """The numbered sentences, under the name of the paper they belong to."""
    lines: list[str] = []
    last = None
    for c in cands:
        if c.hit != last:
            p = hits[c.hit].paper
            lines.append(f"Paper: {short_title(p.title, 80)}")
            last = c.hit
        lines.append(f"[{c.id}] {c.text}")
    return "\n".join(lines)


def choice_schema(n: int, most: int) -> dict:
    """JSON schema of the model's choice: up to ``most`` ids among 1..n."""
    return {
        "type": "object",
        "properties": {
            "ids": {
                "type": "array",
                "items": {"type": "integer", "enum": list(range(1, n + 1))},
                "maxItems": most,
            }
        },
        "required": ["ids"],
    }


def parse_choice(raw: str, n: int) -> list[int] | None:
    """The chosen ids (possibly empty), or None when the reply is not a choice."""
    raw = raw.strip()
    try:
        data = json.loads(raw)
        ids = data.get("ids") if isinstance(data, dict) else data
    except (json.JSONDecodeError, AttributeError):
        m = re.search(r"\[([\d,\s]*)\]", raw)  # a server that ignored the schema
        if not m:
            return None
        ids = [int(x) for x in re.findall(r"\d+", m.group(1))]
    if not isinstance(ids, list):
        return None
    out = [i for i in ids if isinstance(i, int) and 1 <= i <= n]
    return list(dict.fromkeys(out))
