"""Grounded answers, evidence first.

1. The question is interpreted against the conversation (``rag.answer.conversation``).
2. Papers are retrieved, or taken as pinned (``Filters.paper_ids``).
3. Retrieval signals (best cosine, names unknown to the corpus, named papers).
4. The model chooses evidence sentences under a JSON schema (``rag.answer.evidence``);
   the rules in ``rag.answer.rules`` add evidence and set signals, and the model is
   asked afresh, with only the chosen sentences in view, whether they answer.
5. One calibrated decision over all signals (``rag.answer.decision``): answer, not
   confirmed (the closest passages shown as such), or decline.
6. Only then does the synthesis stream, continuing the evidence conversation.
   ``rag.answer.verify`` checks each of its sentences against the evidence it cites;
   a sentence that fails stays visible, marked withdrawn. Nothing streamed is
   replaced.

Answers are quote-first: the text ends with each cited paper and the
verbatim sentences it was cited for. Declines come in two kinds, in plain
words: nothing in the collection is about the question ("absent"), or the
paper is there but its abstract does not state the asked detail
("missing_detail", quoting the closest sentence it does state).

This module owns the order of the steps; their parts live by concept:
questions are read in ``rag.answer.reading``, the index's word statistics in
``rag.answer.index_terms``, citations are numbered in ``rag.answer.citations`` and
declines worded in ``rag.answer.declines``.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator, Sequence

import numpy as np

from rag.answer import reading, rules
from rag.answer.citations import cite, passages
from rag.answer.conversation import resolve
from rag.answer.decision import UNCOVERED_CAP, Decision, DecisionModel, Signals, logit
from rag.answer.declines import Declined, decline, declined_as
from rag.answer.evidence import (
    Candidate,
    candidates,
    choice_schema,
    excerpts,
    heading,
    parse_choice,
    quoted,
    ranker_choice,
)
from rag.answer.index_terms import IndexTerms
from rag.answer.listing import compared_lines, contrast_prompt, quoted_lines
from rag.answer.paper_relevance import (
    PaperModel,
    own_sentences,
    paper_signals,
    papers_evidence,
    select_papers,
)
from rag.answer.steps import VERDICT_PREFIX, Steps, check_messages, llm_steps
from rag.answer.verify import SynthesisChecker
from rag.config import Settings
from rag.llm import LLM
from rag.prompts import render
from rag.retrieve import HybridRetriever
from rag.types import (
    Answer,
    Filters,
    RuleFiring,
    SearchHit,
    StreamEvent,
    Timings,
)

History = Sequence[dict]


def _headings(hits: list[SearchHit], chosen: list[Candidate]) -> str:
    """The names and titles of the papers the evidence comes from (words that answer nothing)."""
    return " ".join(heading(hits[h].paper) for h in {c.hit for c in chosen})


class Answerer(IndexTerms):
    """The answer pipeline of the module docstring; ``stream`` runs it."""

    def __init__(self, settings: Settings, retriever: HybridRetriever, llm_factory,
                 embedder) -> None:
        self.settings = settings
        self.retriever = retriever
        self._llm_factory = llm_factory
        # The model steps (choose, verdict, check, write); an eval or a test swaps one here.
        self.steps: Steps = llm_steps(llm_factory, lambda: self.settings.evidence.verdict_prompt)
        self.embedder = embedder
        self.checker = SynthesisChecker(settings, embedder, self._generic, self._p_not_answering_sentences,
                                        terms=self._terms, distinctive=self._distinctive)
        self.decision_model = DecisionModel.load(settings.answer.decision_file)
        self.paper_model = PaperModel.load(settings.answer.paper_relevance_file)

    @property
    def llm(self) -> LLM:
        return self._llm_factory()

    # ------------------------------------------------------------ retrieval
    def _hits(self, question: str, *, pinned: list[str], include: list[str], k: int,
              filters: Filters | None) -> list[SearchHit]:
        """Search results; pinned papers replace the search, included ones join it."""
        if pinned:
            f = Filters(paper_ids=pinned)
            found = {h.paper.paper_id: h for h in self.retriever.search(question, k=len(pinned), filters=f)}
            papers = self.retriever.snapshot().papers
            hits = [found.get(pid) or SearchHit(paper=papers[pid], score=0.0, rank=0)
                    for pid in pinned if pid in papers]
        else:
            hits = self.retriever.search(question, k=k, filters=filters)
            have = {h.paper.paper_id for h in hits}
            extra = [pid for pid in include if pid not in have]
            if extra:
                f = Filters(paper_ids=extra)
                hits = self.retriever.search(question, k=len(extra), filters=f) + hits
                hits = hits[: max(k, len(include))]
        for i, h in enumerate(hits, 1):
            h.rank = i
        return hits

    def _named_in_catalog(self, q: str, include: list[str], filters: Filters | None,
                          trace: list[RuleFiring]) -> list[str]:
        """Papers the question names by their own name ("CoCoA-Mix and LEMoN…",
        "the Speak Easy paper"),
        wherever the search would rank them, that pass the filters (rule
        ``named_in_catalog``): the search then includes them, so a named paper
        below the hits is not replaced by the next-ranked one."""
        papers = self.retriever.snapshot().papers
        found = self._catalog_named(q)
        ids = [pid for v in found.values() for pid in v
               if pid not in include and self.retriever.paper_ok(papers[pid], filters)]
        ids = list(dict.fromkeys(ids))
        trace.append(RuleFiring("named_in_catalog", bool(ids),
                                ", ".join(f"{n}: {len(v)} paper(s)" for n, v in found.items())
                                or "the question names no paper",
                                data={"names": found, "included": ids}))
        return ids

    # --------------------------------------------------------------- answer
    def stream(self, question: str, *, history: History = (), k: int | None = None,
               filters: Filters | None = None) -> Iterator[StreamEvent]:
        s = self.settings
        t0 = time.perf_counter()
        papers = self.retriever.snapshot().papers
        pinned = [p for p in (filters.paper_ids or []) if p in papers] if filters else []
        # With chosen papers, "it" and "they" are those papers, which the
        # question is pinned to as asked; the conversation's papers would be wrong.
        res = resolve(question, history, papers) if history and not pinned else None
        interpreted = res.question if res else question
        trace: list[RuleFiring] = [res.rule] if res and res.rule else []
        pinned = pinned or (res.pinned if res else [])
        yield StreamEvent("status", "Searching the abstracts…")
        include = list(res.include) if res else []
        if not pinned:
            include += self._named_in_catalog(interpreted, include, filters, trace)
        hits = self._hits(interpreted, pinned=pinned, include=include,
                          k=k or s.retrieval.top_k, filters=None if pinned else filters)
        timings = Timings(retrieval_ms=round((time.perf_counter() - t0) * 1000, 1))
        answer = Answer(question=question, standalone_question=interpreted, text="",
                        sentences=[], citations=[], retrieved=hits, declined=False,
                        decline_reason=None, model="none", timings=timings, rules=trace,
                        pinned=pinned)

        def done() -> StreamEvent:
            timings.total_ms = round((time.perf_counter() - t0) * 1000, 1)
            return StreamEvent("answer", answer=answer)

        sig = Signals(pinned=float(bool(pinned)), followup=float(interpreted != question),
                      overview=float(reading.asks_overview(interpreted)))
        try:
            cands, hits = self._gate_and_candidates(interpreted, hits, pinned, trace, sig)
            chooser = self._chooser(bool(pinned))
            answer.retrieved = hits
            answer.passages = passages(cands, hits)
            timings.passages_ms = round((time.perf_counter() - t0) * 1000, 1)
            yield StreamEvent("passages", answer=answer)
            chosen, messages, raw = self._choose(interpreted, hits, cands, pinned, trace, answer,
                                                 sig, chooser)
        except Declined as d:
            decline(answer, d, interpreted, self.embedder)
            yield done()
            return
        if self._check_runs():
            yield StreamEvent("status", "Checking the evidence…")
        self._verdict(interpreted, hits, chosen, sig, trace)
        decision = self._decide(sig, trace, answer)
        if decision.outcome != "answer":
            d = declined_as(decision, target=self._named_target(interpreted, hits), hits=hits,
                            chosen=chosen, pinned=pinned, top_cosine=sig.top_cosine,
                            settings=self.settings)
            decline(answer, d, interpreted, self.embedder, chosen=chosen)
            yield done()
            return
        chosen = self._cited_papers(interpreted, hits, cands, chosen, parse_choice(raw, len(cands)) or [],
                                    pinned, trace)
        if not any(r.name == "paper_relevance" for r in trace):
            chosen, r = rules.compared_paper_does_what(
                interpreted, chosen, cands, lambda c: hits[c.hit].paper.abstract,
                one_named=self._one_named(interpreted, hits, pinned))
            trace.append(r)
        cite(answer, chosen)
        timings.evidence_ms = round((time.perf_counter() - t0) * 1000, 1)
        yield StreamEvent("evidence", answer=answer)
        yield from self._synthesise(answer, chosen, messages, raw, interpreted, t0, chooser)
        yield done()

    def _decide(self, sig: Signals, trace: list[RuleFiring], answer: Answer) -> Decision:
        """The calibrated decision over all signals (``rag.answer.decision``), traced."""
        a = self.settings.answer
        d = self.decision_model.decide(sig, a.decision_answer_at, a.decision_decline_below)
        top = "; ".join(f"{n} {v:+.2f}" for n, v in d.strongest())
        trace.append(RuleFiring("decision", d.outcome != "answer",
                                f"{d.outcome}: P(answered) {d.p_answer:.2f}; strongest: {top}",
                                data=d.to_dict()))
        answer.decision = d.to_dict()
        return d

    def _cited_papers(self, q: str, hits: list[SearchHit], cands: list[Candidate],
                      chosen: list[Candidate], choice: list[int], pinned: list[str],
                      trace: list[RuleFiring]) -> list[Candidate]:
        """For "which papers…": the evidence of the candidate papers that
        answer (``rag.answer.paper_relevance``), whether the model chose them or not;
        each paper's closest sentences go through the check first (one short
        forward pass a paper), and a cited paper is quoted by what it does
        (``paper_evidence``). For "which paper…" (one): the most probable of the
        papers the evidence comes from, alone. Other questions, and pinned or
        named papers (the user's choice), keep the evidence as chosen."""
        one = reading.asks_for_one_paper(q)
        if pinned or not (one or reading.asks_for_papers(q)) or self._named(q, hits):
            return chosen
        sigs = paper_signals(q, hits, cands, choice, overlap=self._lexical_overlap,
                             terms=self._terms, distinctive=self._distinctive)
        if one:
            # The answer is one of the papers the evidence comes from; with only
            # one there is nothing to weigh (and no check to run).
            sigs = {h: sg for h, sg in sigs.items() if h in {c.hit for c in chosen}}
        qv = np.asarray(self.embedder.embed_query(q))
        evidence = papers_evidence(cands, hits, list(sigs), lambda t: float(
            np.asarray(self.embedder.embed_texts([t]))[0] @ qv))
        if self._check_runs() and (len(sigs) > 1 or not one):
            # The check reads the paper's sentences closest to the question: on tune
            # this separated answering papers better (out-of-fold AUC 0.84) than its
            # contribution sentence (0.82), which is what it is quoted by.
            for h, sg in sigs.items():
                p_no = self._p_not_answering_sentences(q, hits, h, own_sentences(cands, h))
                sg.check_logit = 0.0 if p_no is None else logit(p_no)
        probs = {h: self.paper_model.p(sg) for h, sg in sigs.items()}
        contrib = {h: self.paper_model.model.contributions(sg) for h, sg in sigs.items()}
        a = self.settings.answer
        # One paper: no cut-off admits a second (the most probable is always kept).
        out, r = select_papers(chosen, evidence, hits, probs, contrib,
                               cite_at=math.inf if one else a.paper_cite_at,
                               max_papers=1 if one else a.paper_max_cited, signals=sigs)
        r.data["asks"] = "one paper" if one else "papers"
        trace.append(r)
        return out

    def _gate_and_candidates(self, q: str, hits: list[SearchHit], pinned: list[str],
                             trace: list[RuleFiring], sig: Signals
                             ) -> tuple[list[Candidate], list[SearchHit]]:
        """Signals from retrieval, then the candidate sentences and the hits
        they come from: the pinned papers, the papers the question names, or
        the top retrieved ones. Only an empty search declines here."""
        s = self.settings
        if not hits:
            trace.append(RuleFiring("off_topic", True, "no paper retrieved"))
            raise Declined("absent")
        boosts = self._candidate_boosts(q)
        # BM25-only search has no cosine; the fit's mean keeps the signal neutral.
        sig.top_cosine = (max((h.dense_score or 0.0) for h in hits) if s.retrieval.retriever != "bm25"
                          else self.decision_model.mean.get("top_cosine", 0.0))
        few = hits[: s.evidence.evidence_papers]
        dense = sorted(((h.dense_score or 0.0) for h in few), reverse=True)
        sig.top_margin = (dense[0] - dense[-1] if s.retrieval.retriever != "bm25"
                          else self.decision_model.mean.get("top_margin", 0.0))
        sig.best_coverage = max(self._lexical_overlap(q, h.paper.title + " " + h.paper.abstract, unseen=True)
                                for h in few)
        sig.unseen = float(min(UNCOVERED_CAP, len(self._unseen(q))))
        if not pinned:
            r = rules.off_topic(sig.top_cosine, s)
            trace.append(RuleFiring(r.name, r.fired, r.detail, data={"top_cosine": sig.top_cosine}))
            names = self.retriever.unknown_names(q)
            trace.append(rules.unknown_name(names))
            sig.unknown_name = float(bool(names))
            named = sorted({i for v in self._named(q, hits).values() for i in v})
            # "Compare AdvAgent and Speak Easy": one recognised name in a comparison
            # may leave the other paper unnamed, so the search results stay in.
            if len(named) < 2 and reading.is_comparative(q):
                named = []
            sig.names_paper = float(bool(self._named(q, hits)))
            sig.top_coverage = self._lexical_overlap(q, hits[0].paper.title + " " + hits[0].paper.abstract)
            if not named:
                return self.top_candidates(q, hits, best_last=s.evidence.evidence_best_last), hits
            # A question that names its papers is answered from those papers.
            trace.append(RuleFiring("named_papers_only", True,
                                    ", ".join(hits[i].paper.name for i in named)))
            hits = [hits[i] for i in named] + [h for i, h in enumerate(hits) if i not in named]
            focus = len(named)
        else:
            focus = len(hits)
            sig.top_coverage = self._lexical_overlap(q, hits[0].paper.title + " " + hits[0].paper.abstract)
        per = max(2, s.evidence.pinned_sentences // focus)
        return candidates(q, hits[:focus], self.embedder, total=per * focus, per_paper=per,
                          **boosts), hits

    def _candidate_boosts(self, q: str) -> dict:
        """The ranking boosts ``evidence.candidates`` gives this question's sentences."""
        s = self.settings
        return {"value_boost": s.evidence.evidence_value_boost if reading.asks_value(q) else 0.0,
                "counted": reading.asked_measure(q), "count_boost": s.evidence.evidence_count_boost,
                "lexical": self._lexical_overlap, "lexical_weight": s.evidence.evidence_lexical_weight}

    def top_candidates(self, q: str, hits: list[SearchHit], *, best_last: bool) -> list[Candidate]:
        """The candidate sentences of the top retrieved papers, for a question
        that neither pins nor names papers (``best_last``: the top-ranked
        paper listed last; eval.choice_order asks in both orders)."""
        s = self.settings
        return candidates(q, hits[: s.evidence.evidence_papers], self.embedder,
                          total=s.evidence.evidence_sentences, per_paper=s.evidence.evidence_per_paper,
                          first_paper=s.evidence.evidence_top_paper, best_last=best_last,
                          **self._candidate_boosts(q))

    def _choose(self, q: str, hits: list[SearchHit], cands: list[Candidate], pinned: list[str],
                trace: list[RuleFiring], answer: Answer, sig: Signals, chooser: str):
        """The model's evidence choice, then the evidence rules: each adds
        evidence or sets a signal; none declines alone."""
        s = self.settings
        if not cands:
            trace.append(RuleFiring("no_evidence", True, "no candidate sentences"))
            raise Declined("absent")
        answer.model = self.llm.name
        messages = [
            {"role": "system", "content": render("evidence_system")},
            {"role": "user", "content": render("evidence_user", excerpts=excerpts(cands, hits),
                                               question=q)},
        ]
        if chooser == "ranker":
            # No model call: the synthesis gets a prompt of its own (``_synthesise``).
            # Pinned papers: each paper's best sentence, and more of them, since
            # "what do these two have in common" or "tell me more" needs more
            # than the two closest sentences.
            most, each = ((s.evidence.evidence_ranker_pinned, 1) if pinned
                          else (s.evidence.evidence_ranker_chosen, 0))
            raw = json.dumps({"ids": ranker_choice(cands, most, each=each)})
        else:
            raw = self.steps.choose(messages, choice_schema(len(cands), s.evidence.evidence_max_chosen))
        ids = parse_choice(raw, len(cands))
        if ids is None:
            # A server that ignored the schema: fall back to the closest sentence.
            best = max(cands, key=lambda c: c.relevance)
            ids = [best.id]
            trace.append(RuleFiring("choice_unparsed", True, f"reply {raw[:80]!r}; used [{best.id}]"))
        r = rules.no_evidence(ids)
        trace.append(RuleFiring(r.name, r.fired, r.detail, data={"ids": list(ids), "chooser": chooser}))
        sig.chose_nothing = float(r.fired)
        # With nothing chosen, the closest sentence stands in, so that the check
        # and the other signals still read something; the decision weighs it.
        chosen = [cands[i - 1] for i in ids] or [max(cands, key=lambda c: c.relevance)]
        named = self._named(q, hits)
        sig.chosen_cosine = max(c.relevance for c in chosen)
        if not pinned:
            if not named:  # a question naming its paper is about it, however it is worded
                kept, r = rules.off_question_evidence(chosen, s)
                trace.append(r)
                chosen = kept or chosen
            chosen, r = rules.named_paper_missing(named, chosen, cands, s)
            trace.append(r)
            sig.named_missing = float(r.fired)
            # A comparison that names one paper and describes the other ("DRAGO
            # and the policy-committee approach") still needs the second paper.
            n_named = len({i for v in named.values() for i in v})
            if n_named < 2:
                chosen, r = rules.one_sided_comparison(q, chosen, cands, s, one_named=n_named == 1)
                trace.append(r)
        elif len(hits) > 1:
            # "How do these two differ?" about chosen papers quotes each of them.
            chosen, r = rules.one_sided_comparison(q, chosen, cands, s, pinned=True)
            trace.append(r)
            chosen, r = rules.pinned_paper_uncovered(q, chosen, cands, len(hits))
            trace.append(r)
        chosen, r = rules.value_not_stated(q, chosen, cands)
        trace.append(r)
        sig.value_missing = float(r.fired)
        if not r.fired and reading.asks_value(q):
            chosen, added = rules.value_clause_uncovered(q, chosen, cands, _headings(hits, chosen))
            trace.append(added)
        chosen, r = rules.name_not_stated(
            q, chosen, cands, own=lambda c: heading(hits[c.hit].paper), generic=self._generic,
            abbreviations=lambda c: {a for a in reading.local_abbreviations(hits[c.hit].paper.abstract)
                                     if not self._generic(a, limit=1)})
        trace.append(r)
        sig.name_missing = float(r.fired)
        chosen, r = rules.question_part_uncovered(q, chosen, cands, self._terms, self._distinctive,
                                              _headings(hits, chosen), s.evidence.coverage_max_added)
        trace.append(r)
        titles = _headings(hits, chosen)
        have = set().union(*(self._terms(c.text) for c in chosen)) | self._terms(titles)
        uncovered = sorted(t for t in self._terms(q) if t not in have and self._distinctive(t))
        sig.uncovered = float(min(UNCOVERED_CAP, len(uncovered)))
        sig.coverage = self._lexical_overlap(q, " ".join(c.text for c in chosen) + " " + titles)
        sig.ranker_agrees = float(any(c.hit == 0 for c in chosen))
        return chosen, messages, raw

    def _chooser(self, pinned: bool) -> str:
        """Who chooses this answer's evidence (setting ``evidence_chooser``):
        with ``auto``, the ranker when the question is pinned to papers (chosen
        or carried over by a follow-up; the candidates are only their
        sentences), the model otherwise. Not for papers the question names:
        there the ranker's sentences miss what "stand for" or a comparison
        asks (docs/benchmarks.md has the measured cost of each)."""
        c = self.settings.evidence.evidence_chooser
        return ("ranker" if pinned else "model") if c == "auto" else c

    def _verdict(self, q: str, hits: list[SearchHit], chosen: list[Candidate], sig: Signals,
                 trace: list[RuleFiring]) -> None:
        """The check (the ``verdict`` step): a fresh, short prompt with only the
        chosen sentences and the question, asking whether they answer it; its
        P(not answered) is a signal of the decision (for pinned papers and
        overview questions also as its own term, since the model leans "yes"
        there and any abstract answers a request for a gist).
        The synthesis still continues the evidence conversation (the local
        model restores that prefix from its prompt cache)."""
        if not self._check_runs():
            return
        quotes = quoted(chosen, hits)
        p_no = self.steps.verdict(q, quotes)
        # What the check read is traced too, so that a variant of the check can
        # be scored on collected signal rows without rerunning the choice.
        trace.append(RuleFiring("evidence_check", False, "no verdict" if p_no is None
                                else f"P(not answered) {p_no:.2f}",
                                data={"p_no": p_no, "question": q, "quotes": quotes}))
        if p_no is None:
            return
        sig.set_check(p_no)

    def _p_not_answering(self, q: str, chosen: list[Candidate], hits: list[SearchHit]) -> float | None:
        """The model's probability that the chosen sentences do not answer the
        question (the ``check`` step, ``rag.answer.steps``)."""
        return self.steps.check(q, quoted(chosen, hits))

    def _p_not_answering_sentences(self, q: str, hits: list[SearchHit], hit: int,
                                   sents: list[str]) -> float | None:
        """The evidence check for sentences of one paper (``hits[hit]``) that the
        model did not choose (rule unchosen_paper_not_answering)."""
        return self._p_not_answering(q, [Candidate(0, hit, t, 0.0, 0) for t in sents], hits)

    def _check_runs(self) -> bool:
        """Whether the evidence check runs (setting ``evidence_check``)."""
        return self.settings.evidence.evidence_check

    # ------------------------------------------------------------ synthesis
    def _left_out(self, q: str, chosen: list[Candidate], answer: Answer, text: str) -> RuleFiring:
        """Rule each_paper_quoted for this answer's synthesis ``text``: a paper
        counts as written about when a sentence rests on its evidence (as the
        check attaches sentences) or names it. With one paper named, only a
        comparison word or a described second paper compares; an overview
        counts for two or more pinned papers."""
        hits = answer.retrieved
        papers = [hits[c.hit].paper.name for c in chosen]
        one = self._one_named(q, hits, answer.pinned)
        # Read with nothing written, the rule says whether it can fire at all
        # (two papers, a comparison or overview): only then embed the synthesis.
        maybe = rules.each_paper_quoted(q, papers, set(), one_named=one, pinned=len(answer.pinned))
        if not maybe.fired:
            return maybe
        on = self.checker.papers_written(chosen, text)
        written = {hits[c.hit].paper.name for c in chosen if c.hit in on or hits[c.hit].paper.name in text}
        return rules.each_paper_quoted(q, papers, written, one_named=one, pinned=len(answer.pinned))

    def _synthesise(self, answer: Answer, chosen: list[Candidate], messages: list[dict],
                    raw_choice: str, q: str, t0: float, chooser: str) -> Iterator[StreamEvent]:
        s = self.settings
        composed = ""
        follow: list[dict] | None
        listing = any(r.name == "paper_relevance" for r in answer.rules)
        if listing:
            # "Which papers…": each cited paper is quoted in code by what it does
            # (``rag.answer.listing``); the model writes only, with several, how
            # they differ, from a fresh prompt holding only the cited papers.
            lines, said = quoted_lines(chosen, answer.retrieved, asks_value=reading.asks_value(q))
            composed = "\n".join(lines)
            follow = None if len(lines) < 2 else [
                {"role": "system", "content": render("synthesis_papers_system")},
                {"role": "user", "content": contrast_prompt(said, answer.retrieved)}]
        elif chooser == "ranker":
            # The model never read the candidate list: the synthesis continues
            # the check's short conversation (only the chosen sentences, numbered
            # as offered), whose prompt the local model has just read.
            follow = check_messages(q, quoted(chosen, answer.retrieved),
                                    s.evidence.verdict_prompt) + [
                {"role": "assistant", "content": VERDICT_PREFIX + 'yes"}'},
                {"role": "user", "content": render("synthesis_after_check", example=chosen[0].id)},
            ]
        else:
            follow = messages + [
                {"role": "assistant", "content": raw_choice},
                {"role": "user", "content": render("synthesis_user",
                                                   chosen=", ".join(f"[{c.id}]" for c in chosen),
                                                   example=chosen[0].id, question=q)},
            ]
        yield StreamEvent("status", "Writing the answer…")
        if composed:
            answer.timings.ttft_ms = round((time.perf_counter() - t0) * 1000, 1)
            yield StreamEvent("token", composed + ("\n" if follow else ""))
        pieces: list[str] = []
        for piece in self.steps.write(follow, s.answer.synthesis_max_tokens,
                                      s.llm.temperature) if follow else ():
            if answer.timings.ttft_ms is None:
                answer.timings.ttft_ms = round((time.perf_counter() - t0) * 1000, 1)
            pieces.append(piece)
            yield StreamEvent("token", piece)
        # Streamed pieces are tokens: as many as the limit means it cut the text short.
        limited = len(pieces) >= s.answer.synthesis_max_tokens
        text = composed + ("\n" if composed and pieces else "") + "".join(pieces)
        model_end = len(text)
        if not listing and (left := self._left_out(q, chosen, answer, text)).fired:
            # A comparison whose synthesis left a paper out: that paper's chosen
            # sentences, quoted under its name (``rag.answer.listing``).
            answer.rules.append(left)
            lines, _ = compared_lines([c for c in chosen if answer.retrieved[c.hit].paper.name
                                       in left.data["quoted"]], answer.retrieved)
            added = "\n" + "\n".join(lines)
            yield StreamEvent("token", added)
            text += added
        if self.checker.check(answer, chosen, text, q, length_limited=limited, written_to=model_end):
            # The paper the question names is the one whose abstract lacks it, even
            # when a comparison added another paper's sentence first.
            target = self._named_target(q, answer.retrieved)
            target = chosen[0].hit if target is None else target
            decline(answer, Declined("missing_detail", target), q, self.embedder, keep=True)
