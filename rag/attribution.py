"""Answer checking: split an answer into sentences, validate its [n] markers,
and attribute each sentence to its best-supporting retrieved abstract
sentence with a support score in [0, 1].

Support and the specifics check are ``rag.claims``, the scorer the answer's
synthesis check uses too: half the claim's content words found in the paper's
abstract, half its best cosine to one abstract sentence; a number or name
(capitals or digits) that no abstract the claim cites holds makes the claim
unsupported whatever its score (the question is no evidence): that is how a
confident hallucinated number gets caught. Used by Compare.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rag import claims
from rag.embed import CachedEmbedder
from rag.text import split_sentences, stemmer, strip_markers
from rag.types import SearchHit, SentenceSupport


@dataclass
class Attribution:
    sentence: SentenceSupport
    cited_ids: list[str]  # paper ids, validated


class Attributor:
    def __init__(self, embedder: CachedEmbedder, threshold: float) -> None:
        self.embedder = embedder
        self.threshold = threshold
        self.stem = stemmer()

    def attribute(
        self, answer: str, hits: list[SearchHit]
    ) -> list[Attribution]:
        """Attribute each answer sentence; ``[n]`` in the answer refers to
        ``hits[n-1]``. Markers pointing nowhere are dropped; a marker on a
        paper that does not support the sentence is moved to the one that does."""
        sentences = split_sentences(answer)
        if not sentences or not hits:
            return [
                Attribution(SentenceSupport(s, [], 0.0, False), []) for s in sentences
            ]
        units: list[tuple[int, str]] = []  # (hit index, abstract sentence)
        for h_i, h in enumerate(hits):
            for s in split_sentences(h.paper.abstract):
                units.append((h_i, s))
        title_terms = [self.stem.terms(h.paper.title) for h in hits]
        docs = [h.paper.abstract + " " + h.paper.title for h in hits]

        clean = [strip_markers(s) for s in sentences]
        texts = [c[0] for c in clean]
        vecs = self.embedder.embed_texts(texts + [u[1] for u in units])
        svec, uvec = vecs[: len(texts)], vecs[len(texts) :]
        sims = svec @ uvec.T  # normalised embeddings: dot = cosine

        out: list[Attribution] = []
        for si, (text, markers) in enumerate(clean):
            terms = self.stem.terms(text)
            # "Here is what I found:" or "This can be seen in <title> [1]." claims nothing.
            if not terms or not terms - set().union(*title_terms):
                out.append(Attribution(SentenceSupport(text, [], 1.0, True, contentless=True), []))
                continue
            per_paper: list[tuple[float, int]] = []  # (support, best unit index)
            for h_i in range(len(hits)):
                idx = [u for u, (hh, _) in enumerate(units) if hh == h_i]
                if not idx:
                    per_paper.append((0.0, -1))
                    continue
                best_u = max(idx, key=lambda u: sims[si, u])
                # Naming a paper is not evidence for a claim about it (its title's words aside).
                lex = claims.lexical_support(text, docs[h_i], hits[h_i].paper.title)
                per_paper.append((claims.combine(lex, float(sims[si, best_u])), best_u))
            valid = [m for m in markers if 1 <= m <= len(hits)]
            best_h = int(np.argmax([p[0] for p in per_paper]))
            support, best_u = per_paper[best_h]
            # Keep the model's markers that also support the claim; else re-attribute.
            keep = [m for m in valid if per_paper[m - 1][0] >= self.threshold - 0.1]
            cited = keep or [best_h + 1]
            # Every number/name the claim asserts must be in a paper it cites.
            missing = claims.unstated_specifics(text, [docs[c - 1] for c in cited])
            supported = support >= self.threshold and not missing
            if not supported:
                cited = valid
            ev_h = cited[0] - 1 if supported else best_h
            ev_u = per_paper[ev_h][1]
            out.append(
                Attribution(
                    SentenceSupport(
                        text=text,
                        citations=cited,  # hit numbers; renumbered by the caller
                        support=round(per_paper[ev_h][0], 3),
                        supported=supported,
                        paper_id=hits[ev_h].paper.paper_id,
                        evidence=units[ev_u][1] if ev_u >= 0 else None,
                    ),
                    [hits[c - 1].paper.paper_id for c in cited],
                )
            )
        return out
