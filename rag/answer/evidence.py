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
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rag.text import has_value, short_title, split_sentences, states_count
from rag.types import Paper, SearchHit


@dataclass
class Candidate:
    """One numbered sentence shown to the model."""

    id: int  # 1-based number in the prompt
    hit: int  # index into the hits list
    text: str
    relevance: float  # cosine of the question and this sentence
    position: int  # index of the sentence within its abstract
    score: float = 0.0  # the ranking score: cosine, rank prior and boosts


def candidates(question: str, hits: list[SearchHit], embedder, *, total: int,
               per_paper: int, first_paper: int | None = None,
               value_boost: float = 0.0, counted: set[str] | frozenset = frozenset(),
               count_boost: float = 0.0, lexical: Callable[[str, str], float] | None = None,
               lexical_weight: float = 0.0, best_last: bool = False) -> list[Candidate]:
    """The sentences most similar to the question, at most ``per_paper`` from
    one paper (``first_paper`` from the top-ranked one, which most often holds
    the answer) and ``total`` in all, grouped by paper (retrieval order) and
    in abstract order within a paper. ``value_boost`` favours sentences that
    state a number, for questions that ask for one; ``count_boost`` (added to
    it) favours those that state a count of what a "how many X" question
    counts (``counted``: X's stemmed words), which may share no other word
    with a reworded question. ``best_last`` lists the papers in reverse
    retrieval order, the top-ranked one next to the question."""
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
        for i, (t, sim) in enumerate(zip(sents, sims, strict=True)):
            boost = value_boost if value_boost and has_value(t) else 0.0
            if lexical is not None and lexical_weight:
                boost += lexical_weight * lexical(question, t)
            if count_boost and states_count(t, counted):
                boost += count_boost
            scored.append((float(sim) + prior + boost, h_i, i, t, float(sim)))
    scored.sort(key=lambda x: -x[0])
    chosen: dict[int, list[tuple[int, str, float, float]]] = {}
    n = 0
    for score, h_i, i, t, sim in scored:
        if n >= total:
            break
        cap = first_paper if (h_i == 0 and first_paper) else per_paper
        if len(chosen.get(h_i, [])) >= cap:
            continue
        chosen.setdefault(h_i, []).append((i, t, sim, score))
        n += 1
    out: list[Candidate] = []
    for h_i in sorted(chosen, reverse=best_last):
        for i, t, sim, score in sorted(chosen[h_i]):
            out.append(Candidate(len(out) + 1, h_i, t, round(sim, 4), i, round(score, 4)))
    return out


def ranker_choice(cands: list[Candidate], most: int, *, each: int = 0) -> list[int]:
    """The evidence choice without a model call (``AQA_EVIDENCE_CHOOSER=ranker``):
    the ``each`` best-ranked candidates (by ``Candidate.score``) of every paper
    the candidates come from (for pinned papers, so that "what do these two
    have in common" reads both), then the best of the rest up to ``most`` in
    all (more when there are more papers than ``most // each``); ids in prompt
    order."""
    ranked = sorted(cands, key=lambda c: -c.score)
    taken: dict[int, int] = {}
    picked: list[Candidate] = []
    for c in ranked:  # each paper's best first
        if taken.get(c.hit, 0) < each:
            taken[c.hit] = taken.get(c.hit, 0) + 1
            picked.append(c)
    have = {c.id for c in picked}
    picked += [c for c in ranked if c.id not in have][: max(0, most - len(picked))]
    return sorted(c.id for c in picked)


def heading(paper: Paper) -> str:
    """"Packrat (Auto-reconfiguration for …)": how the evidence prompt heads a
    paper's sentences, its name (``Paper.name``) with its title when the title
    adds to it. A heading, not a name: running text uses ``Paper.name``."""
    name, title = paper.name, short_title(paper.title, 90)
    return name if name in (paper.title, title) else f"{name} ({title})"


def excerpts(cands: list[Candidate], hits: list[SearchHit]) -> str:
    """The numbered sentences, under the name of the paper they belong to."""
    lines: list[str] = []
    last = None
    for c in cands:
        if c.hit != last:
            lines.append(f"Paper: {heading(hits[c.hit].paper)}")
            last = c.hit
        lines.append(f"[{c.id}] {c.text}")
    return "\n".join(lines)


def quoted(chosen: list[Candidate], hits: list[SearchHit]) -> str:
    """The chosen sentences, numbered and quoted, one line per paper (the
    evidence check's view: the other candidates out of sight)."""
    by: dict[int, list[Candidate]] = {}
    for c in chosen:
        by.setdefault(c.hit, []).append(c)
    return "\n".join(f"From the abstract of {hits[h].paper.name}: "
                     + " ".join(f'[{c.id}] "{c.text}"' for c in cs) for h, cs in by.items())


# The model's verdict on its own evidence (rule evidence_not_answering).
CHECK_SCHEMA = {"type": "object", "properties": {"answer": {"enum": ["yes", "no"]}},
                "required": ["answer"]}


def parse_verdict(raw: str) -> bool | None:
    """True for "yes", False for "no", None for a reply that is neither."""
    try:
        v = json.loads(raw).get("answer")
    except (ValueError, AttributeError):
        m = re.search(r"\b(yes|no)\b", raw, re.IGNORECASE)
        v = m.group(1).lower() if m else None
    return {"yes": True, "no": False}.get(v) if isinstance(v, str) else None


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
