"""The named decision rules that decide, in code, whether an answer stands.

Each rule has a name, a one-line docstring, its thresholds in ``Settings``,
and returns a ``RuleFiring`` that goes into the answer's JSON trace. Rules
are general (about the shape of evidence and questions), never about
particular questions or papers; each stays only if it helps on questions
it was not written from (docs/architecture.md, "Adding a rule or a signal"). What a question
asks for and which papers it names are read in ``rag.answer.reading``.

Gates before the model:  off_topic, unknown_name.
Evidence decisions:      no_evidence, off_question_evidence, value_not_stated,
                         value_clause_uncovered, name_not_stated, named_paper_missing, one_sided_comparison,
                         question_part_uncovered, pinned_paper_uncovered, evidence_not_answering.
After the decision:      compared_paper_does_what.
After the synthesis:     each_paper_quoted, claim_not_in_evidence, names_uncited_paper, claim_of_another_paper,
                         evidence_extended, cut_off_sentence,
                         unchosen_paper_not_answering, says_not_stated, all_claims_withdrawn.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from rag import claims
from rag.answer.evidence import Candidate
from rag.answer.paper_relevance import does_what, says_what_it_does
from rag.answer.reading import (
    asked_measure,
    asks_link,
    asks_name,
    asks_overview,
    asks_value,
    compares_papers,
    frame_verbs,
    names_in,
    value_clauses,
)
from rag.config import Settings
from rag.labels import COMMON_ACRONYMS
from rag.text import (
    DANGLING,
    NOT_STATED,
    STOP,
    WORD,
    formulas,
    has_link,
    has_value,
    normalise,
    number_words,
    specifics,
    states_count,
    stemmer,
    strip_markers,
    unlatex,
    values,
)
from rag.types import RuleFiring


def off_topic(top_dense: float, s: Settings) -> RuleFiring:
    """No retrieved passage is semantically close to the question."""
    fired = top_dense < s.retrieval.relevance_floor
    return RuleFiring("off_topic", fired, f"best passage cosine {top_dense:.2f} vs floor {s.retrieval.relevance_floor}")


def unknown_name(names: Sequence[str]) -> RuleFiring:
    """The question names a technical term (NeRF, HumanEval) that no abstract contains."""
    return RuleFiring("unknown_name", bool(names), ", ".join(names) or "every name is indexed")


def no_evidence(chosen: Sequence[int]) -> RuleFiring:
    """The model chose no sentence as answering the question."""
    return RuleFiring("no_evidence", not chosen, f"model chose {list(chosen)}")


def evidence_not_answering(p_no: float | None, threshold: float) -> RuleFiring:
    """Asked afresh, with only the chosen sentences and the question in view,
    the model gives at least ``threshold`` probability to "they do not answer
    it" (no verdict fires nothing; an overview question is never checked)."""
    if p_no is None:
        return RuleFiring("evidence_not_answering", False, "no verdict")
    return RuleFiring("evidence_not_answering", p_no >= threshold,
                      f"P(not answered) {p_no:.2f} vs threshold {threshold:.2f}")


def off_question_evidence(chosen: list[Candidate], s: Settings) -> tuple[list[Candidate], RuleFiring]:
    """Drops chosen sentences far less related to the question than the best
    one; fires (declines) when even the best is below the evidence floor."""
    if not chosen:
        return chosen, RuleFiring("off_question_evidence", False, "nothing chosen")
    best = max(c.relevance for c in chosen)
    if best < s.evidence.evidence_floor:
        return [], RuleFiring("off_question_evidence", True,
                              f"best chosen sentence cosine {best:.2f} < {s.evidence.evidence_floor}")
    keep = [c for c in chosen if c.relevance >= best - s.evidence.evidence_spread]
    dropped = len(chosen) - len(keep)
    return keep, RuleFiring("off_question_evidence", False,
                            f"best {best:.2f}; dropped {dropped} far below it")


