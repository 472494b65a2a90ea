"""Checking the synthesis against its evidence, sentence by sentence.

Each synthesis sentence is attached to the evidence it cites and scored
(``support``: the share of its content words found there, and its best
cosine to an evidence sentence). A sentence asserting a number or name its
evidence lacks, one using a question term its evidence lacks, or one the
evidence does not back, first gets a chance to find its backing in another
sentence of a cited abstract (rule evidence_extended, verbatim); failing that
it stays visible, marked withdrawn. Used by ``rag.answer.pipeline.Answerer``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from rag import claims
from rag.answer import rules
from rag.answer.evidence import Candidate, heading
from rag.answer.reading import own_names
from rag.config import Settings
from rag.text import WORD, split_sentences, strip_markers
from rag.types import Answer, Citation, Evidence, RuleFiring, SentenceSupport

# (question, hits, hit index, sentences) -> the model's P("they do not answer it"), or None
Verdict = Callable[[str, list, int, list[str]], float | None]


class SynthesisChecker:
    def __init__(self, settings: Settings, embedder, generic: Callable[[str], bool],
                 verdict: Verdict | None = None, terms: Callable[[str], set[str]] | None = None,
                 distinctive: Callable[[str], bool] | None = None) -> None:
        self.settings = settings
        # Stemmed terms of a text and whether a term is rare in the index
        # (rule question_term_unsupported); without them the rule is off.
        self.terms, self.distinctive = terms, distinctive
        self.embedder = embedder
        self.generic = generic  # a field's common term (LLM, GPU) is no claim
        self.verdict = verdict  # the evidence check, for a paper the model did not choose

    def check(self, answer: Answer, chosen: list[Candidate], text: str, q: str,
              length_limited: bool = False, written_to: int | None = None) -> bool:
        """Attach each synthesis sentence to its evidence and withdraw those
        that assert what the evidence does not. True when the answer must be
        declined after all (rules says_not_stated, all_claims_withdrawn).
        ``length_limited``: the synthesis stopped at its token limit, so an
        unfinished last sentence is withdrawn (rule cut_off_sentence).
        ``written_to``: where the model's text ends (after it, quotes added in
        code, rule each_paper_quoted); the decline rules and the cut-off judge
        only what the model wrote, as quotes neither invent nor say "not stated"."""
        s = self.settings
        by_id = {c.id: c for c in chosen}
        number = {e.text: e.number for e in answer.evidence}
        sents = [t for t in split_sentences(text) if WORD.search(strip_markers(t)[0])]
        n_written = len(sents) if written_to is None else len(
            [t for t in split_sentences(text[:written_to]) if WORD.search(strip_markers(t)[0])])
        r = rules.says_not_stated(sents[:n_written])
        answer.rules.append(r)
        out: list[SentenceSupport] = []
        if sents:
            clean = [strip_markers(t) for t in sents]
            sims = self._sims(clean, chosen)
            for i, (body, marks) in enumerate(clean):
                cited = self._with_named(answer, chosen, _cited(chosen, by_id, marks, sims[i]), body)
                best = max(cited, key=lambda c: sims[i, chosen.index(c)])
                # A paper's own title and name are not claims that need evidence.
                named = [heading(answer.retrieved[c.hit].paper) for c in cited]
                ev_texts = [c.text for c in cited]
                claim = rules.claim_not_in_evidence(body, ev_texts + named, self.generic)
                nums = {number[c.text] for c in cited}
                title = answer.retrieved[best.hit].paper.title
                support = self._support(body, ev_texts, title)
                if ((claim.fired or support < s.answer.support_threshold)
                        and (extra := self._extend(answer, cited, body, q, named))):
                    claim = RuleFiring("claim_not_in_evidence", False, "ok after evidence_extended")
                    ev_texts += [t for t, _ in extra]
                    nums |= {n for _, n in extra}
                    support = self._support(body, ev_texts, title)
                if not claim.fired and claims.unstated_specifics(body, ev_texts + named):
                    # A field's common term ("RL") the quotes lack is no fabrication,
                    # but the reader sees where the cited abstract states it.
                    extra = self._quote_common_terms(answer, cited, body, q, ev_texts + named)
                    ev_texts += [t for t, _ in extra]
                    nums |= {n for _, n in extra}
                if not claim.fired:
                    # the papers it cites, with any evidence_extended just added
                    own = named + [c.paper.name for c in answer.citations if c.number in nums]
                    claim = rules.names_uncited_paper(body, own, self._others(answer, cited))
                if not claim.fired:
                    # every paper it cites by now names itself (evidence_extended
                    # may have added one: "… while Speak Easy targets …")
                    heads = named + [heading(c.paper) for c in answer.citations if c.number in nums]
                    claim = self._echo(body, ev_texts + heads + [title], q)
                    if claim.fired and (extra := self._quote_question_terms(
                            answer, cited, body, q, ev_texts + heads + [title])):
                        # The cited abstract states the term elsewhere ("the Plugin
                        # model"): that sentence joins the quotes, verbatim.
                        claim = RuleFiring("question_term_unsupported", False,
                                           "ok after evidence_extended")
                        ev_texts += [t for t, _ in extra]
                        nums |= {n for _, n in extra}
                        support = self._support(body, ev_texts, title)
                if not claim.fired and (other := self._misattributed(answer, chosen, body)):
                    claim = other
                if not claim.fired:
                    claim = rules.broken_sentence(body)
                ss = SentenceSupport(
                    text=_balance_quotes(body), citations=sorted(nums), support=support,
                    supported=support >= s.answer.support_threshold and not claim.fired,
                    paper_id=answer.retrieved[best.hit].paper.paper_id, evidence=best.text)
                if r.fired:
                    ss.withdrawn, ss.withdrawn_reason = True, "the model said the abstracts do not state it"
                elif claim.fired:
                    ss.withdrawn, ss.withdrawn_reason = True, claim.detail
                    answer.rules.append(claim)
                elif not ss.supported:
                    ss.withdrawn = True
                    ss.withdrawn_reason = "not supported by the sentences it cites"
                if i == n_written - 1 and not ss.withdrawn:
                    cut = rules.cut_off_sentence(sents[-1], length_limited)
                    answer.rules.append(cut)
                    if cut.fired:
                        ss.withdrawn, ss.withdrawn_reason = True, "cut off at the answer's length limit"
                out.append(ss)
        answer.sentences = out
        for c in answer.citations:
            c.score = max((x.support for x in out if c.number in x.citations and not x.withdrawn),
                          default=0.0)
        gone = rules.all_claims_withdrawn(out[:n_written])
        answer.rules.append(gone)
        if r.fired or gone.fired:
            answer.rules.append(RuleFiring("declined_after_synthesis", True,
                                           "says_not_stated" if r.fired else "all_claims_withdrawn"))
            return True
        answer.text = answer_text(answer)
        return False

    def papers_written(self, chosen: list[Candidate], text: str) -> set[int]:
        """The papers (hit indexes) a synthesis ``text`` writes about: those
        its sentences rest on, as ``check`` attaches them (markers, else the
        closest chosen sentence)."""
        clean = [strip_markers(t) for t in split_sentences(text) if WORD.search(strip_markers(t)[0])]
        if not clean or not chosen:
            return set()
        sims = self._sims(clean, chosen)
        by_id = {c.id: c for c in chosen}
        return {c.hit for i, (_, marks) in enumerate(clean) for c in _cited(chosen, by_id, marks, sims[i])}

    def _with_named(self, answer: Answer, chosen: list[Candidate], cited: list[Candidate],
                    body: str) -> list[Candidate]:
        """``cited`` and the chosen sentences of every paper of the evidence that
        the sentence names by its name ("…, while NS-DPO proposes …", cited to
        the other paper only): a sentence comparing two papers rests on both
        papers' evidence and cites both, instead of being withdrawn for
        naming the one it did not mark (hand-written: the claim check is ours)."""
        hits = {c.hit for c in cited}
        hits |= {h for h in {c.hit for c in chosen} - hits
                 if _names_whole(answer.retrieved[h].paper, body, self.generic)}
        return [c for c in chosen if c.hit in hits]

    def _sims(self, clean: list[tuple[str, list[int]]], chosen: list[Candidate]) -> np.ndarray:
        """Cosine of each synthesis sentence (``clean``: text without markers,
        markers) to each chosen evidence sentence."""
        vecs = np.asarray(self.embedder.embed_texts([c[0] for c in clean] + [c.text for c in chosen]))
        return vecs[: len(clean)] @ vecs[len(clean):].T

    def _others(self, answer: Answer, cited: list[Candidate]) -> list[str]:
        """The names of the retrieved papers a sentence does not cite (a name
        that is a field's common term, or under three letters, names no paper)."""
        own = {c.hit for c in cited}
        return [h.paper.name for i, h in enumerate(answer.retrieved)
                if i not in own and len(h.paper.name) >= 3 and not self.generic(h.paper.name)]

    def _misattributed(self, answer: Answer, chosen: list[Candidate], body: str) -> RuleFiring | None:
        """Rule claim_of_another_paper for a sentence naming exactly one paper of
        the evidence (None otherwise, or without term functions): how much of
        its content terms, paper names aside, the best sentence of that paper
        and of each other paper holds."""
        papers = {c.hit: answer.retrieved[c.hit].paper for c in chosen}
        named = [h for h, p in papers.items() if _names_in(p, body) or _names_whole(p, body, self.generic)]
        if self.terms is None or len(papers) < 2 or len(named) != 1:
            return None
        names = set().union(*(self.terms(heading(p)) for p in papers.values()))
        terms = self.terms(body) - names
        if not terms:
            return None

        def cover(h: int) -> float:
            return max(len(terms & self.terms(c.text)) / len(terms) for c in chosen if c.hit == h)

        own = named[0]
        other = max((h for h in papers if h != own), key=cover)
        return rules.claim_of_another_paper(papers[own].name, cover(own), papers[other].name,
                                            cover(other), self.settings)

    def _echo(self, body: str, evidence: list[str], q: str) -> RuleFiring:
        """Rule question_term_unsupported, when the checker has term functions."""
        if self.terms is None or self.distinctive is None:
            return RuleFiring("question_term_unsupported", False, "off")
        return rules.question_term_unsupported(body, evidence, q, self.terms, self.distinctive)

    def _support(self, body: str, evidence: list[str], title: str) -> float:
        """How well evidence backs a claim (``rag.claims.support``, shared with Compare)."""
        return claims.support(self.embedder, body, evidence, title)

    def _extend(self, answer: Answer, cited: list[Candidate], body: str, q: str,
                named: list[str]) -> list[tuple[str, int]]:
        """Rule evidence_extended: a synthesis claim that its cited sentences do
        not back (a number or name they lack, or low support), but other
        sentences of a cited abstract, or of a retrieved paper the claim names
        (if it passes the evidence check, rule unchosen_paper_not_answering),
        do, adds those sentences, verbatim, to the evidence instead of being
        withdrawn. One sentence is tried first; a claim gathered from several
        sentences (a list of datasets, a number from the next sentence) gets
        up to ``AQA_EXTEND_MAX_SENTENCES``, each adding a number or name it
        asserts. Returns (sentence, citation number) pairs; empty when none back it."""
        if self.settings.answer.extend_max_sentences < 1:  # the rule is off
            return []
        hits = answer.retrieved
        papers = list(dict.fromkeys(hits[c.hit].paper.paper_id for c in cited))
        papers += [h.paper.paper_id for h in hits[: self.settings.evidence.evidence_papers]
                   if h.paper.paper_id not in papers and _names_in(h.paper, body)]
        by_id = {h.paper.paper_id: h.paper for h in hits}
        chosen = {e.paper_id for e in answer.evidence}
        verdicts: dict[str, bool] = {}

        def admitted(pid: str, sents: list[str]) -> bool:
            """A paper the model did not choose joins only past the evidence check."""
            if pid in chosen or self.verdict is None or not self.settings.evidence.evidence_check:
                return True
            if pid not in verdicts:
                h = next(i for i, x in enumerate(hits) if x.paper.paper_id == pid)
                r = rules.unchosen_paper_not_answering(
                    by_id[pid].name, self.verdict(q, hits, h, sents),
                    self.settings.evidence.unchosen_paper_threshold)
                answer.rules.append(r)
                verdicts[pid] = not r.fired
            return verdicts[pid]

        cited_texts = [x.text for x in cited]
        pool: list[tuple[str, str]] = []  # (paper id, sentence), each paper's closest first
        for pid in papers:
            paper = by_id[pid]
            sents = [t for t in split_sentences(paper.abstract)
                     if t not in (x.text for x in answer.evidence)]
            if not sents:
                continue
            vecs = np.asarray(self.embedder.embed_texts([body] + sents))
            pool += [(pid, sents[int(j)]) for j in np.argsort(-(vecs[1:] @ vecs[0]))]
        if not pool:
            return []
        heads = {pid: heading(by_id[pid]) for pid in papers}
        for pid, sent in pool:
            if verdicts.get(pid) is False:
                continue
            if (self._backs(body, cited_texts, named + [heads[pid]], sent, q, by_id[pid].title)
                    and admitted(pid, [sent])):
                return [self._add(answer, pid, by_id[pid], sent, body, q)]
        # Several sentences: greedily the one stating most of what is still unstated.
        picked: list[tuple[str, str]] = []
        known = cited_texts + named + list(heads.values())
        missing = set(claims.unstated_specifics(body, known, self.generic))
        while missing and len(picked) < self.settings.answer.extend_max_sentences:
            gains = [(len(missing - set(claims.unstated_specifics(body, known + [p[1]], self.generic))), i)
                     for i, p in enumerate(pool) if p not in picked]
            gain, i = max(gains, key=lambda g: (g[0], -g[1]), default=(0, -1))
            if gain == 0:
                break
            picked.append(pool[i])
            known.append(pool[i][1])
            missing = set(claims.unstated_specifics(body, known, self.generic))
        if missing or len(picked) < 2:
            return []
        title = by_id[picked[0][0]].title
        if self._support(body, cited_texts + [t for _, t in picked], title) \
                < self.settings.answer.support_threshold:
            return []
        if not all(admitted(pid, [t for p, t in picked if p == pid]) for pid in {p for p, _ in picked}):
            return []
        return [self._add(answer, pid, by_id[pid], sent, body, q) for pid, sent in picked]

    def _quote_common_terms(self, answer: Answer, cited: list[Candidate], body: str, q: str,
                            known: list[str]) -> list[tuple[str, int]]:
        """Rule evidence_extended for a claim whose only unstated words are a
        field's common terms: the sentences of its cited abstracts that state
        them (most of them first, up to ``AQA_EXTEND_MAX_SENTENCES``) join its
        quotes, verbatim. Nothing is withdrawn when none does."""
        picked, _ = self._covering(answer, cited, known,
                                   lambda texts: set(claims.unstated_specifics(body, texts)))
        return [self._add(answer, pid, paper, sent, body, q) for pid, paper, sent in picked]

    def _quote_question_terms(self, answer: Answer, cited: list[Candidate], body: str, q: str,
                              known: list[str]) -> list[tuple[str, int]]:
        """Rule evidence_extended for a claim using question terms its quotes
        lack: when other sentences of its cited abstracts (up to
        ``AQA_EXTEND_MAX_SENTENCES``) state every one of them, they join its
        quotes, verbatim; otherwise nothing is added and the claim stays withdrawn."""
        def echoed(texts: list[str]) -> set[str]:
            return set(self._echo(body, texts, q).data.get("terms", []))

        picked, missing = self._covering(answer, cited, known, echoed)
        if missing:
            return []
        return [self._add(answer, pid, paper, sent, body, q) for pid, paper, sent in picked]

    def _covering(self, answer: Answer, cited: list[Candidate], known: list[str],
                  missing_in: Callable[[list[str]], set[str]]) -> tuple[list, set[str]]:
        """Greedily, the sentences of the cited abstracts (not yet quoted)
        that leave least of ``missing_in(texts)`` unstated, up to
        ``AQA_EXTEND_MAX_SENTENCES``: ((paper id, paper, sentence) picked, still missing)."""
        known = list(known)
        missing = missing_in(known)
        papers = {answer.retrieved[c.hit].paper.paper_id: answer.retrieved[c.hit].paper for c in cited}
        quoted = {e.text for e in answer.evidence}
        pool = [(pid, t) for pid, p in papers.items() for t in split_sentences(p.abstract) if t not in quoted]
        picked: list[tuple[str, object, str]] = []
        while missing and pool and len(picked) < self.settings.answer.extend_max_sentences:
            gains = [(len(missing - missing_in(known + [t])), -i) for i, (_, t) in enumerate(pool)]
            gain, i = max(gains)
            if gain == 0:
                break
            pid, sent = pool.pop(-i)
            picked.append((pid, papers[pid], sent))
            known.append(sent)
            missing = missing_in(known)
        return picked, missing

    def _backs(self, body: str, cited: list[str], named: list[str], sent: str, q: str,
               title: str) -> bool:
        """``sent`` with the cited sentences states every number and name of the
        claim (names of the papers aside) and supports it."""
        if rules.claim_not_in_evidence(body, cited + named + [sent], self.generic).fired:
            return False
        return self._support(body, cited + [sent], title) >= self.settings.answer.support_threshold

    def _add(self, answer: Answer, pid: str, paper, sent: str, body: str, q: str) -> tuple[str, int]:
        """Adds ``sent`` of ``paper`` to the evidence and its citation (a new
        citation for a retrieved paper not yet cited); returns (sentence, number)."""
        n = next((e.number for e in answer.evidence if e.paper_id == pid), None)
        rel = round(float(np.asarray(self.embedder.embed_texts([sent]))[0]
                          @ np.asarray(self.embedder.embed_query(q))), 4)
        if n is None:
            n = max((c.number for c in answer.citations), default=0) + 1
            answer.citations.append(Citation(number=n, paper=paper, snippet="", score=0.0,
                                             relevance=rel, quotes=[]))
        answer.evidence.append(Evidence(n, pid, sent, rel))
        cit = next(x for x in answer.citations if x.number == n)
        cit.quotes.append(sent)
        cit.snippet = " ".join(cit.quotes)
        cit.relevance = max(cit.relevance, rel)
        answer.rules.append(RuleFiring(
            "evidence_extended", True, f"added “{sent[:60]}…” for: {body[:60]}"))
        return sent, n


def _cited(chosen: list[Candidate], by_id: dict[int, Candidate], marks: list[int],
           sims: np.ndarray) -> list[Candidate]:
    """The evidence a synthesis sentence rests on: the sentences its markers
    cite, else the one closest to it (``sims``: its cosine to each of
    ``chosen``); then every chosen sentence of those papers, as quotes are
    shown per paper (the model often cites a paper's first sentence for a fact
    in its second)."""
    cited = [by_id[m] for m in marks if m in by_id] or [chosen[int(np.argmax(sims))]]
    return [c for c in chosen if c.hit in {x.hit for x in cited}]


def _balance_quotes(sentence: str) -> str:
    """A sentence cut from a quote that spans two sentences (“A. B.” splits
    into ‘“A.’ and ‘B.”’) closes or reopens it, so that its markers stand
    outside the quotes: ‘“A.” [2] “B.” [2]’, not ‘“A. [2] B.” [2]’."""
    opened = sentence.count("“") - sentence.count("”")
    if opened > 0:
        return sentence + "”" * opened
    if opened < 0:
        return "“" * -opened + sentence
    return sentence


def _names_whole(paper, text: str, generic: Callable[[str], bool]) -> bool:
    """Whether a text names a paper by one of its own names (``own_names``: the
    title before a colon, its display name, its method's name, as NS-DPO for
    "Right Now, Wrong Then: …") as a whole word (not "Cape" in "landscape",
    not "MELON" in "MELON-Aug"); a field's common term names no paper."""
    return any(len(name) > 2 and name != paper.title and not generic(name)
               and re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text)
               for name in own_names(paper))


def _names_in(paper, text: str) -> bool:
    """Whether a text names a paper (its name or its title's head)."""
    name = paper.name
    return len(name) > 2 and name.lower() in text.lower()


def answer_text(answer: Answer) -> str:
    """Synthesis (withdrawn sentences left out) on top, then the quoted evidence."""
    parts = []
    for ss in answer.sentences:
        if not ss.withdrawn:
            parts.append(ss.text + " " + "".join(f"[{n}]" for n in ss.citations))
    lines = [" ".join(parts)] if parts else []
    for c in answer.citations:
        quotes = " ".join(f"“{t}”" for t in c.quotes)
        lines.append(f"[{c.number}] {heading(c.paper)}: {quotes}")
    return "\n\n".join([lines[0], "\n".join(lines[1:])]) if parts else "\n".join(lines)
