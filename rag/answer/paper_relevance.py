"""Which retrieved papers an answer cites: one calibrated model per paper.

The answer decision (``rag.answer.decision``) says whether a question is answered;
for a question that asks for papers ("which papers…, and how do they
differ?") this says, paper by paper, whether a candidate paper answers it.
Such answers used to cite every paper the model picked a sentence from, so a
paper on another problem (a vision backdoor paper for an LLM-agent question)
rode along, and a paper the model overlooked was left out. Now each
candidate paper gets ``PaperSignals`` (retrieval score, cosine,
question-term coverage of its abstract, the model's evidence choice, and the
model's check of its own closest sentences) and one logistic regression, fit
on the tune split's gold papers by ``aqa eval fit-papers`` (coefficients in
``rag/answer/paper_relevance.json``), gives P(it answers). ``select_papers`` cites
the papers that reach ``AQA_PAPER_CITE_AT`` (the most probable one always),
chosen by the model or not, each quoted by the sentence that says what it
does. Every step is traced with each paper's P and the signals'
contributions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rag.answer.decision import DecisionModel, SignalSet
from rag.answer.evidence import Candidate
from rag.compare import MIN_SCORE, aspect_score
from rag.text import split_sentences
from rag.types import RuleFiring, SearchHit

PAPER_MODEL_FILE = Path(__file__).resolve().parent / "paper_relevance.json"
CHECKED_SENTENCES = 2  # a paper's closest sentences the per-paper check reads (the fit's setting)


@dataclass
class PaperSignals(SignalSet):
    """What the engine knows about one candidate paper for a question."""

    score_ratio: float = 0.0  # the paper's fused retrieval score over the best paper's
    dense: float = 0.0  # its best passage's dense cosine to the question
    best_sentence: float = 0.0  # best cosine of one of its candidate sentences to the question
    coverage: float = 0.0  # IDF-weighted share of the question's terms its title and abstract hold
    coverage_ratio: float = 0.0  # that share over the best share among the candidate papers
    distinctive: float = 0.0  # share of the question's distinctive terms it holds (1 with none)
    first: float = 0.0  # it is the top-ranked paper
    chosen: float = 0.0  # the model chose one of its sentences as evidence
    check_logit: float = 0.0  # logit of the check's P(its own sentences do not answer); 0: not asked


def paper_signals(question: str, hits: Sequence[SearchHit], cands: Sequence[Candidate],
                  chosen_ids: Sequence[int], *, overlap: Callable[[str, str], float],
                  terms: Callable[[str], set[str]], distinctive: Callable[[str], bool]
                  ) -> dict[int, PaperSignals]:
    """Signals of each hit that has candidate sentences, by its index in
    ``hits``; ``chosen_ids``: the model's raw evidence choice (candidate ids).
    ``check_logit`` is left at 0 (the caller asks the model: ``own_sentences``)."""
    idx = sorted({c.hit for c in cands})
    if not idx:
        return {}
    top = max(hits[i].score for i in idx) or 1.0
    texts = {i: hits[i].paper.title + " " + hits[i].paper.abstract for i in idx}
    cov = {i: overlap(question, texts[i]) for i in idx}
    best_cov = max(cov.values()) or 1.0
    asked = {t for t in terms(question) if distinctive(t)}
    ids = set(chosen_ids)
    picked = {c.hit for c in cands if c.id in ids}
    out: dict[int, PaperSignals] = {}
    for i in idx:
        held = len(asked & terms(texts[i])) / len(asked) if asked else 1.0
        out[i] = PaperSignals(
            score_ratio=hits[i].score / top, dense=hits[i].dense_score or 0.0,
            best_sentence=max(c.relevance for c in cands if c.hit == i), coverage=cov[i],
            coverage_ratio=cov[i] / best_cov, distinctive=held, first=float(i == idx[0]),
            chosen=float(i in picked))
    return out


def own_sentences(cands: Sequence[Candidate], hit: int, n: int = CHECKED_SENTENCES) -> list[str]:
    """A paper's ``n`` candidate sentences closest to the question, in abstract
    order: what the per-paper check reads."""
    own = sorted((c for c in cands if c.hit == hit), key=lambda c: -c.relevance)[:n]
    return [c.text for c in sorted(own, key=lambda c: c.position)]


def contribution_sentence(abstract: str) -> tuple[int, str] | None:
    """(position, sentence) of the abstract sentence that best says what the
    paper does (compare's approach cue: "we propose…"), if one reads as such."""
    sents = split_sentences(abstract)
    scored = [(_approach(t, i, len(sents)), -i, t) for i, t in enumerate(sents)]
    best = max(scored, default=None)
    return (-best[1], best[2]) if best and best[0] >= MIN_SCORE["approach"] else None


def paper_evidence(cands: Sequence[Candidate], hits: Sequence[SearchHit], hit: int, next_id: int,
                   relevance: Callable[[str], float]) -> list[Candidate]:
    """What a paper is quoted by for "which papers…": the sentence
    that says what it does (from its whole abstract: a new candidate numbered
    from ``next_id`` when it was not offered) and its candidate closest to
    the question, in abstract order."""
    own = sorted((c for c in cands if c.hit == hit), key=lambda c: -c.relevance)
    out = own[:1]
    found = contribution_sentence(hits[hit].paper.abstract)
    if found and all(c.text != found[1] for c in out):
        pos, text = found
        out.append(next((c for c in own if c.text == text), None)
                   or Candidate(next_id, hit, text, round(relevance(text), 4), pos))
    return sorted(out, key=lambda c: c.position)


def papers_evidence(cands: Sequence[Candidate], hits: Sequence[SearchHit], papers: Sequence[int],
                    relevance: Callable[[str], float]) -> dict[int, list[Candidate]]:
    """``paper_evidence`` of each of ``papers``, new candidates numbered after
    the offered ones (each id once)."""
    nxt = max((c.id for c in cands), default=0) + 1
    out: dict[int, list[Candidate]] = {}
    for h in papers:
        out[h] = paper_evidence(cands, hits, h, nxt, relevance)
        nxt = max([nxt - 1] + [c.id for c in out[h]]) + 1
    return out


class PaperModel:
    """P(a paper answers the question) from its ``PaperSignals`` (a fitted ``DecisionModel``)."""

    def __init__(self, model: DecisionModel) -> None:
        self.model = model

    @classmethod
    def load(cls, path: Path | None = None) -> PaperModel:
        return cls(DecisionModel.load(path or PAPER_MODEL_FILE))

    def p(self, s: PaperSignals) -> float:
        return self.model.p_answer(s)


def select_papers(chosen: list[Candidate], evidence: dict[int, list[Candidate]],
                  hits: Sequence[SearchHit], probs: dict[int, float],
                  contributions: dict[int, dict[str, float]], *, cite_at: float, max_papers: int,
                  signals: dict[int, PaperSignals] | None = None
                  ) -> tuple[list[Candidate], RuleFiring]:
    """The evidence of the papers that answer (rule ``paper_relevance``).

    Chosen papers under ``cite_at`` are dropped, except the most probable
    one (the answer decision already said the question is answered); other
    candidate papers join at ``cite_at`` or above, up to ``max_papers`` in
    all, with their ``evidence`` (``paper_evidence``); a cited paper whose
    chosen sentences do not say what it does gains the one that does."""
    signals = signals or {}
    papers = list(dict.fromkeys(c.hit for c in chosen))
    scored = [h for h in papers if h in probs]
    best = max(scored, key=lambda h: probs[h], default=None)
    keep = [h for h in papers if h not in probs or probs[h] >= cite_at or h == best]
    dropped = [h for h in papers if h not in keep]
    out = [c for c in chosen if c.hit in keep]
    added: list[int] = []
    extended: list[int] = []
    for h in sorted(probs, key=lambda h: -probs[h]):
        if len(keep) + len(added) >= max_papers:
            break
        if h not in keep and probs[h] >= cite_at and evidence.get(h):
            added.append(h)
            out += evidence[h]
    for h in keep:
        abstract = hits[h].paper.abstract
        if not any(does_what(c, abstract) for c in out if c.hit == h):
            have = {x.text for x in out}
            extra = [c for c in evidence.get(h, []) if c.text not in have and does_what(c, abstract)]
            if extra:
                out.append(max(extra, key=lambda c: says_what_it_does(c, abstract)))
                extended.append(h)
    out.sort(key=lambda c: (c.hit, c.position))
    rows = [{"paper_id": hits[h].paper.paper_id, "p": round(probs[h], 4),
             "status": ("added" if h in added else "dropped" if h in dropped else
                        "kept" if h in keep else "not cited"),
             "signals": signals[h].to_dict() if h in signals else {},
             "contributions": contributions.get(h, {})} for h in sorted(probs, key=lambda h: -probs[h])]
    name = {h: hits[h].paper.name for h in probs}
    detail = "; ".join(f"{r['status']} {name[h]} ({probs[h]:.2f})"
                       for r, h in zip(rows, sorted(probs, key=lambda h: -probs[h]), strict=True)
                       if h in papers or h in added)
    if extended:
        detail += "; what it does quoted for " + ", ".join(name[h] for h in extended)
    return out, RuleFiring("paper_relevance", bool(dropped or added or extended), detail or "no papers",
                           data={"cite_at": cite_at, "papers": rows})


def says_what_it_does(c: Candidate, abstract: str) -> float:
    """How strongly an evidence sentence reads as what its paper does
    (compare's approach cue, at its position in ``abstract``)."""
    return _approach(c.text, c.position, len(split_sentences(abstract)))


def does_what(c: Candidate, abstract: str) -> bool:
    """The sentence reads as what its paper does (compare's approach threshold)."""
    return says_what_it_does(c, abstract) >= MIN_SCORE["approach"]


def _approach(text: str, position: int, n_sents: int) -> float:
    """Compare's approach cue for the sentence at ``position`` of ``n_sents``."""
    return aspect_score("approach", text, position / max(1, n_sents - 1))