def value_not_stated(question: str, chosen: list[Candidate],
                     cands: Sequence[Candidate] = ()) -> tuple[list[Candidate], RuleFiring]:
    """A question asking for a value (how many, what accuracy, what bound, at
    what URL) whose chosen evidence states no number or formula beyond those in
    the question (no web address, for a URL; for "how many X", no number
    followed by X). Before firing, a
    candidate sentence of the chosen papers that states a value and holds the
    question's own terms (at least two of them), or states a count of what a
    "how many X" question counts, replaces the evidence."""
    if asks_link(question):  # "at what URL…": a web address is the value asked for
        return _stated_or_replaced("value_not_stated", "a web address", question, chosen, cands,
                                   lambda c: has_link(c.text), "no chosen sentence gives a web address")
    if not asks_value(question):
        return chosen, RuleFiring("value_not_stated", False, "question asks for no value")
    asked = {normalise(x) for x in specifics(question)}
    asked_words, asked_values = number_words(question), values(question)
    asked_formulas = formulas(question)
    measure = asked_measure(question)

    def states(c: Candidate) -> bool:
        vals = {normalise(x) for x in specifics(unlatex(c.text)) if any(ch.isdigit() for ch in x)}
        # "given two quivers" states no value to "when classifying whether two quivers…".
        new = bool(vals - asked or (not vals and (values(c.text) - asked_values
                                                  or number_words(c.text) - asked_words))
                   or formulas(c.text) - asked_formulas)
        # A count of X is stated only where a number counts X ("how many GPUs"
        # needs "8 GPUs"; "two tasks … preference pairs" counts no pairs).
        return new and (not measure or states_count(c.text, measure))

    # "Four specific policy recommendations" answers "how many concrete
    # recommendations" however the rest of the question is worded.
    return _stated_or_replaced("value_not_stated", "a value", question, chosen, cands, states,
                               "no chosen sentence states a new value",
                               linked=lambda c: states_count(c.text, measure))


def value_clause_uncovered(question: str, chosen: list[Candidate], cands: Sequence[Candidate],
                           own: str = "") -> tuple[list[Candidate], RuleFiring]:
    """Evidence where a clause asking for a value ("…, and how much does it
    beat prior methods?") has no sentence that states a value and shares a
    word with it (beyond ``own``, the papers' names) gains the candidate of a
    chosen paper that does, per clause. It only adds evidence;
    value_not_stated decides whether a value is stated at all."""
    stem = stemmer()
    mine = stem.terms(own)
    papers = {c.hit for c in chosen}
    added: list[Candidate] = []
    unmet: list[str] = []
    for clause in (c - mine for c in value_clauses(question)):
        if not clause:
            continue

        def fits(c: Candidate, clause: set[str] = clause) -> bool:
            return has_value(c.text) and bool(clause & stem.terms(c.text))

        if any(fits(c) for c in chosen + added):
            continue
        pool = [c for c in cands if c.hit in papers and c not in chosen + added and fits(c)]
        if pool:
            added.append(max(pool, key=lambda c: (len(clause & stem.terms(c.text)), c.relevance)))
        else:
            unmet.append("/".join(sorted(clause)))
    if not added:
        detail = f"no candidate states a value about {'; '.join(unmet)}" if unmet else "value clauses covered"
        return chosen, RuleFiring("value_clause_uncovered", False, detail)
    return sorted(chosen + added, key=lambda c: c.id), RuleFiring(
        "value_clause_uncovered", True, f"added [{', '.join(str(c.id) for c in added)}]")


