"""Answer checking: split an answer into sentences, validate its [n] markers,
and attribute each sentence to its best-supporting retrieved abstract
sentence with a support score in [0, 1].

support = 0.5 * lexical recall of the claim's content words (stemmed) in the
paper's abstract + 0.5 * cosine of the claim and its best abstract sentence.
Specifics (numbers, names with capitals or digits) in a claim that appear in
no retrieved passage nor the question make the claim unsupported whatever its
score: that is how a confident hallucinated number gets caught.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from rag.embed import CachedEmbedder
from rag.types import SearchHit, SentenceSupport

MARKER = re.compile(r"\s*\[(\d+(?:\s*[,;]\s*\d+)*)\]")
_SENT_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9\-]+|\d+(?:\.\d+)?%?")
_NUMBER = re.compile(r"(?<![A-Za-z])\d+(?:[.,]\d+)?\s?(?:%|x|×|k|K|M|B)?(?![A-Za-z])")
_NAME = re.compile(r"\b(?:[A-Za-z]*[A-Z][a-z0-9]*[A-Z0-9][A-Za-z0-9\-]*|[A-Z]{2,}[A-Za-z0-9\-]*)\b")

STOP = set(
    """a an the of and or to in on for with by from as at is are was were be been being this that
    these those it its their they them which what who whom how why when where does do did can could
    would should may might will shall has have had not no than then so such into over under about
    also both each other more most less very paper papers study studies propose proposes proposed
    approach method methods work works use uses used using based new show shows shown our we us
    answer question excerpt excerpts abstract abstracts authors seen stated state states mention
    mentions mentioned described describes according shown discussed discusses found given
    provided reported reports collection""".split()
)
NOT_FOUND = re.compile(
    r"\bNOT[ _]FOUND\b|\b(?:is|are) not (?:mentioned|stated|specified|provided|given|reported|"
    r"described|discussed|included|available)\b|\bdo(?:es)? not (?:mention|specify|state|provide|"
    r"report|include|describe|give|contain|discuss)\b|\bno (?:information|mention|details?)\b|"
    r"\bcannot be (?:determined|found|answered)\b|\bnot (?:enough|sufficient) information\b",
    re.IGNORECASE,
)


def split_sentences(text: str) -> list[str]:
    parts: list[str] = []
    for block in re.split(r"\n+", text.strip()):
        block = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s+", "", block).strip()
        if block:
            parts += [s.strip() for s in _SENT_END.split(block) if s.strip()]
    # A bare marker split off by the sentence regex belongs to the previous sentence.
    merged: list[str] = []
    for s in parts:
        if merged and MARKER.fullmatch(s):
            merged[-1] += " " + s
        else:
            merged.append(s)
    return merged


def strip_markers(text: str) -> tuple[str, list[int]]:
    nums: list[int] = []
    for m in MARKER.finditer(text):
        nums += [int(x) for x in re.split(r"\s*[,;]\s*", m.group(1))]
    clean = MARKER.sub("", text).strip()
    clean = re.sub(r"\s+([.,;:])", r"\1", clean)
    return clean, list(dict.fromkeys(nums))


class _Stemmer:
    def __init__(self) -> None:
        import Stemmer

        self._s = Stemmer.Stemmer("english")

    def terms(self, text: str) -> set[str]:
        words = [w.lower() for w in _WORD.findall(_unlatex(text))]
        # Numbers are content however short ("3K", "7"); other short words are not.
        keep = [w for w in words if w not in STOP and (len(w) > 2 or w[0].isdigit())]
        return set(self._s.stemWords(keep))


def specifics(text: str) -> set[str]:
    """Numbers and name-like tokens a claim asserts."""
    found = {m.group(0).strip().rstrip(".,").replace(" ", "") for m in _NUMBER.finditer(text)}
    found |= {m.group(0) for m in _NAME.finditer(text)}
    # Citation numbers and single digits used as ordinals are not claims.
    return {s for s in found if len(s) > 1 or not s.isdigit()}


def _unlatex(text: str) -> str:
    """Abstracts write 44\\% and $2\\times$; answers write 44% and 2x."""
    return text.replace("\\%", "%").replace("$", "").replace("\\times", "x")


def _normalise(text: str) -> str:
    return re.sub(r"\s+", "", _unlatex(text).lower().replace("\u2009", ""))


@dataclass
class Attribution:
    sentence: SentenceSupport
    cited_ids: list[str]  # paper ids, validated


class Attributor:
    def __init__(self, embedder: CachedEmbedder, threshold: float) -> None:
        self.embedder = embedder
        self.threshold = threshold
        self.stem = _Stemmer()

    def attribute(
        self, answer: str, hits: list[SearchHit], question: str = ""
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
        paper_terms = [self.stem.terms(h.paper.abstract + " " + h.paper.title) for h in hits]
        # Naming a paper is not evidence for a claim about it: the title's own
        # words are left out when measuring the claim's recall in that paper.
        title_terms = [self.stem.terms(h.paper.title) for h in hits]
        docs = [_normalise(h.paper.abstract + " " + h.paper.title) for h in hits]
        q_norm = _normalise(question)

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
                claim = terms - title_terms[h_i] or terms
                lex = len(claim & paper_terms[h_i]) / len(claim)
                per_paper.append((0.5 * lex + 0.5 * float(max(sims[si, best_u], 0.0)), best_u))
            valid = [m for m in markers if 1 <= m <= len(hits)]
            best_h = int(np.argmax([p[0] for p in per_paper]))
            support, best_u = per_paper[best_h]
            # Keep the model's markers that also support the claim; else re-attribute.
            keep = [m for m in valid if per_paper[m - 1][0] >= self.threshold - 0.1]
            cited = keep or [best_h + 1]
            # Every number/name the claim asserts must be in a paper it cites.
            known = q_norm + " ".join(docs[c - 1] for c in cited)
            missing = [s for s in specifics(text) if _normalise(s) not in known]
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
