"""Side-by-side comparison of 2-4 papers.

Cells are extracted, not generated: each aspect's cell is the clause of an
abstract sentence that best matches the aspect's cue words (the whole
sentence is kept as the cell's verbatim quote), so every cell is grounded by
construction and "not stated" is an honest answer. Cue rules are general:
sentences before a paper's own contribution ("we propose…") are its context
and can state its problem, never its limitations. Only the synthesis of how
the papers differ comes from the LLM; it goes through the same citation check
as answers, and a paper the model leaves out gets a sentence built from its
own cells, so the synthesis always covers every compared paper.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from rag.text import NUMBER, clean_latex, normalise, sentence_spans, split_sentences
from rag.types import ASPECTS, CompareCell, Paper, SearchHit, SentenceSupport

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
        # Others' results are context, not this paper's results.
        (r"^(previous|prior|existing|earlier|recent) (work|works|methods?|approaches|studies)\b",
         -1.5),
    ],
    "limitations": [
        (r"\b(our limitations?|limitations? of (our|this|the proposed)|limited to|future work|"
         r"does not|do not|cannot|only applies|restricted to|at the cost of|trade-?off|"
         r"remains? (an )?open|left for future|we leave)\b", 1.0),
        # Others' shortcomings are the paper's problem statement, not its limitation.
        (r"\b(existing|prior|previous|current|conventional|traditional|state-of-the-art) "
         r"(\w+ )?(methods?|models?|approaches|works?|defenses|techniques|systems?)\b", -1.5),
        (r"^(however|yet|but|although|despite|meanwhile)\b", -0.6),
    ],
}
_COMPILED = {a: [(re.compile(p, re.IGNORECASE), w) for p, w in cues] for a, cues in CUES.items()}
MIN_SCORE = {"problem": 0.9, "approach": 0.6, "data": 0.9, "results": 0.8, "limitations": 0.9}
REUSE_PENALTY = 0.5  # a sentence may fill two cells, but a fresh one is preferred


def aspect_score(aspect: str, sentence: str, position: float) -> float:
    """How strongly a sentence at ``position`` (0..1 in its abstract) reads as
    stating ``aspect`` (problem, approach, data, results, limitations)."""
    s = sum(w * len(rx.findall(sentence)) for rx, w in _COMPILED[aspect])
    if aspect == "problem":
        s += 0.6 * (1 - position)  # problems are stated early
    if aspect == "approach":
        s += 0.3 * (1 - position)  # the main contribution comes before the extras
    if aspect == "results":
        s += 0.4 * position  # results come late
    return s


# ---------------------------------------------------------------- clauses

# Clause boundaries inside a sentence: semicolons, colons, dashes, and a comma
# before a connective that starts a new clause.
_CLAUSE_BREAK = re.compile(
    r";\s+|:\s+(?=[A-Za-z])|\s+[—–]\s+|\s+--\s+|,\s+(?=(?:while|whereas|but|which|thereby|"
    r"although|yet|where|so that|such that|and (?:we|our|it|they|this|achiev\w+|"
    r"outperform\w*|improv\w+|reduc\w+|show\w*|demonstrat\w+))\b)"
)
_LEAD_CONNECTIVE = re.compile(r"^(?:and|but|while|whereas|which|thereby|yet|so that|such that)\s+",
                              re.IGNORECASE)
_THAT_CLAUSE = re.compile(
    r"\b(?:show|shows|showed|demonstrate|demonstrates|demonstrated|prove|proves|indicate|"
    r"indicates|reveal|reveals|confirm|confirms|find|finds)\s+that\s+(.+)$", re.IGNORECASE)
SHORT_SENTENCE = 26  # words: a sentence this short is its own clause


def clauses(sentence: str) -> list[str]:
    """The clauses of a sentence, each a complete piece (never cut mid-way)."""
    parts = [p.strip(" ,") for p in _CLAUSE_BREAK.split(sentence) if p and p.strip(" ,")]
    return parts or [sentence]


# A discourse connective that opens a sentence ("However, …") ties it to the one
# before; a cell drops it. A pronoun or "this …" left at the start refers back:
# such a cell takes the sentence before it along (see _self_contained).
_LEAD_DISCOURSE = re.compile(
    r"^(?:however|moreover|furthermore|additionally|in addition|therefore|thus|hence|"
    r"meanwhile|consequently|nevertheless|nonetheless|also|finally|lastly|besides)\b,?\s*",
    re.IGNORECASE)
_ANAPHOR_START = re.compile(r"^(?:they|it|this|these|those|their|its|such|both|there)\b",
                            re.IGNORECASE)
NAMING_SENTENCE = 14  # words: an approach cell this short only names the method


def _tidy(clause: str) -> str:
    clause = _LEAD_DISCOURSE.sub("", _LEAD_CONNECTIVE.sub("", clause.strip()))
    clause = clause[:1].upper() + clause[1:]
    if clause and clause[-1] not in ".!?":
        clause += "."
    return clean_latex(clause)


def answering_clause(aspect: str, sentence: str, position: float) -> str:
    """The part of ``sentence`` that answers ``aspect``: the whole sentence
    when short, else its best-matching clause (a results sentence "X shows
    that Y" gives Y). Whole clauses only: nothing is truncated."""
    if aspect == "results" and (m := _THAT_CLAUSE.search(sentence)) and len(m.group(1).split()) >= 5:
        sentence = m.group(1)
    if len(sentence.split()) <= SHORT_SENTENCE:
        return _tidy(sentence)
    parts = [c for c in clauses(sentence) if len(c.split()) >= 5]
    if len(parts) <= 1:
        return _tidy(sentence)
    best = max(parts, key=lambda c: (aspect_score(aspect, c, position), -parts.index(c)))
    return _tidy(best)


_CONTRIBUTION = re.compile(r"\bwe (propose|introduce|present|develop|design|formulate|devise)\b|"
                           r"\b(this|our) (paper|work) (proposes|introduces|presents)\b",
                           re.IGNORECASE)


def _self_contained(aspect: str, i: int, sents: list[str], text: str,
                    spans: dict[int, tuple[int, int]], abstract: str) -> tuple[str, str]:
    """(cell text, verbatim quote) for sentence ``i``, made to stand alone: a
    cell that opens by referring back ("they remain vulnerable…") takes the
    sentence before it, and an approach cell that only names the method ("We
    present MELON, a novel IPI defense.") takes the next, which says how it
    works. Joined sentences are adjacent in the abstract, so the quote is one
    verbatim slice of it."""
    lo = hi = i
    if _ANAPHOR_START.match(text) and i > 0:
        lo = i - 1
    if aspect == "approach" and len(text.split()) < NAMING_SENTENCE and i + 1 < len(sents):
        hi = i + 1
    if (lo, hi) == (i, i) or lo not in spans or hi not in spans:
        return text, sents[i]
    quote = abstract[spans[lo][0]:spans[hi][1]]
    parts = [_tidy(sents[j]) if j != i else text for j in range(lo, hi + 1)]
    if lo < i:  # the referring sentence keeps its own words ("They remain…")
        parts[i - lo] = text[:1].upper() + text[1:]
    return " ".join(parts), quote


def extract_cells(paper: Paper) -> dict[str, CompareCell]:
    sents = split_sentences(paper.abstract)
    spans = dict(enumerate(sentence_spans(paper.abstract)))
    if len(spans) != len(sents):  # a sentence the splitter rewrote: no joining
        spans = {}
    cells: dict[str, CompareCell] = {}
    used: set[int] = set()
    # Sentences before the paper's own contribution are its context: they can
    # state the problem, never its limitations.
    first_own = next((i for i, s in enumerate(sents) if _CONTRIBUTION.search(s)), 0)
    # Fill the most specific aspects first so one sentence is not reused everywhere.
    for aspect in ("approach", "results", "data", "limitations", "problem"):
        scored = []
        for i, sent in enumerate(sents):
            if aspect == "limitations" and i < first_own:
                continue
            if aspect == "problem" and first_own and i > first_own:
                continue  # the problem is stated before the contribution
            sc = aspect_score(aspect, sent, i / max(1, len(sents) - 1))
            scored.append((sc - (REUSE_PENALTY if i in used else 0), -i))
        best = max(scored, default=(0.0, 1))
        i = -best[1]
        if i >= 0 and scored and best[0] >= MIN_SCORE[aspect]:
            used.add(i)
            text = answering_clause(aspect, sents[i], i / max(1, len(sents) - 1))
            text, quote = _self_contained(aspect, i, sents, text, spans, paper.abstract)
            cells[aspect] = CompareCell(text=text, quote=quote)
        else:
            cells[aspect] = CompareCell(text="not stated", quote=None)
    return {a: cells[a] for a in ASPECTS}


# -------------------------------------------------------------- synthesis


def short_name(paper: Paper) -> str:
    """What the synthesis calls a paper: its title before a colon, if short."""
    title = paper.title.strip()
    head = re.split(r"\s*[:：]\s+", title, maxsplit=1)[0]
    return head if len(head.split()) <= 8 else " ".join(head.split()[:8]) + "…"


def synthesis_notes(papers: list[Paper], cells: dict[str, dict[str, CompareCell]]) -> str:
    lines = []
    for n, p in enumerate(papers, 1):
        row = cells[p.paper_id]
        bits = [f"{a}: {row[a].text}" for a in ("problem", "approach", "results") if row[a].stated]
        lines.append(f"[{n}] {short_name(p)} — " + " ".join(bits))
    return "\n".join(lines)


_VERB_S = {"propose": "proposes", "introduce": "introduces", "present": "presents",
           "develop": "develops", "design": "designs", "study": "studies",
           "formulate": "formulates", "devise": "devises", "derive": "derives",
           "establish": "establishes", "analyze": "analyzes", "analyse": "analyses",
           "show": "shows", "demonstrate": "demonstrates", "investigate": "investigates",
           "provide": "provides", "identify": "identifies", "explore": "explores"}


def third_person(clause: str, name: str, n: int) -> str:
    """A grammatical sentence about paper ``n`` from one of its cells."""
    body = clause.rstrip(".").strip()
    m = re.match(r"^(?:(?:in this (?:paper|work)|here|to this end|to address this),?\s+)?"
                 r"we\s+(\w+)\s+(.*)$", body, re.IGNORECASE | re.DOTALL)
    if m and m.group(1).lower() in _VERB_S:
        rest = re.sub(r"\bour\b", "its", m.group(2))
        rest = re.sub(r"\bwe\b", "the authors", rest)
        return f"{name} [{n}] {_VERB_S[m.group(1).lower()]} {rest}."
    body = re.sub(r"\bour\b", "its", body)
    return f"{name} [{n}] reports that {body[:1].lower() + body[1:]}." if re.match(
        r"^[A-Z][a-z]", body) and not re.match(r"^[A-Z][a-z]*[A-Z]", body) else (
        f"For {name} [{n}], the abstract states: {body}.")


_SUBJECT_MARKER = re.compile(
    r"(^|[,;:]\s*|\b(?:while|whereas|and|but|whilst)\s+)((?:\[\d+\]\s*)+)(?=[a-z])")


def marker_subjects(raw: str, names: Sequence[str]) -> str:
    """"[1] focuses on X, while [2] uses Y" -> "A [1] focuses on X, while B [2]
    uses Y": a marker in a subject's place gets the paper's name, so no
    sentence is left without its subject once markers move to its end."""

    def fix(m: re.Match) -> str:
        nums = [int(x) for x in re.findall(r"\d+", m.group(2))]
        if not all(1 <= k <= len(names) for k in nums):
            return m.group(0)
        named = " and ".join(f"{names[k - 1]} [{k}]" for k in nums)
        return f"{m.group(1)}{named} "

    out = []
    for line in raw.splitlines():
        out.append(_SUBJECT_MARKER.sub(fix, line.strip()))
    return "\n".join(out)


def synthesize(papers: list[Paper], cells: dict[str, dict[str, CompareCell]], raw: str,
               attribute: Callable[[str, list[SearchHit]], list[Any]],
               hits: list[SearchHit]) -> tuple[str, list[SentenceSupport]]:
    """The checked synthesis: the model's sentences (subjects restored, claims
    only, once each), citation-checked by ``attribute``; then one sentence
    built from its own cells for each paper no checked sentence covers."""
    names = [short_name(p) for p in papers]
    attrs = attribute(marker_subjects(raw, names), hits)
    seen: set[str] = set()
    sentences: list[SentenceSupport] = []
    for a in attrs:
        sent = a.sentence
        key = sent.text.lower()
        if sent.contentless or key in seen or not re.match(r"^\W*[A-Z0-9]", sent.text):
            continue  # lower-case start: a fragment, not a sentence
        seen.add(key)
        sentences.append(sent)
    sentences = sentences[: len(papers) + 2]
    for sent in sentences:
        # Nothing unchecked is shown as a claim: it stays visible, struck through.
        why = misattributed(sent.text, papers, names) or (
            None if sent.supported else "not supported by the abstracts it cites")
        if why:
            sent.supported, sent.withdrawn, sent.withdrawn_reason = False, True, why
    covered = {c for s in sentences if s.supported for c in s.citations}
    for n, p in enumerate(papers, 1):
        if n in covered:
            continue
        row = cells[p.paper_id]
        cell = next((row[a] for a in ("approach", "problem", "results") if row[a].stated), None)
        if cell is None:
            continue
        text = third_person(cell.text, names[n - 1], n)
        sentences.append(SentenceSupport(text=re.sub(r"\s*\[\d+\]", "", text), citations=[n],
                                         support=1.0, supported=True, paper_id=p.paper_id,
                                         evidence=cell.quote))
    synthesis = " ".join(
        s.text + (" " + "".join(f"[{c}]" for c in s.citations) if s.citations else "")
        for s in sentences if not s.withdrawn
    )
    return synthesis, sentences


def misattributed(text: str, papers: Sequence[Paper], names: Sequence[str]) -> str | None:
    """Why a comparison sentence gives a paper a number that is not its own:
    the sentence names papers, and a number it states is in none of their
    abstracts (None when every number belongs to a paper it names)."""
    low = text.lower()
    named = [p for p, n in zip(papers, names, strict=True)
             if n.lower() in low or p.name.lower() in low]
    if not named:
        return None
    for m in NUMBER.finditer(text):
        num = m.group(0).strip().rstrip(".,")
        if len(num) < 2 and num.isdigit():
            continue  # a single digit ("two", "3 tasks") is no result
        key = normalise(num)
        if any(key in normalise(p.abstract) for p in named):
            continue
        owner = next((p for p in papers if key in normalise(p.abstract)), None)
        whose = f"; it is {short_name(owner)}'s" if owner is not None else ""
        return f"{num} is not in the abstract of {' or '.join(short_name(p) for p in named)}{whose}"
    return None