def _stated_or_replaced(rule: str, what: str, question: str, chosen: list[Candidate],
                        cands: Sequence[Candidate], states, fired: str,
                        linked=lambda c: False) -> tuple[list[Candidate], RuleFiring]:
    """Shared by value_not_stated and name_not_stated: the evidence stands if a
    chosen sentence ``states`` what is asked; else a candidate of the chosen
    papers that does, and holds the question's terms (at least two) or is
    otherwise ``linked`` to it (states a count of what is counted), replaces
    it (for a comparison of papers, only that paper's sentences: each compared
    paper keeps its evidence); else the rule fires."""
    for c in chosen:
        if states(c):
            return chosen, RuleFiring(rule, False, f"sentence [{c.id}] states {what}")
    stem = stemmer()
    focus = stem.terms(question)
    papers = {c.hit for c in chosen}
    fits = [c for c in cands if c.hit in papers and states(c)
            and (len(focus & stem.terms(c.text)) >= min(2, len(focus)) or linked(c))]
    if fits:
        best = max(fits, key=lambda c: c.relevance)
        kept = [c for c in chosen if c.hit != best.hit] if compares_papers(question) else []
        return sorted([best] + kept, key=lambda c: c.id), RuleFiring(
            rule, False, f"replaced by [{best.id}], which states {what} in the question's terms"
            + (f"; the other papers' evidence kept ({len(kept)})" if kept else ""))
    return chosen, RuleFiring(rule, True, fired)


_SIZE = re.compile(r"^\d+(?:\.\d+)?[KMBT]$")  # a model or data size (1.6B, 600M), not a name


def name_not_stated(question: str, chosen: list[Candidate], cands: Sequence[Candidate] = (),
                    own=lambda c: "", generic=lambda name: False,
                    abbreviations=lambda c: frozenset()) -> tuple[list[Candidate], RuleFiring]:
    """A question asking which named artifact (dataset, benchmark, base model)
    whose chosen evidence names none beyond the question's own names and its
    paper's title (``own(candidate)``; a field's term, ``generic``, and an
    acronym coined by its abstract from lowercase words, ``abbreviations``,
    name nothing). Before firing, a candidate sentence of the chosen papers
    that names one and holds the question's terms (at least two) replaces the evidence."""
    if not asks_name(question):
        return chosen, RuleFiring("name_not_stated", False, "question asks for no name")
    asked = normalise(question)

    def states(c: Candidate) -> bool:
        mine, local = own(c), abbreviations(c)
        skip, own_words = normalise(mine), {normalise(w) for w in re.findall(r"[\w.+]+", mine)}

        def names_other(x: str) -> bool:
            n, head = normalise(x), x.split("-")[0]
            # "MELON-Aug" is the paper's own variant; "1.6B" a size; "SOTA" no artifact.
            variant = len(head) >= 3 and normalise(head) in own_words
            return not (n in asked or n in skip or variant or _SIZE.match(x)
                        or x.lower() in COMMON_ACRONYMS or generic(x) or x in local)

        return any(names_other(x) for x in names_in(c.text))

    return _stated_or_replaced("name_not_stated", "a name", question, chosen, cands, states,
                               "no chosen sentence names what is asked")


def named_paper_missing(named: dict[str, list[int]], chosen: list[Candidate],
                        cands: list[Candidate], s: Settings) -> tuple[list[Candidate], RuleFiring]:
    """A question naming several papers gets evidence from each: a named paper
    the model chose nothing from adds its sentence closest to the question;
    fires (declines) when that sentence is below the evidence floor."""
    used = {c.hit for c in chosen}
    added, missing = [], []
    for name, idx in named.items():
        if used & set(idx):
            continue
        own = [c for c in cands if c.hit in idx]
        best = max(own, key=lambda c: c.relevance, default=None)
        if best is not None and best.relevance >= s.evidence.evidence_floor:
            added.append(best)
            used.add(best.hit)
        else:
            missing.append(name)
    chosen = sorted({c.id: c for c in chosen + added}.values(), key=lambda c: c.id)
    detail = (f"no evidence from {', '.join(missing)}" if missing else
              f"added [{', '.join(str(c.id) for c in added)}]" if added else "named papers covered")
    return chosen, RuleFiring("named_paper_missing", bool(missing), detail)


