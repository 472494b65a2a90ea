"""Question-aware checks on a raw model answer, before and after attribution.

Small local models answer "which paper…" with a bare "[3]" or "Excerpts [1]
and [5] …", and answer "how many…" with a supported sentence that holds no
number. These rules, all deterministic, turn marker-as-noun answers into
named, quoted papers and decline answers whose shape does not fit the question.
"""

from __future__ import annotations

import re

import numpy as np

from rag.attribution import _NAME, split_sentences, strip_markers
from rag.types import SearchHit

# A run of markers used as a noun ("According to [1]", "Excerpts [1] and [3]
# study…", "…is [5].", "[2] proposes…") names papers rather than citing a claim.
_CHAIN = re.compile(r"\[\d+\](?:\s*(?:,|and|or|&)?\s*\[\d+\])*")
_NOUN_BEFORE = re.compile(
    r"(?:\b(?:according to|in|by|from|is|are|was|see|excerpts?|papers?|abstracts?|studies)\s*|^\s*)$",
    re.IGNORECASE,
)
_LEAD_NOUN = re.compile(r"\b(?:the )?(?:excerpts?|papers?|abstracts?)\s+(?=(?-i:[A-Z]))", re.IGNORECASE)

# Asked at the start of the question or of one of its clauses: "how much a
# harmful answer helps" inside a "what measure…" question asks for no value.
QUANTITY = re.compile(
    r"(?:^|[,;]\s*|\band\s+)(?:\bhow (?:many|much|long|large|big|fast|often)\b|\bwhat (?:is |was |are )?(?:the )?"
    r"(?:exact |total |average |overall |final )?(?:number|accuracy|percentage|rate|size|budget|"
    r"speed-?up|score|value|amount|cost|count|error|improvement|reduction|gain|"
    r"learning[- ]rates?|batch size|epsilon|parameters?|values?|psnr|fid|bleu|perplexity|f1|auc|latency|"
    r"throughput|pass@\d)\b)",
    re.IGNORECASE,
)
_NUM = re.compile(
    r"\d|\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|"
    r"hundred|thousand|million|billion|dozen|half|twice|double|triple)\b",
    re.IGNORECASE,
)
WHICH_PAPER = re.compile(
    r"\b(?:which|what) (?:\w+ )?(?:papers?|works?|stud(?:y|ies)|methods?|approach(?:es)?|"
    r"systems?|frameworks?|one)\b|\bis there (?:a|any) (?:paper|work|study)\b",
    re.IGNORECASE,
)


def name_markers(raw: str, hits: list[SearchHit]) -> str:
    """Replace marker runs used as nouns with "Title [n]" so the sentence says
    which paper it means; the marker stays as its citation."""

    def titled(m: re.Match) -> str:
        return re.sub(
            r"\[(\d+)\]",
            lambda x: f"{hits[int(x.group(1)) - 1].paper.title} [{x.group(1)}]"
            if 1 <= int(x.group(1)) <= len(hits) else x.group(0),
            m.group(0),
        )

    out: list[str] = []
    for sent in split_sentences(raw):
        pieces, last = [], 0
        for m in _CHAIN.finditer(sent):
            before = sent[last : m.start()]
            after = sent[m.end():].strip()
            # "[1] MELON is…" is a leading citation; "[2] proposes…" uses [2] as a noun.
            leading_cite = not sent[: m.start()].strip() and after[:1].isupper()
            noun = _NOUN_BEFORE.search(sent[: m.start()]) and after not in ("", ".") and not leading_cite
            noun = noun or bool(re.search(r"\b(?:is|are|was|to|in)\s*$", sent[: m.start()], re.I))
            pieces += [before, titled(m) if noun else m.group(0)]
            last = m.end()
        pieces.append(sent[last:])
        out.append(_LEAD_NOUN.sub("", "".join(pieces)))
    return " ".join(out)


def markers_only(raw: str) -> list[int] | None:
    """The cited numbers when an answer is nothing but markers ("[3]", "[1][2]")."""
    text, nums = strip_markers(raw)
    leftover = re.sub(r"\b(excerpts?|and|papers?|the|is|are)\b|[\s.,;:]", "", text, flags=re.I)
    return nums if nums and not leftover else None


def identification_answer(nums: list[int], hits: list[SearchHit], question: str, embedder) -> str:
    """Render "[3]" as "Title [3]: <the abstract sentence closest to the question>"."""
    qv = embedder.embed_query(question)
    parts = []
    for n in nums:
        if not 1 <= n <= len(hits):
            continue
        sents = split_sentences(hits[n - 1].paper.abstract)
        best = sents[int(np.argmax(embedder.embed_texts(sents) @ qv))] if sents else ""
        parts.append(f"{hits[n - 1].paper.title} [{n}]: {best}")
    return "\n".join(parts)


def restates_question(sentence: str, question: str, hits: list[SearchHit], terms) -> list[int]:
    """Markers of a sentence that only restates the question and names papers
    ("The paper that does X is MILS [5]"): it claims "paper n is the answer",
    which is checked by quoting paper n, not by the restated words."""
    if not WHICH_PAPER.search(question):
        return []
    text, nums = strip_markers(sentence)
    nums = [n for n in nums if 1 <= n <= len(hits)]
    if not nums:
        return []
    titles: set[str] = set()
    for n in nums:
        titles |= terms(hits[n - 1].paper.title)
    extra = terms(text) - terms(question) - titles
    return nums if len(extra) <= 1 else []


def adds_nothing(sentences: list[str], question: str, terms) -> bool:
    """True when every content word of the answer is already in the question
    ("The base LLM is fine-tuned with ReVISE.")."""
    # Paper names are new information: "BARK and DRAGO use Bayesian optimization"
    # answers "which papers use Bayesian optimization?".
    known = terms(question)
    said: set[str] = set()
    for s in sentences:
        said |= terms(strip_markers(s)[0])
    return not (said - known)


def asks_quantity(question: str) -> bool:
    return bool(QUANTITY.search(question))


def has_number(sentences, question: str, about: set[str] | None = None) -> bool:
    """A supported sentence states a value the question did not already hold
    ("two quivers" is not an answer); with ``about`` (paper ids the question
    names), it must also cite one of those papers."""
    asked = {m.group(0).lower() for m in _NUM.finditer(question)}
    return any(
        s.supported
        and any(m.group(0).lower() not in asked for m in _NUM.finditer(s.text))
        and (not about or about & set(ids))
        for s, ids in sentences
    )


def question_entities(question: str, hits: list[SearchHit]) -> dict[str, set[str]]:
    """Name-like words of the question (MELON, AgentDojo) that pick out at most
    two retrieved papers: entity -> ids of the papers that mention it."""
    out: dict[str, set[str]] = {}
    for ent in {m.group(0) for m in _NAME.finditer(question)}:
        low = ent.lower()
        ids = {h.paper.paper_id for h in hits
               if low in (h.paper.abstract + " " + h.paper.title).lower()}
        if 1 <= len(ids) <= 2:
            out[ent] = ids
    return out