def question_part_uncovered(question: str, chosen: list[Candidate], cands: Sequence[Candidate],
                            terms, distinctive, covered_by: str = "",
                            max_added: int = 2) -> tuple[list[Candidate], RuleFiring]:
    """Evidence that leaves part of the question unanswered (a distinctive
    question term that no chosen sentence holds) gains the candidate sentence
    of a chosen paper holding the most such terms, up to ``max_added``.
    ``terms``: text -> stemmed terms; ``distinctive``: term -> bool (rare in the
    index); ``covered_by``: text whose terms count as covered (the papers' titles)."""
    if not chosen:
        return chosen, RuleFiring("question_part_uncovered", False, "nothing chosen")
    have = set().union(*(terms(c.text) for c in chosen)) | terms(covered_by)
    missing = {t for t in terms(question) if t not in have and distinctive(t)}
    papers = {c.hit for c in chosen}
    pool = [c for c in cands if c.hit in papers and c not in chosen]
    added: list[Candidate] = []
    while missing and pool and len(added) < max_added:
        best = max(pool, key=lambda c: (len(missing & terms(c.text)), c.relevance))
        gain = missing & terms(best.text)
        if not gain:
            break
        added.append(best)
        pool.remove(best)
        missing -= gain
    if not added:
        return chosen, RuleFiring("question_part_uncovered", False,
                                  f"uncovered: {', '.join(sorted(missing))}" if missing else "covered")
    chosen = sorted(chosen + added, key=lambda c: c.id)
    return chosen, RuleFiring("question_part_uncovered", True,
                              f"added [{', '.join(str(c.id) for c in added)}]"
                              + (f"; still uncovered: {', '.join(sorted(missing))}" if missing else ""))


def one_sided_comparison(question: str, chosen: list[Candidate], cands: list[Candidate],
                         s: Settings, one_named: bool = False,
                         pinned: bool = False) -> tuple[list[Candidate], RuleFiring]:
    """A comparative question ("how do … differ") whose evidence covers one
    paper gains the closest sentence of the next-ranked paper, if it is close
    (of the next ``pinned`` paper, however close: the user chose both)."""
    if not compares_papers(question, one_named) or len({c.hit for c in chosen}) != 1:
        return chosen, RuleFiring("one_sided_comparison", False, "not a one-sided comparison")
    have = chosen[0].hit
    floor = float("-inf") if pinned else s.evidence.evidence_floor
    others = [c for c in cands if c.hit != have and c.relevance >= floor]
    if not others:
        return chosen, RuleFiring("one_sided_comparison", False, "no second paper close enough")
    nxt = min(c.hit for c in others)
    best = max((c for c in others if c.hit == nxt), key=lambda c: c.relevance)
    chosen = sorted(chosen + [best], key=lambda c: c.id)
    return chosen, RuleFiring("one_sided_comparison", True, f"added [{best.id}]")


def compared_paper_does_what(question: str, chosen: list[Candidate], cands: Sequence[Candidate],
                             abstract: Callable[[Candidate], str], one_named: bool = False
                             ) -> tuple[list[Candidate], RuleFiring]:
    """A comparison of papers quotes each compared paper by what it does:
    a paper of the evidence none of whose chosen sentences says what it
    does (its motivation or setting only) gains its candidate sentence that
    does (``paper_relevance.does_what``), if one was offered."""
    if not compares_papers(question, one_named) or len({c.hit for c in chosen}) < 2:
        return chosen, RuleFiring("compared_paper_does_what", False, "not a comparison of papers")
    added: list[Candidate] = []
    for hit in dict.fromkeys(c.hit for c in chosen):
        text = abstract(next(c for c in chosen if c.hit == hit))
        if any(does_what(c, text) for c in chosen if c.hit == hit):
            continue
        doing = [c for c in cands if c.hit == hit and does_what(c, text)]
        if doing:
            added.append(max(doing, key=lambda c: says_what_it_does(c, text)))
    if not added:
        return chosen, RuleFiring("compared_paper_does_what", False,
                                  "each compared paper's evidence says what it does")
    chosen = sorted(chosen + added, key=lambda c: c.id)
    return chosen, RuleFiring("compared_paper_does_what", True,
                              "added " + ", ".join(f"[{c.id}]" for c in added),
                              data={"added": [c.id for c in added]})


def each_paper_quoted(question: str, papers: list[str], written: set[str],
                      one_named: bool = False, pinned: int = 0) -> RuleFiring:
    """A comparison of papers, or an overview of ``pinned`` (two or more)
    chosen papers ("Summarize these papers"), whose synthesis leaves a paper
    of its evidence (``papers``: the paper of each chosen sentence) without a
    sentence (``written``: the papers it cites or names) quotes that paper's
    chosen sentences under its name after the synthesis."""
    names = list(dict.fromkeys(papers))
    left = [n for n in names if n not in written]
    if len(names) < 2 or not left:
        return RuleFiring("each_paper_quoted", False, "every paper of the evidence written about")
    overview = pinned >= 2 and asks_overview(question)
    if not (overview or compares_papers(question, one_named)):
        return RuleFiring("each_paper_quoted", False, "not a comparison or overview of papers")
    return RuleFiring("each_paper_quoted", True, "quoted " + ", ".join(left),
                      data={"quoted": left, "asks": "overview" if overview else "comparison"})


def pinned_paper_uncovered(question: str, chosen: list[Candidate], cands: list[Candidate],
                           n_pinned: int) -> tuple[list[Candidate], RuleFiring]:
    """An overview of chosen papers ("Summarize these papers") quotes each of
    them: every pinned paper without a chosen sentence gains its closest one."""
    if n_pinned < 2 or not asks_overview(question):
        return chosen, RuleFiring("pinned_paper_uncovered", False, "not an overview of papers")
    have = {c.hit for c in chosen}
    added = []
    for hit in range(n_pinned):
        own = [c for c in cands if c.hit == hit]
        if hit not in have and own:
            added.append(max(own, key=lambda c: c.relevance))
    if not added:
        return chosen, RuleFiring("pinned_paper_uncovered", False, "every paper quoted")
    chosen = sorted(chosen + added, key=lambda c: c.id)
    return chosen, RuleFiring("pinned_paper_uncovered", True,
                              "added " + ", ".join(f"[{c.id}]" for c in added),
                              data={"added": [c.id for c in added]})


def unchosen_paper_not_answering(paper: str, p_no: float | None, threshold: float) -> RuleFiring:
    """A paper the synthesis names but the model did not choose as evidence
    joins the answer only if, asked afresh with that paper's sentence and the
    question, the model gives under ``threshold`` to "it does not answer"."""
    if p_no is None:
        return RuleFiring("unchosen_paper_not_answering", False, f"{paper}: no verdict")
    return RuleFiring("unchosen_paper_not_answering", p_no >= threshold,
                      f"{paper}: P(not answered) {p_no:.2f} vs threshold {threshold:.2f}")


def claim_not_in_evidence(sentence: str, evidence: Sequence[str],
                          generic=lambda name: False) -> RuleFiring:
    """A synthesis sentence asserts a number or name its cited evidence does
    not contain (a field's common term, ``generic(name)``, such as LLM, is no claim)."""
    missing = claims.unstated_specifics(sentence, evidence, generic)
    return RuleFiring("claim_not_in_evidence", bool(missing),
                      f"not in its evidence: {', '.join(missing)}" if missing else "ok")


def question_term_unsupported(sentence: str, evidence: Sequence[str], question: str,
                              terms, distinctive) -> RuleFiring:
    """A synthesis sentence uses a distinctive term of the question ("protein
    folding") that none of its cited evidence holds: the question's words
    echoed as the paper's claim. The question's frame verbs ("target" in "how
    does each target …", ``frame_verbs``) are how it asks, not what it
    asserts, and are left out. ``terms``: text -> stemmed terms;
    ``distinctive``: term -> bool (rare in the index)."""
    text, _ = strip_markers(sentence)
    have = set().union(*(terms(e) for e in evidence)) if evidence else set()
    asked = terms(question) - terms(" ".join(frame_verbs(question)))
    echoed = sorted(t for t in terms(text) & asked if t not in have and distinctive(t))
    return RuleFiring("question_term_unsupported", bool(echoed),
                      f"question terms not in its evidence: {', '.join(echoed)}" if echoed else "ok",
                      data={"terms": echoed})


def names_uncited_paper(sentence: str, cited: Sequence[str], others: Sequence[str]) -> RuleFiring:
    """A synthesis sentence names a retrieved paper (``others``: names of the
    papers it does not cite, field terms left out) that none of its cited
    papers is: a claim about that paper resting on another paper's evidence
    ("Speak Easy shows … [1]" with [1] MELON)."""
    text, _ = strip_markers(sentence)
    own = " ".join(cited)
    named = sorted(n for n in others if n not in own
                   and re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text))
    return RuleFiring("names_uncited_paper", bool(named),
                      f"names {', '.join(named)}, which it does not cite" if named else "ok",
                      data={"papers": named})


def claim_of_another_paper(named: str, own_cover: float, other: str, other_cover: float,
                           s: Settings) -> RuleFiring:
    """A synthesis sentence that names one paper of the evidence but restates
    another's ("ReVISE reduces computation time by half…", CoLA's sentence):
    one sentence of the other paper holds at least ``misattributed_cover`` of
    its content terms (paper names aside), ``misattributed_margin`` more than
    any sentence of the paper it names."""
    a = s.answer
    fired = other_cover >= a.misattributed_cover and other_cover - own_cover >= a.misattributed_margin
    detail = (f"says of {named} what {other}'s abstract states" if fired
              else f"{named} {own_cover:.2f}, {other} {other_cover:.2f}")
    return RuleFiring("claim_of_another_paper", fired, detail,
                      data={"named": named, "own_cover": round(own_cover, 3), "other": other,
                            "other_cover": round(other_cover, 3)})


def broken_sentence(sentence: str) -> RuleFiring:
    """A synthesis sentence with fewer than two content words, or one that
    ends on a conjunction, preposition or article ("This is stated in and."),
    says nothing and is never shown as an answer."""
    text, _ = strip_markers(sentence)
    words = WORD.findall(text)
    content = [w for w in words if w.lower() not in STOP and (len(w) > 2 or w[0].isdigit())]
    last = words[-1].lower() if words else ""
    fired = len(content) < 2 or last in DANGLING
    why = (f"ends on '{last}'" if last in DANGLING else f"{len(content)} content word(s)") if fired else "ok"
    return RuleFiring("broken_sentence", fired, why, data={"content_words": len(content)})


def cut_off_sentence(sentence: str, length_limited: bool) -> RuleFiring:
    """The synthesis stopped at its token limit inside its last sentence
    ("Additionally, ShieldAgent [1]"): a fragment is no claim."""
    body, _ = strip_markers(sentence)
    fired = length_limited and not re.search(r"[.!?…)\]\"”']\s*$", body.strip())
    return RuleFiring("cut_off_sentence", fired,
                      "the last sentence is unfinished at the token limit" if fired else "ok")


def all_claims_withdrawn(sentences: Sequence) -> RuleFiring:
    """Every synthesis sentence asserted a number or name its evidence lacks:
    the model could only answer from outside the abstracts."""
    fired = bool(sentences) and all(
        s.withdrawn and (s.withdrawn_reason or "").startswith("not in its evidence") for s in sentences)
    return RuleFiring("all_claims_withdrawn", fired, f"{len(sentences)} sentence(s) withdrawn" if fired else "ok")


def says_not_stated(sentences: Sequence[str]) -> RuleFiring:
    """Every synthesis sentence says the evidence does not state the answer."""
    fired = bool(sentences) and all(NOT_STATED.search(s) for s in sentences)
    return RuleFiring("says_not_stated", fired, "the model's text says it is not stated" if fired else "ok")
