"""The evidence-first answer pipeline and each named decision rule, with a
scripted fake model (fast) over the bundled corpus indexed with fake
embeddings. The real-model behaviour is in test_answer_real.py."""

from __future__ import annotations

import json
import re

import pytest

from rag.answer.conversation import resolve
from rag.answer.reading import asks_overview, asks_value
from rag.answer.rules import claim_not_in_evidence, says_not_stated
from rag.text import name_markers, sentence_spans, short_title, split_sentences, strip_markers


class ScriptedLLM:
    """Chooses evidence with ``choose(sentences) -> ids`` (sentences: {id: text}),
    answers the evidence check with ``verdict`` ("yes"/"no", or a function of
    the check's messages) and writes
    ``synthesis`` (a str, or a function of those sentences)."""

    name = "scripted"

    def __init__(self, choose, synthesis="", verdict="yes") -> None:
        self.choose, self.synthesis, self.verdict = choose, synthesis, verdict
        self.calls: list[dict] = []
        self.sents: dict[int, str] = {}

    def stream_chat(self, messages, *, max_tokens, temperature, json_schema=None):
        self.calls.append({"messages": messages, "json_schema": json_schema})
        if messages[1]["content"].startswith("Sentences:"):  # the evidence prompt
            self.sents = {int(m.group(1)): m.group(2) for m in
                          re.finditer(r"^\[(\d+)\] (.*)$", messages[1]["content"], re.M)}
        sents = self.sents
        if json_schema is not None and "ids" in json_schema["properties"]:
            text = json.dumps({"ids": self.choose(sents)})
        elif json_schema is not None:
            v = self.verdict(messages) if callable(self.verdict) else self.verdict
            text = json.dumps({"answer": v})
        else:
            text = self.synthesis(sents) if callable(self.synthesis) else self.synthesis
        for i in range(0, len(text), 7):
            yield text[i : i + 7]


def pick(word: str):
    """Choose every offered sentence containing ``word``."""
    return lambda sents: [i for i, t in sents.items() if word.lower() in t.lower()]


def ids_of(word: str, sents: dict[int, str]) -> str:
    return "".join(f"[{i}]" for i, t in sents.items() if word.lower() in t.lower())


SHIELD_Q = "What does ShieldAgent achieve on ShieldAgent-Bench?"


def by_name(eng) -> dict[str, str]:
    """Paper ids by short name (the title before a colon, or a derived label)."""
    return {short_title(p.title): p.paper_id for p in eng.papers()}


def rules_fired(a) -> set[str]:
    return {r.name for r in a.rules if r.fired}


def test_text_helpers_split_and_strip():
    s = split_sentences("ShieldAgent is a guardrail [1]. It improves recall by 11.3% [1, 2].")
    assert len(s) == 2
    assert strip_markers(s[1]) == ("It improves recall by 11.3%.", [1, 2])
    assert name_markers("According to [1], rules come from policies.", ["ShieldAgent"]) \
        .startswith("According to ShieldAgent [1],")
    # An abbreviation's period ends no sentence; a real end still does.
    s = split_sentences("It scores 0.49 on audio (vs. 0.54 for FLAC). Models, e.g. GPT-4, fail. "
                        "The answer is no. Next.")
    assert s == ["It scores 0.49 on audio (vs. 0.54 for FLAC).", "Models, e.g. GPT-4, fail.",
                 "The answer is no.", "Next."]
    # The UI marks spans with the same splitter: "(vs. 0.54" does not cut a span.
    text = "It scores 0.49 (vs. 0.54 for FLAC).  Models fail [1]."
    assert [text[a:b] for a, b in sentence_spans(text)] == [
        "It scores 0.49 (vs. 0.54 for FLAC).", "Models fail [1]."]


def test_supported_answer_is_quote_first(fake_engine):
    llm = ScriptedLLM(pick("11.3%"), lambda s: f"ShieldAgent outperforms prior methods by 11.3% {ids_of('11.3%', s)}.")
    eng = fake_engine(llm=llm)
    a = eng.ask(SHIELD_Q)
    assert not a.declined, a.text
    assert [short_title(c.paper.title) for c in a.citations] == ["ShieldAgent"]
    quote = a.citations[0].quotes[0]
    assert "11.3%" in quote and quote in a.citations[0].paper.abstract
    assert f"“{quote}”" in a.text  # the verbatim evidence is part of the answer
    assert a.sentences[0].citations == [1] and not a.sentences[0].withdrawn
    # The evidence check reads only the chosen sentences; the synthesis continues the
    # evidence conversation (the local model restores that prefix from its prompt cache).
    choice, check, synthesis = llm.calls
    assert "ids" in choice["json_schema"]["properties"]
    assert "answer" in check["json_schema"]["properties"] and "11.3%" in check["messages"][1]["content"]
    assert len(check["messages"][1]["content"]) < len(choice["messages"][1]["content"]) / 2
    assert synthesis["messages"][:2] == choice["messages"]
    assert "evidence_not_answering" not in rules_fired(a)


def test_evidence_check_no_declines_through_the_decision(fake_engine):
    """The model, asked afresh, says its chosen sentences do not answer: its
    P(no) is the check_logit signal, and the decision declines, of the second
    kind when the question names its paper."""
    eng = fake_engine(llm=ScriptedLLM(pick("11.3%"), "never written", verdict="no"))
    a = eng.ask(SHIELD_Q)
    assert a.declined and "decision" in rules_fired(a)
    assert a.decision["signals"]["check_logit"] > 5 and a.decision["outcome"] == "decline"
    assert a.decline_kind == "missing_detail" and "does not state" in a.text
    assert "never written" not in a.text
    # Every signal's contribution is in the trace, as data.
    d = next(r for r in a.rules if r.name == "decision").data
    assert set(d["contributions"]) == set(d["signals"]) and d["contributions"]["check_logit"] < 0


def test_evidence_check_can_be_turned_off(fake_engine):
    llm = ScriptedLLM(pick("11.3%"), "ShieldAgent outperforms prior methods.", verdict="no")
    eng = fake_engine(llm=llm)
    eng.answerer.settings = eng.settings.updated(evidence_check=False)
    a = eng.ask(SHIELD_Q)
    assert not a.declined and len(llm.calls) == 2
    assert llm.calls[1]["messages"][:2] == llm.calls[0]["messages"]  # the long prefix reused


def test_evidence_event_comes_before_any_token(fake_engine):
    eng = fake_engine(llm=ScriptedLLM(pick("11.3%"), "ShieldAgent improves results."))
    kinds = [ev.kind for ev in eng.ask_stream(SHIELD_Q)]
    assert kinds.index("evidence") < kinds.index("token") < kinds.index("answer")
    assert kinds[-1] == "answer"


def test_passages_come_first_before_any_model_call(fake_engine):
    """Issue #26, item 6: the ranked papers and their closest sentences are
    on the stream before the model is asked anything (timings.passages_ms)."""
    llm = ScriptedLLM(pick("11.3%"), "ShieldAgent improves results.")
    eng = fake_engine(llm=llm)
    events = []
    for ev in eng.ask_stream(SHIELD_Q):
        events.append(ev)
        if ev.kind == "passages":
            assert llm.calls == []  # nothing decided yet
            passages = list(ev.answer.passages)
    kinds = [ev.kind for ev in events]
    assert kinds.index("passages") < kinds.index("evidence")
    a = events[-1].answer
    ranks = [e.number for e in passages]
    assert ranks == sorted(set(ranks)) and passages
    for e in passages:  # each the closest sentence of its ranked paper, verbatim
        assert e.text in a.retrieved[e.number - 1].paper.abstract
    assert 0 < a.timings.passages_ms <= a.timings.evidence_ms
    assert a.to_dict()["timings"]["passages_ms"] == a.timings.passages_ms


def test_no_evidence_is_a_signal_and_declines_with_the_closest_sentence(fake_engine):
    eng = fake_engine(llm=ScriptedLLM(lambda s: []))
    a = eng.ask("Which base model does ShieldAgent use to verify safety policies of agents?")
    assert a.declined and "no_evidence" in rules_fired(a)
    assert a.decision["signals"]["chose_nothing"] == 1.0
    # The question names the paper: its abstract lacks the detail (second kind).
    assert a.decline_kind == "missing_detail"
    assert a.text.startswith("The abstract of ShieldAgent does not state this.")
    quoted = re.search(r"“(.+)”", a.text).group(1)
    assert quoted in a.retrieved[0].paper.abstract or any(quoted in h.paper.abstract for h in a.retrieved)


def test_low_retrieval_cosine_declines_as_absent(fake_engine):
    """off_topic is a signal (top_cosine); a decision that weighs it declines
    a question nothing is close to as "nothing in the collection"."""
    from rag.answer.decision import DecisionModel, Signals

    llm = ScriptedLLM(lambda s: [1], "x")
    eng = fake_engine(llm=llm, relevance_floor=0.99)
    names = Signals.names()
    eng.answerer.decision_model = DecisionModel(
        {n: (10.0 if n == "top_cosine" else 0.0) for n in names}, 0.0,
        {n: (0.99 if n == "top_cosine" else 0.0) for n in names}, {n: 1.0 for n in names})
    a = eng.ask("zebra migration patterns in the Serengeti")
    assert a.declined and a.decline_kind == "absent"
    assert "off_topic" in rules_fired(a)
    top = next(r for r in a.rules if r.name == "off_topic").data["top_cosine"]
    assert a.decision["signals"]["top_cosine"] == round(top, 4)
    assert "nearest papers" in a.text and "off_topic" not in a.text  # no jargon on screen


def test_unknown_name_is_a_signal(fake_engine):
    llm = ScriptedLLM(lambda s: [1], "x")
    eng = fake_engine(llm=llm)
    a = eng.ask("What pass@1 on HumanEval does the collection's code model reach?")
    assert a.declined and "unknown_name" in rules_fired(a)
    assert a.decision["signals"]["unknown_name"] == 1.0
    assert a.decision["contributions"]["unknown_name"] < 0


def test_retrieval_signals_for_an_absent_topic(fake_engine):
    # "Zebra" and "Serengeti" are in no abstract: unseen terms, and the top
    # papers hold little of the question.
    eng = fake_engine(llm=ScriptedLLM(lambda s: [1], "x"))
    a = eng.ask("zebra migration patterns in the Serengeti")
    sig = a.decision["signals"]
    unseen = eng.answerer._unseen("zebra migration patterns in the Serengeti")
    assert {"zebra", "serengeti"} <= set(unseen) and sig["unseen"] == min(3, len(unseen))
    assert sig["best_coverage"] < 1.0  # the unseen terms are not held
    assert sig["top_margin"] >= 0.0
    b = eng.ask("How do LLM agents defend against prompt injection?")
    assert b.decision["signals"]["unseen"] == 0.0
    assert b.decision["signals"]["best_coverage"] > sig["best_coverage"]


def test_rule_value_not_stated(fake_engine):
    # The model picks a sentence about the rules, which states no count.
    eng = fake_engine(llm=ScriptedLLM(pick("verifiable rules"), "ShieldAgent extracts rules."))
    a = eng.ask("How many verifiable rules does ShieldAgent extract from policy documents?")
    assert a.declined and "value_not_stated" in rules_fired(a)
    assert a.decision["signals"]["value_missing"] == 1.0
    assert a.decline_kind == "missing_detail"
    eng2 = fake_engine(llm=ScriptedLLM(pick("11.3%"), "It outperforms by 11.3%."))
    b = eng2.ask("How much does ShieldAgent outperform prior methods on average?")
    assert not b.declined and "value_not_stated" not in rules_fired(b)
    assert asks_value("By how much does X improve?") and not asks_value("What does X propose?")


def test_rule_named_paper_missing(fake_engine):
    from rag.answer.evidence import Candidate
    from rag.answer.rules import named_paper_missing
    from rag.config import Settings

    # A question naming two papers, with evidence chosen from only one of them:
    # the other named paper adds its sentence closest to the question.
    eng = fake_engine(llm=ScriptedLLM(pick("MELON"), "MELON masks."), evidence_floor=0.0)
    a = eng.ask("How do ShieldAgent and MELON protect agents?")
    assert "named_papers_only" in rules_fired(a)
    assert not a.declined, a.text
    assert {short_title(c.paper.title) for c in a.citations} == {"ShieldAgent", "MELON"}
    # With no sentence of that paper close enough, the rule fires and declines.
    c = [Candidate(1, 0, "a", 0.5, 0), Candidate(2, 1, "b", 0.1, 0)]
    chosen, r = named_paper_missing({"X": [0], "Y": [1]}, c[:1], c,
                                    Settings(_env_file=None, evidence_floor=0.3))
    assert r.fired and "Y" in r.detail and chosen == c[:1]


def test_off_question_evidence_trims_but_never_declines_alone(fake_engine):
    eng = fake_engine(llm=ScriptedLLM(lambda s: [1], "x"), evidence_floor=0.99)
    a = eng.ask("Which papers study prompt injection attacks on agents?")
    assert "off_question_evidence" in rules_fired(a)
    assert a.decision["signals"]["chosen_cosine"] < 0.99
    assert a.decision["contributions"]["chosen_cosine"] == 0.0  # the unit model ignores it


def test_rule_claim_not_in_evidence_withdraws_visibly(fake_engine):
    synth = lambda s: (  # noqa: E731
        f"ShieldAgent outperforms prior methods by 11.3% {ids_of('11.3%', s)}. "
        f"It was trained on 4096 TPUs by DeepMind {ids_of('11.3%', s)}.")
    eng = fake_engine(llm=ScriptedLLM(pick("11.3%"), synth))
    streamed = ""
    for ev in eng.ask_stream(SHIELD_Q):
        if ev.kind == "token":
            streamed += ev.text
        elif ev.kind == "answer":
            a = ev.answer
    assert not a.declined
    flags = [(s.withdrawn, s.withdrawn_reason) for s in a.sentences]
    assert flags[0] == (False, None)
    assert flags[1][0] and "4096" in flags[1][1]
    # Streamed text is kept in the record (marked), never silently replaced.
    assert "4096 TPUs" in streamed and "4096 TPUs" in a.sentences[1].text
    assert "4096" not in a.text  # but it is not presented as part of the answer
    assert claim_not_in_evidence("It uses 8 GPUs [1].", ["It uses 8 GPUs."]).fired is False


def test_rule_says_not_stated_turns_into_a_missing_detail_decline(fake_engine):
    eng = fake_engine(llm=ScriptedLLM(pick("ShieldAgent"), "The abstract does not mention the learning rate."),
                      evidence_floor=0.0)
    a = eng.ask("What learning rate does ShieldAgent use?")
    assert a.declined and a.decline_kind == "missing_detail"
    assert "says_not_stated" in rules_fired(a)
    assert a.sentences and all(s.withdrawn for s in a.sentences)
    assert says_not_stated(["MELON uses masks."]).fired is False


def test_pinned_paper_skips_the_relevance_floor(fake_engine):
    from rag.types import Filters

    eng = fake_engine(llm=ScriptedLLM(lambda s: [1, 2], lambda s: "It proposes a guardrail [1]."),
                      relevance_floor=0.99)
    pid = by_name(eng)["ShieldAgent"]
    a = eng.ask("Summarize this paper", filters=Filters(paper_ids=[pid]))
    assert not a.declined, a.text
    assert a.pinned == [pid] and {c.paper.paper_id for c in a.citations} == {pid}
    assert "off_topic" not in {r.name for r in a.rules}


def test_pinned_evidence_check_declines_details_never_overviews(fake_engine):
    """For pinned papers a "no" is the second kind of decline, never "absent";
    an overview question's check counts through its own signal
    (check_overview), which the decision can weigh down."""
    from rag.types import Filters

    eng = fake_engine(llm=ScriptedLLM(lambda s: [1], "It proposes a guardrail [1].", verdict="no"))
    pid = by_name(eng)["ShieldAgent"]
    q = "What are the limitations of this paper?"
    a = eng.ask(q, filters=Filters(paper_ids=[pid]))
    assert a.declined and a.decline_kind == "missing_detail"
    assert a.text.startswith("The abstract of ShieldAgent does not state this.")
    assert a.decision["signals"]["check_pinned"] == a.decision["signals"]["check_logit"] > 0
    a = eng.ask("What problem does this paper address?", filters=Filters(paper_ids=[pid]))
    assert not a.declined, a.text
    assert a.decision["signals"]["overview"] == 1.0
    assert a.decision["signals"]["check_overview"] == a.decision["signals"]["check_logit"]


def test_graded_check_moves_the_decision(fake_engine):
    """A backend with option probabilities: P(no) enters as its logit; the
    decision answers at a low P(no), shows the passages as not confirmed at a
    middling one, and declines at a high one."""
    llm = ScriptedLLM(pick("11.3%"), "ShieldAgent outperforms prior methods by 11.3% [1].")
    eng = fake_engine(llm=llm)
    outcomes = {}
    for p_no in (0.3, 0.85, 0.99):
        llm.option_probabilities = lambda m, pre, o, p=p_no: {"yes": 1 - p, "no": p}
        a = eng.ask(SHIELD_Q)
        outcomes[p_no] = (a.decision["outcome"], a.declined, a.decline_kind)
    assert outcomes[0.3] == ("answer", False, None)
    assert outcomes[0.85] == ("not_confirmed", True, "not_confirmed")
    assert outcomes[0.99][:2] == ("decline", True)
    llm.option_probabilities = lambda m, pre, o: {"yes": 0.15, "no": 0.85}
    a = eng.ask(SHIELD_Q)
    # Not confirmed: the closest passages are shown as such, with their paper.
    assert a.citations and "Not confirmed" in a.text and a.citations[0].quotes[0] in a.text


def test_asks_overview_is_general_english():
    from rag.answer.reading import asks_overview

    for q in ("Summarize this paper", "What problem does it address?", "What's this paper about?",
              "What is the main contribution?", "What do these two papers have in common?",
              "What does the paper propose?", "Give me a tl;dr"):
        assert asks_overview(q), q
    for q in ("What are its limitations?", "How many GPUs does it need?",
              "Which datasets does it use?", "How is it evaluated?", "What recall does it reach?"):
        assert not asks_overview(q), q


def test_follow_up_resolves_the_second_paper(fake_engine):
    eng = fake_engine(llm=ScriptedLLM(lambda s: [1], lambda s: "It is evaluated [1]."))
    papers = by_name(eng)
    history = [
        {"role": "user", "content": "Which papers defend agents against prompt injection?"},
        {"role": "assistant", "content": "ShieldAgent [1] and MELON [2] do.",
         "papers": [papers["ShieldAgent"], papers["MELON"]]},
    ]
    a = eng.ask("How is the second one evaluated?", history=history)
    assert a.standalone_question == "How is MELON evaluated?"
    assert a.pinned == [papers["MELON"]]
    assert a.interpreted == "How is MELON evaluated?"


def test_conversation_resolution_rules(fake_engine):
    eng = fake_engine()
    papers = eng.retriever.snapshot().papers
    by = by_name(eng)
    h = [{"role": "assistant", "content": "x", "papers": [by["ShieldAgent"], by["MELON"]]}]
    r = resolve("How do both handle tool outputs?", h, papers)
    assert r.pinned == [by["ShieldAgent"], by["MELON"]] and "ShieldAgent and MELON" in r.question
    r = resolve("How does it compare to AdvAgent?", h, papers)
    assert r.include == [by["ShieldAgent"]] and not r.pinned  # searched beyond it
    assert r.question == "How does ShieldAgent compare to AdvAgent?"
    r = resolve("What are its limitations?", h, papers)
    assert r.question == "What are ShieldAgent's limitations?" and r.pinned == [by["ShieldAgent"]]
    # Titles in the text are recognised when the message carries no paper list.
    r = resolve("What about the latter?", [{"role": "assistant", "content": "MELON beats ShieldAgent."}], papers)
    assert r.pinned == [by["ShieldAgent"]]
    assert resolve("What is diffusion?", h, papers).pinned == []


def test_rule_one_sided_comparison_adds_the_second_paper():
    from rag.answer.evidence import Candidate
    from rag.answer.rules import one_sided_comparison
    from rag.config import Settings

    s = Settings(_env_file=None, evidence_floor=0.3)
    c = [Candidate(1, 0, "a", 0.6, 0), Candidate(2, 1, "b", 0.2, 0),
         Candidate(3, 1, "c", 0.5, 1), Candidate(4, 2, "d", 0.7, 0)]
    chosen, r = one_sided_comparison("How do the two methods differ?", c[:1], c, s)
    assert r.fired and [x.id for x in chosen] == [1, 3]  # next-ranked paper, its closest sentence
    chosen, r = one_sided_comparison("What does the method achieve?", c[:1], c, s)
    assert not r.fired and chosen == c[:1]
    # A paper against its own baseline is no comparison between papers.
    chosen, r = one_sided_comparison("What score does it reach, compared with the baseline?", c[:1], c, s)
    assert not r.fired and chosen == c[:1]
    # With one paper named, "the two" means two parts of it; "differ" still compares.
    q = "What are the two key components of DRAGO?"
    assert one_sided_comparison(q, c[:1], c, s)[1].fired
    assert not one_sided_comparison(q, c[:1], c, s, one_named=True)[1].fired
    q = "How does DRAGO differ from the policy-committee approach?"
    assert one_sided_comparison(q, c[:1], c, s, one_named=True)[1].fired


def test_a_comparison_naming_one_paper_and_describing_the_other_gets_both(fake_engine):
    # Only ShieldAgent is named; the other side is described. The model picks
    # ShieldAgent's sentences only, so the evidence gains the next paper's.
    eng = fake_engine(llm=ScriptedLLM(pick("ShieldAgent"), "They differ."), evidence_floor=0.0)
    a = eng.ask("How does ShieldAgent, the guardrail agent enforcing safety policy, differ "
                "from the defense against indirect prompt injection attacks?")
    fired = [r for r in a.rules if r.name == "one_sided_comparison"]
    assert fired and fired[0].fired, a.rules
    assert len({e.paper_id for e in a.evidence}) == 2


def test_one_named_paper_with_both_still_searches_for_the_other(fake_engine):
    # "MELON and <described paper> both…": one recognised name in a comparison;
    # the search results stay in, so the other paper's sentences can be chosen.
    either = lambda sents: [i for i, t in sents.items()  # noqa: E731
                            if "MELON" in t or "ShieldAgent" in t][:4]
    eng = fake_engine(llm=ScriptedLLM(either, "They differ."), evidence_floor=0.0)
    a = eng.ask("MELON and the guardrail agent enforcing safety policy both protect LLM agents "
                "against indirect prompt injection attacks. What does each check?")
    assert len({e.paper_id for e in a.evidence}) == 2, [e.text[:40] for e in a.evidence]


def test_rule_evidence_extended_adds_the_sentence_stating_the_claim(fake_engine):
    # The model chooses the 11.3% sentence but also writes the 3K-pairs fact,
    # stated in another sentence of the same abstract: that sentence joins the
    # evidence, verbatim, instead of the claim being withdrawn.
    synth = lambda s: (  # noqa: E731
        f"ShieldAgent outperforms prior methods by 11.3% {ids_of('11.3%', s)}. "
        f"ShieldAgent-Bench has 3K safety-related pairs {ids_of('11.3%', s)}.")
    eng = fake_engine(llm=ScriptedLLM(pick("11.3%"), synth))
    a = eng.ask(SHIELD_Q)
    assert "evidence_extended" in rules_fired(a)
    assert not any(s.withdrawn for s in a.sentences)
    assert any("3K" in q for q in a.citations[0].quotes)
    assert all(q in a.citations[0].paper.abstract for q in a.citations[0].quotes)


def synth_one(s):
    return (f"ShieldAgent outperforms prior methods by 11.3% {ids_of('11.3%', s)}. "
            f"ShieldAgent-Bench has 3K safety-related pairs {ids_of('11.3%', s)}.")


def test_rule_evidence_extended_gathers_a_claim_stated_across_two_sentences(fake_engine):
    # One claim joins the 11.3% result and the 64.7% saving, stated in two
    # other sentences of the abstract than the one chosen: both join the
    # evidence, verbatim, and the claim stands.
    synth = lambda s: (  # noqa: E731
        f"ShieldAgent outperforms prior methods by 11.3% and cuts API queries by 64.7% "
        f"{ids_of('verifiable rules', s)}.")
    eng = fake_engine(llm=ScriptedLLM(pick("verifiable rules"), synth), evidence_floor=0.0)
    a = eng.ask("How does ShieldAgent work, and with what results?")
    assert not a.declined, a.text
    assert not a.sentences[0].withdrawn, a.sentences[0].withdrawn_reason
    quotes = a.citations[0].quotes
    assert any("11.3%" in q for q in quotes) and any("64.7%" in q for q in quotes)
    assert all(q in a.citations[0].paper.abstract for q in quotes)
    assert sum(r.name == "evidence_extended" and r.fired for r in a.rules) == 2
    # Capped at one added sentence, the same claim cannot be backed: withdrawn.
    eng = fake_engine(llm=ScriptedLLM(pick("verifiable rules"), synth), evidence_floor=0.0,
                      extend_max_sentences=1)
    a = eng.ask("How does ShieldAgent work, and with what results?")
    assert a.declined and "all_claims_withdrawn" in rules_fired(a)
    # 0 turns the rule off: not even the one-sentence extension runs.
    eng = fake_engine(llm=ScriptedLLM(pick("11.3%"), synth_one), extend_max_sentences=0)
    a = eng.ask(SHIELD_Q)
    assert "evidence_extended" not in rules_fired(a)
    assert any(s.withdrawn for s in a.sentences)


def test_a_claim_is_backed_by_every_evidence_sentence_of_the_paper_it_cites(fake_engine):
    # Both facts are in the chosen evidence, in two sentences of one paper; the
    # claim cites only the first. Quotes are shown per paper, so it stands.
    both = lambda sents: [i for i, t in sents.items() if "11.3%" in t or "64.7%" in t]  # noqa: E731
    synth = lambda s: (  # noqa: E731
        f"ShieldAgent outperforms prior methods by 11.3% and cuts API queries by 64.7% "
        f"{ids_of('11.3%', s)}.")
    eng = fake_engine(llm=ScriptedLLM(both, synth), evidence_floor=0.0, extend_max_sentences=0)
    a = eng.ask("How does ShieldAgent work, and with what results?")
    assert not a.declined, a.text
    assert not a.sentences[0].withdrawn, a.sentences[0].withdrawn_reason
    assert "evidence_extended" not in rules_fired(a)


def test_rule_all_claims_withdrawn_declines_as_missing_detail(fake_engine):
    # The model picks a sentence, then can only answer with a number no abstract states.
    eng = fake_engine(llm=ScriptedLLM(pick("verifiable rules"), "ShieldAgent uses 512 GPUs [1]."),
                      evidence_floor=0.0)
    a = eng.ask("Which hardware does ShieldAgent run on?")
    assert a.declined and a.decline_kind == "missing_detail"
    assert "all_claims_withdrawn" in rules_fired(a)
    assert a.sentences and a.sentences[0].withdrawn and "512" in a.sentences[0].withdrawn_reason


def test_rule_value_not_stated_takes_a_sentence_stating_the_value_in_the_questions_terms():
    from rag.answer.evidence import Candidate
    from rag.answer.rules import value_not_stated

    c = [Candidate(1, 0, "LEMoN identifies label errors in image-caption data.", 0.6, 0),
         Candidate(2, 0, "Across eight datasets and twelve baselines, LEMoN beats them by 3%.", 0.5, 1),
         Candidate(3, 0, "It improves captioning by 2 BLEU points.", 0.4, 2)]
    q = "Across how many datasets and baselines was LEMoN evaluated?"
    chosen, r = value_not_stated(q, c[:1], c)
    assert not r.fired and [x.id for x in chosen] == [2]
    # No sentence holds the asked quantity's terms: the rule fires.
    chosen, r = value_not_stated("How many GPUs were used to train LEMoN?", c[:1], c)
    assert r.fired and chosen == c[:1]


@pytest.mark.parametrize("sentence", [
    "It is an order of magnitude faster than the baseline.", "It doubles the throughput.",
    "It halves the latency.", "It gives a threefold speedup.", "It cuts inference time by a third.",
    "It needs a quarter of the memory.", "It is evaluated on fifteen benchmarks.",
])
def test_value_not_stated_reads_multiples_fractions_and_teens_as_values(sentence):
    from rag.answer.evidence import Candidate
    from rag.answer.rules import value_not_stated

    c = [Candidate(1, 0, sentence, 0.6, 0)]
    assert not value_not_stated("How much does the method improve on the baseline?", c, c)[1].fired


@pytest.mark.parametrize("sentence", [
    "It runs several times faster.", "We add a third stage to the pipeline.",
    "One of the benchmarks is hard.", "It substantially outperforms the baseline.",
])
def test_value_not_stated_still_fires_on_vague_or_ordinal_wording(sentence):
    from rag.answer.evidence import Candidate
    from rag.answer.rules import value_not_stated

    c = [Candidate(1, 0, sentence, 0.6, 0)]
    assert value_not_stated("How much does the method improve on the baseline?", c, c)[1].fired


@pytest.mark.parametrize("sentence, fired", [
    (r"We achieve a regret bound of $\tilde{\mathcal{O}}(\sqrt{eH^5N})$ that scales well.", False),
    ("The method converges at an O(1/T) rate.", False),
    # A lone symbol or a subscripted name is no value.
    (r"Here, $N$ is the number of trajectories and $\mathcal{W}_2$ the distance.", True),
])
def test_value_not_stated_reads_a_formula_as_a_value(sentence, fired):
    from rag.answer.evidence import Candidate
    from rag.answer.rules import value_not_stated

    c = [Candidate(1, 0, sentence, 0.6, 0)]
    assert value_not_stated("What regret bound does the method achieve?", c, c)[1].fired is fired


def test_formulas_keep_structured_math_only():
    from rag.text import formulas, has_value

    assert formulas(r"a bound of $\tilde{O}(\sqrt{eH^5N})$") == {r"\tilde{O}(\sqrt{eH^5N})"}
    assert formulas("at an O(1 / T) rate") == {"O(1/T)"}
    assert formulas(r"$N$ and $\mathcal{W}_2$ and $2\times$") == set()
    assert formulas("OURS (O) wins") == set()
    assert has_value(r"a bound of $\sqrt{eH^5N}$") and not has_value("a tight bound")


def test_states_count_reads_teens_and_tens():
    from rag.text import states_count, stemmer

    assert states_count("It is evaluated on fifteen benchmarks.", stemmer().terms("benchmarks"))
    assert states_count("Sixty annotators labelled it.", stemmer().terms("annotators"))


def test_states_count_needs_a_number_just_before_what_is_counted():
    from rag.text import states_count, stemmer

    rec = stemmer().terms("concrete recommendations")
    assert states_count("Then, we discuss four specific policy recommendations.", rec)
    assert states_count("It spans 1,128 testing tasks.", stemmer().terms("test tasks"))
    # A number elsewhere in the sentence counts something else.
    assert not states_count("We make recommendations for 4 areas of policy.", rec)
    assert not states_count("Recommendations improve recall by 12%.", rec)
    assert not states_count("four recommendations", set())


def test_rule_value_not_stated_takes_a_count_of_what_is_counted_in_other_words():
    from rag.answer.evidence import Candidate
    from rag.answer.rules import value_not_stated

    c = [Candidate(1, 0, "We argue that platform regulation offers lessons for generative AI.", 0.6, 0),
         Candidate(2, 0, "Then, we discuss four specific policy recommendations.", 0.4, 1)]
    # A reworded question shares one word with the sentence that answers it.
    q = "How many concrete recommendations does the position paper on platform rules make?"
    chosen, r = value_not_stated(q, c[:1], c)
    assert not r.fired and [x.id for x in chosen] == [2]
    # A number that counts something else is no answer: the rule fires.
    d = [c[0], Candidate(2, 0, "Its recommendations cover 4 areas.", 0.4, 1)]
    chosen, r = value_not_stated(q, d[:1], d)
    assert r.fired and chosen == d[:1]


def test_candidates_favour_a_count_of_what_is_counted():
    from rag.answer.evidence import candidates
    from rag.text import stemmer
    from rag.types import Paper, SearchHit

    class Emb:  # the count sentence is the least similar to the question
        def embed_query(self, q):
            return [1.0, 0.0]

        def embed_texts(self, ts):
            return [[0.9 - 0.1 * i, 0.0] for i in range(len(ts))]

    p = Paper(paper_id="p", title="T", abstract="We study platform rules. We compare eras. "
              "We discuss four specific policy recommendations.", source="s")
    hits = [SearchHit(paper=p, score=1.0, rank=1)]
    counted = stemmer().terms("concrete recommendations")
    plain = candidates("q", hits, Emb(), total=2, per_paper=2)
    assert all("four" not in c.text for c in plain)
    boosted = candidates("q", hits, Emb(), total=2, per_paper=2, value_boost=0.1,
                         counted=counted, count_boost=0.15)
    assert any("four" in c.text for c in boosted)
    # The boost orders the sentences; the relevance shown stays the cosine.
    assert next(c for c in boosted if "four" in c.text).relevance == 0.7


def test_candidates_favour_sentences_sharing_the_question_rarer_words():
    from rag.answer.evidence import candidates
    from rag.types import Paper, SearchHit

    class Emb:  # the result sentence is the least similar to the question
        def embed_query(self, q):
            return [1.0, 0.0]

        def embed_texts(self, ts):
            return [[0.9 - 0.1 * i, 0.0] for i in range(len(ts))]

    p = Paper(paper_id="p", title="T", abstract="Agents matter. We build a benchmark. "
              "GPT-4o has the best average score, 28.9%.", source="s")
    hits = [SearchHit(paper=p, score=1.0, rank=1)]
    q = "Which model did best and what was its average score?"

    def overlap(question, sentence):  # stands in for the IDF-weighted overlap
        return 1.0 if "average score" in sentence else 0.0

    plain = candidates(q, hits, Emb(), total=2, per_paper=2, lexical=overlap, lexical_weight=0.0)
    assert all("28.9" not in c.text for c in plain)
    lexed = candidates(q, hits, Emb(), total=2, per_paper=2, lexical=overlap, lexical_weight=0.2)
    assert any("28.9" in c.text for c in lexed)


def test_candidates_best_last_lists_the_top_paper_next_to_the_question():
    from rag.answer.evidence import candidates, excerpts
    from rag.types import Paper, SearchHit

    class Emb:
        def embed_query(self, q):
            return [1.0, 0.0]

        def embed_texts(self, ts):
            return [[0.9 - 0.1 * i, 0.0] for i in range(len(ts))]

    papers = [Paper(paper_id=f"p{i}", title=f"Paper {i}", abstract=f"First of {i}. Second of {i}.",
                    source="s") for i in range(3)]
    hits = [SearchHit(paper=p, score=1.0 - 0.1 * i, rank=i + 1) for i, p in enumerate(papers)]
    plain = candidates("q", hits, Emb(), total=6, per_paper=2)
    last = candidates("q", hits, Emb(), total=6, per_paper=2, best_last=True)
    assert [c.hit for c in plain] == [0, 0, 1, 1, 2, 2]
    assert [c.hit for c in last] == [2, 2, 1, 1, 0, 0]
    # Numbered in the order shown; each still points at its own paper and sentence.
    assert [c.id for c in last] == [1, 2, 3, 4, 5, 6]
    assert last[-1].text == "Second of 0." and last[0].text == "First of 2."
    shown = excerpts(last, hits)
    assert shown.index("Paper: Paper 2") < shown.index("Paper: Paper 0")
    assert shown.rstrip().endswith("[6] Second of 0.")


def test_lexical_overlap_weights_rare_words_above_common_ones(tmp_path):
    """The Answerer's overlap: the share of the question's IDF a sentence holds."""
    from rag.lexical import Lexical

    texts = ["we propose a model"] * 5 + ["we study a method"] * 3 + ["a quiver mutation model", "cats"]
    lex = Lexical.build(texts, key="k")

    class Snap:
        lexical = lex

    class Ret:
        def snapshot(self):
            return Snap()

    from rag.answer.pipeline import Answerer

    a = Answerer.__new__(Answerer)
    a.retriever = Ret()
    q = "Which model classifies quiver mutation?"
    rare = a._lexical_overlap(q, "Quiver mutation classes are learned.")
    common = a._lexical_overlap(q, "We propose a model.")
    assert 0.0 < common < rare <= 1.0


def test_names_in_skips_the_words_an_acronym_spells_out():
    from rag.answer.reading import local_abbreviations, names_in

    s = "We propose Refine via Intrinsic Self-Verification (ReVISE), which fine-tunes Mistral."
    assert names_in(s) == {"ReVISE", "Mistral"}
    # An acronym coined from lowercase words abbreviates a description.
    t = "It alternates the sequential learning (SL) stage with Proximal Policy Optimization (PPO)."
    assert local_abbreviations(t) == {"SL"}
    # The words after an acronym that spell it out in parentheses (tune q897).
    s = "We present MELON (Masked re-Execution and TooL comparisON), a novel defense."
    assert names_in(s) == {"MELON"}
    assert names_in("We present ReVISE (Refine via Intrinsic Self-Verification).") == {"ReVISE"}
    assert names_in("It is scored on MATH (Hendrycks et al.) by GPT-4o.") == {"MATH", "GPT-4o"}


def test_rule_name_not_stated_reads_sizes_variants_and_common_acronyms_as_no_name():
    from rag.answer.evidence import Candidate
    from rag.answer.rules import name_not_stated

    # Tune q897, q955: a size, the paper's own variant and "SOTA" name no LLM or benchmark.
    own = lambda c: "MELON (Provable Defense)"  # noqa: E731
    c = [Candidate(1, 0, "MELON-Aug beats SOTA defenses with a 1.6B model.", 0.6, 0)]
    assert name_not_stated("Which LLMs served as the backbone?", c, c, own=own)[1].fired
    c = [Candidate(1, 0, "MELON-Aug beats SOTA defenses with Llama-3-8B.", 0.6, 0)]
    assert not name_not_stated("Which LLMs served as the backbone?", c, c, own=own)[1].fired


def test_rule_name_not_stated_ignores_coined_abbreviations():
    from rag.answer.evidence import Candidate
    from rag.answer.rules import name_not_stated

    q = "Which LLM is CADFusion built on?"
    c = [Candidate(1, 0, "CADFusion alternates the sequential learning (SL) stage and the "
                         "visual feedback (VF) stage.", 0.6, 0)]
    chosen, r = name_not_stated(q, c, c, own=lambda c: "CADFusion")
    assert not r.fired  # SL and VF look like names
    chosen, r = name_not_stated(q, c, c, own=lambda c: "CADFusion",
                                abbreviations=lambda c: {"SL", "VF"})
    assert r.fired


def test_rule_name_not_stated_needs_a_name_beyond_the_question_and_the_title():
    from rag.answer.evidence import Candidate
    from rag.answer.reading import asks_name
    from rag.answer.rules import name_not_stated

    title = lambda c: "LEMoN: Label Error Detection"  # noqa: E731
    c = [Candidate(1, 0, "LEMoN identifies label errors in image-caption data.", 0.6, 0),
         Candidate(2, 0, "On the MSCOCO and Flickr30k datasets LEMoN finds label errors.", 0.5, 1),
         Candidate(3, 0, "It improves captioning when trained on cleaned data.", 0.4, 2)]
    chosen, r = name_not_stated("Which datasets is LEMoN evaluated on?", c[:1], c, own=title)
    assert not r.fired and [x.id for x in chosen] == [2]  # the sentence naming datasets
    # Only the paper's own name and unnamed "cleaned data": the rule fires.
    chosen, r = name_not_stated("Which base model does LEMoN fine-tune?", c[:1], [c[0], c[2]], own=title)
    assert r.fired and chosen == c[:1]
    # A capitalised word inside a sentence is a name; a field's term is not.
    d = [Candidate(1, 0, "The method fine-tunes Mistral with a new loss.", 0.6, 0)]
    assert not name_not_stated("What base model does it fine-tune?", d, d, own=title)[1].fired
    e = [Candidate(1, 0, "The method fine-tunes an LLM with a new loss.", 0.6, 0)]
    assert name_not_stated("What base model does it fine-tune?", e, e, own=title,
                           generic=lambda n: n == "LLM")[1].fired
    # Questions asking for a paper or a kind of thing ask for no name.
    assert not asks_name("Which paper proposes a new benchmark for agents?")
    assert not asks_name("What kind of generative model acts as the decoder?")
    assert asks_name("On which indirect prompt injection benchmark is MELON evaluated?")
    assert asks_name("Which CLIP backbone does it use?")
    # A model asked by its role (tune q947, q711, q844); "which" opening a clause asks none.
    assert asks_name("Which model serves as the attack's adversarial prompter?")
    assert asks_name("Which captioning model did they train on the filtered data?")
    assert not asks_name("Which papers train models directly on raw bytes?")
    assert not asks_name("Is there a setup in which a model's skill fades during training?")
    assert not asks_name("The system, which picks how many model copies to run, is fast?")
    assert not asks_name("Which model architecture does it use to synthesize experiences?")


def test_generic_acronyms_name_no_paper(fake_engine):
    from rag.answer.reading import named_papers

    eng = fake_engine()
    hits = eng.search("prompt injection defense for LLM agents", k=5)
    corpus = [p.title + " " + p.abstract for p in eng.papers()]
    assert "LLM" not in named_papers("Which LLM agents resist prompt injection?", hits, corpus)
    assert "MELON" in named_papers("How does MELON detect prompt injection?", hits, corpus)


def test_numbers_match_by_value():
    assert not claim_not_in_evidence("It has 3,000 pairs.", ["a dataset with 3K pairs"]).fired
    assert claim_not_in_evidence("It has 4,000 pairs.", ["a dataset with 3K pairs"]).fired


def test_common_terms_are_not_claims_but_unknown_names_are():
    corpus = [f"Paper {i} studies LLM agents." for i in range(10)] + ["MELON masks tool calls."]
    from rag.answer.reading import is_generic

    generic = lambda n: is_generic(n, corpus)  # noqa: E731
    assert not claim_not_in_evidence("An LLM is used.", ["It masks calls."], generic).fired
    assert claim_not_in_evidence("MELON uses GPT-5.", ["It masks calls."], generic).fired


def test_a_count_is_stated_only_where_the_counted_thing_is_named():
    from rag.answer.evidence import Candidate
    from rag.answer.rules import value_not_stated

    c = [Candidate(1, 0, "MeCo works across model scales (600M to 8B parameters).", 0.6, 0)]
    _, r = value_not_stated("How many GPUs were used to pre-train MeCo?", c, c)
    assert r.fired  # numbers, but none counts GPUs
    _, r = value_not_stated("How many parameters does the largest MeCo model have?", c, c)
    assert not r.fired
    # The counted thing named beside a number that counts something else
    # (tune q909, q544, q565, q606): no count of it is stated.
    c = [Candidate(1, 0, "As it involves two hard tasks, we collect failed and successful "
                         "paths to construct preference pairs.", 0.6, 0)]
    _, r = value_not_stated("How many preference pairs are built for training?", c, c)
    assert r.fired
    c = [Candidate(1, 0, "We construct 12K preference pairs from failed paths.", 0.6, 0)]
    _, r = value_not_stated("How many preference pairs are built for training?", c, c)
    assert not r.fired


def test_evidence_extended_cites_a_retrieved_paper_the_claim_names(fake_engine):
    from rag.types import Filters

    eng = fake_engine(llm=ScriptedLLM(pick("MELON"), "MELON masks tool calls. ShieldAgent builds rule circuits."),
                      evidence_floor=0.0)
    ids = by_name(eng)
    a = eng.ask("Which papers defend agents?", filters=Filters(paper_ids=[ids["MELON"], ids["ShieldAgent"]]))
    assert not a.declined, a.text
    shield = next(c for c in a.citations if short_title(c.paper.title) == "ShieldAgent")
    assert shield.quotes and all(q in shield.paper.abstract for q in shield.quotes)
    assert shield.number in a.sentences[1].citations and not a.sentences[1].withdrawn


def test_a_paper_the_model_passed_over_joins_only_past_the_evidence_check(fake_engine):
    from rag.types import Filters

    def verdict(messages):  # the check rejects ShieldAgent's sentences, accepts MELON's
        return "no" if "ShieldAgent" in messages[1]["content"] else "yes"

    eng = fake_engine(llm=ScriptedLLM(pick("MELON"), "MELON masks tool calls. ShieldAgent builds rule circuits.",
                                      verdict=verdict), evidence_floor=0.0)
    ids = by_name(eng)
    a = eng.ask("Which papers defend agents?", filters=Filters(paper_ids=[ids["MELON"], ids["ShieldAgent"]]))
    assert not a.declined, a.text
    assert all(short_title(c.paper.title) != "ShieldAgent" for c in a.citations)
    assert a.sentences[1].withdrawn and not a.sentences[0].withdrawn
    assert "unchosen_paper_not_answering" in rules_fired(a)


def test_evidence_extended_takes_a_verbatim_sentence_the_model_quoted(fake_engine):
    # The synthesis repeats another sentence of the cited abstract word for word:
    # it joins the evidence instead of being withdrawn as unsupported.
    def synth(s):
        return ("Specifically, ShieldAgent first constructs a safety policy model by extracting "
                "verifiable rules from policy documents.")

    eng = fake_engine(llm=ScriptedLLM(pick("11.3%"), synth))
    a = eng.ask(SHIELD_Q)
    assert not a.declined and not a.sentences[0].withdrawn
    assert "evidence_extended" in rules_fired(a)
    assert any("verifiable rules" in q for q in a.citations[0].quotes)


def test_rule_question_part_uncovered_adds_the_sentence_holding_the_missing_part():
    from rag.answer.evidence import Candidate
    from rag.answer.rules import question_part_uncovered
    from rag.text import stemmer

    terms = stemmer().terms
    common = {"model", "propos", "method"}
    c = [Candidate(1, 0, "We evaluate 24 models as embodied agents in four environments.", 0.6, 0),
         Candidate(2, 0, "The best model, GPT-4o, scores 28.9% on average.", 0.4, 1),
         Candidate(3, 0, "We propose a new method for embodied agents.", 0.5, 2),
         Candidate(4, 1, "Another paper reports an average score of 90%.", 0.5, 0)]
    q = "Which model did best among the embodied agents, and what was its average score?"
    chosen, r = question_part_uncovered(q, c[:1], c, terms, lambda t: t not in common)
    # The chosen paper's sentence with "average score" joins; the other paper's never does.
    assert r.fired and [x.id for x in chosen] == [1, 2]
    chosen, r = question_part_uncovered("Which model was evaluated as embodied agents?", c[:1], c,
                                        terms, lambda t: t not in common)
    assert not r.fired and chosen == c[:1]
    # A common term ("method") left uncovered adds nothing.
    chosen, r = question_part_uncovered("Which method evaluates embodied agents?", c[:1], c,
                                        terms, lambda t: t not in common)
    assert not r.fired and chosen == c[:1]


def test_a_measure_reached_asks_for_a_value():
    assert asks_value("What FID does Angle Domain Guidance achieve on MS-COCO?")
    assert asks_value("What absolute VQAScore did the agents reach on COCO?")
    assert not asks_value("What does Angle Domain Guidance achieve on MS-COCO?")
    assert not asks_value("Which dataset does the method use to reach its goal?")


def test_rule_value_not_stated_ignores_the_questions_own_number_words():
    from rag.answer.evidence import Candidate
    from rag.answer.rules import value_not_stated

    # "two quivers" is the question's own wording, not the accuracy it asks for.
    c = [Candidate(1, 0, "Given two quivers, can one decide if they are mutation equivalent?", 0.6, 0)]
    q = "What accuracy does the network reach when classifying whether two quivers are equivalent?"
    _, r = value_not_stated(q, c, c)
    assert r.fired
    # A number word or single digit the question lacks is a stated value.
    for text in ("It reaches three times the baseline accuracy.", "It errs on 3 of the quivers."):
        d = [Candidate(1, 0, text, 0.6, 0)]
        _, r = value_not_stated(q, d, d)
        assert not r.fired, text


def test_a_comparison_of_two_pinned_papers_quotes_both(fake_engine):
    # The model picks one pinned paper's sentences only; the other pinned paper
    # joins with its closest sentence, however far (the user chose both papers).
    from rag.types import Filters

    eng = fake_engine(llm=ScriptedLLM(pick("MELON"), "They differ."), evidence_floor=0.9)
    ids = by_name(eng)
    pins = Filters(paper_ids=[ids["MELON"], ids["ShieldAgent"]])
    a = eng.ask("How do their approaches differ?", filters=pins)
    assert not a.declined, a.text
    assert "one_sided_comparison" in rules_fired(a)
    assert {e.paper_id for e in a.evidence} == {ids["MELON"], ids["ShieldAgent"]}
    # A question that compares nothing keeps the model's choice.
    b = eng.ask("What do they evaluate on?", filters=pins)
    assert "one_sided_comparison" not in rules_fired(b)


def test_a_decline_after_the_synthesis_names_the_paper_the_question_names(fake_engine):
    # One paper named in a comparison; another paper ranks first and its
    # sentence comes first. When every claim is withdrawn, the decline is about
    # the named paper's abstract, not the first quoted one.
    either = lambda sents: [i for i, t in sents.items()  # noqa: E731
                            if "MELON" in t or "ShieldAgent" in t][:4]
    eng = fake_engine(llm=ScriptedLLM(either, "It uses 512 GPUs [1]."), evidence_floor=0.0,
                      evidence_papers=5)
    # With the fake embeddings MELON ranks first and ShieldAgent fifth.
    q = ("How does ShieldAgent compare with masked re-execution of tool calls "
         "against indirect prompt injection attacks on LLM agents, in GPUs?")
    a = eng.ask(q)
    assert a.declined and a.decline_kind == "missing_detail", a.text
    assert "declined_after_synthesis" in rules_fired(a)
    # The paper the synthesis left out was quoted; the decline judged the model's sentence.
    assert "each_paper_quoted" in rules_fired(a)
    assert a.text.startswith("The abstract of ShieldAgent does not state this"), a.text


def test_conversation_resolves_authors_roles_choices_and_requests_for_more(fake_engine):
    eng = fake_engine()
    papers = eng.retriever.snapshot().papers
    by = by_name(eng)
    one = [{"role": "assistant", "content": "x", "papers": [by["MELON"]]}]
    two = [{"role": "assistant", "content": "x", "papers": [by["ShieldAgent"], by["MELON"]]}]
    # With one cited paper, "they" are its authors (and the verb agrees).
    r = resolve("Which datasets do they evaluate on?", one, papers)
    assert r.question == "Which datasets does MELON evaluate on?" and r.pinned == [by["MELON"]]
    assert resolve("What are their main results?", one, papers).question == "What are MELON's main results?"
    # A role the cited paper plays keeps its noun; a longer noun phrase is something else.
    r = resolve("How well does the defense work?", one, papers)
    assert r.question == "How well does MELON's defense work?" and r.pinned == [by["MELON"]]
    assert resolve("Does the system prompt matter?", one, papers).pinned == []
    assert resolve("What is the system built on?", one, papers).question == "What is MELON's system built on?"
    # "Which one…" chooses among the cited papers.
    r = resolve("Which one is faster?", two, papers)
    assert r.question == "Which of ShieldAgent and MELON is faster?"
    assert r.pinned == [by["ShieldAgent"], by["MELON"]]
    assert resolve("Which one is faster?", one, papers).pinned == []
    # "Tell me more" is about the cited papers, and an overview the check cannot decline.
    r = resolve("Tell me more", two, papers)
    assert r.pinned == [by["ShieldAgent"], by["MELON"]] and asks_overview(r.question)
    # ...but a request for a detail is checked like any other question.
    assert not asks_overview("Tell me more about the GPUs it used")
    # An elliptical follow-up that names one cited paper is about that one only.
    r = resolve("What about the MELON paper?", two, papers)
    assert r.pinned == [by["MELON"]] and r.question == "What about the MELON paper?"


def test_rule_value_clause_uncovered_adds_the_sentence_stating_the_asked_value():
    from rag.answer.evidence import Candidate
    from rag.answer.rules import value_clause_uncovered

    q = "Which paper proposes a guardrail agent for LLM agents, and how much does it beat prior methods?"
    bench = Candidate(1, 0, "We introduce ShieldAgent-Bench, a dataset with 3K pairs across 6 web environments.", 0.6, 2)
    margin = Candidate(2, 0, "ShieldAgent outperforms prior methods by 11.3% on average.", 0.5, 4)
    other = Candidate(3, 1, "Our defense beats prior methods by 20%.", 0.5, 1)  # a paper not chosen
    chosen, r = value_clause_uncovered(q, [bench], [bench, margin, other], own="ShieldAgent")
    assert r.fired and chosen == [bench, margin]
    # A chosen sentence stating a value in the clause's words covers it; no value asked, no rule.
    assert not value_clause_uncovered(q, [margin], [bench, margin])[1].fired
    assert not value_clause_uncovered("Which paper proposes a guardrail agent?", [bench], [bench, margin])[1].fired
    # Each clause asking for a value is covered on its own.
    q2 = "How many pairs does ShieldAgent-Bench hold, and what recall does ShieldAgent reach?"
    recall = Candidate(4, 0, "ShieldAgent reaches a recall of 90.1%.", 0.4, 5)
    chosen, r = value_clause_uncovered(q2, [bench], [bench, margin, recall], own="ShieldAgent")
    assert r.fired and recall in chosen and margin not in chosen


def test_references_in_a_question_about_chosen_papers_mean_those_papers(fake_engine):
    # "Ask about selected" with an earlier conversation: "it" is the chosen
    # paper, not the paper the previous answer cited.
    from rag.types import Filters

    # A scripted model: the fake engine's default would load the real GGUF (27 s).
    eng = fake_engine(llm=ScriptedLLM(pick("ShieldAgent"), "ShieldAgent is a guardrail."))
    ids = by_name(eng)
    history = [{"role": "user", "content": "Which papers defend agents?"},
               {"role": "assistant", "content": "MELON does [1].", "papers": [ids["MELON"]]}]
    a = eng.ask("What are its limitations?", history=history, filters=Filters(paper_ids=[ids["ShieldAgent"]]))
    assert a.standalone_question == "What are its limitations?"
    assert a.pinned == [ids["ShieldAgent"]]
    assert not any(r.name == "follow_up_reference" for r in a.rules)


def test_a_synthesis_cut_at_its_token_limit_withdraws_its_unfinished_sentence(fake_engine):
    text = lambda s: f"ShieldAgent achieves SOTA on ShieldAgent-Bench {ids_of('SOTA', s)}. Additionally, ShieldAgent"  # noqa: E731
    eng = fake_engine(llm=ScriptedLLM(pick("ShieldAgent"), text), synthesis_max_tokens=8)
    a = eng.ask(SHIELD_Q)
    assert not a.declined, a.text
    assert "cut_off_sentence" in rules_fired(a)
    assert [s.withdrawn for s in a.sentences] == [False, True]
    assert "length limit" in a.sentences[-1].withdrawn_reason
    assert "Additionally" not in a.text.split("\n\n")[0]  # the synthesis; quotes follow
    # The same text within the limit is a finished answer: nothing is cut.
    eng = fake_engine(llm=ScriptedLLM(pick("ShieldAgent"), text), synthesis_max_tokens=400)
    assert "cut_off_sentence" not in rules_fired(eng.ask(SHIELD_Q))


def test_conversation_resolves_the_other_one_against_an_earlier_answer(fake_engine):
    eng = fake_engine()
    papers = eng.retriever.snapshot().papers
    by = by_name(eng)
    h = [{"role": "user", "content": "Which papers defend agents?"},
         {"role": "assistant", "content": "x", "papers": [by["ShieldAgent"], by["MELON"]]},
         {"role": "user", "content": "How is the first one evaluated?"},
         {"role": "assistant", "content": "y", "papers": [by["ShieldAgent"]]}]
    r = resolve("How is the other one evaluated?", h, papers)
    assert r.question == "How is MELON evaluated?" and r.pinned == [by["MELON"]]
    # "On the other hand" refers to no paper.
    assert resolve("On the other hand, is it fast?", h, papers).pinned == [by["ShieldAgent"]]


def test_a_question_about_the_collection_is_not_rewritten_as_a_follow_up(fake_engine):
    """Issue #26: a new "which papers …" question after an answer is asked as
    it stands: its bare "them" is the web agents it names, not the last
    answer's papers; explicit references still resolve."""
    eng = fake_engine()
    papers = eng.retriever.snapshot().papers
    by = by_name(eng)
    h = [{"role": "user", "content": "Which papers defend agents?"},
         {"role": "assistant", "content": "x", "papers": [by["ShieldAgent"], by["MELON"]]}]
    q = "Which papers attack web agents rather than defend them?"
    r = resolve(q, h, papers)
    assert r.question == q and not r.pinned and not r.include
    assert resolve("How do they differ?", h, papers).include  # a follow-up still resolves
    assert "ShieldAgent" in resolve("Which papers improve on both of them?", h, papers).question
    assert "MELON" in resolve("What are their limitations?", h, papers).question


def test_former_and_latter_follow_the_order_the_question_named_them(fake_engine):
    """Issue #26: after "Compare MELON and ShieldAgent", "the former" is MELON
    even when the answer cited ShieldAgent first; without names in the
    question, the answer's citation order stands."""
    eng = fake_engine()
    papers = eng.retriever.snapshot().papers
    by = by_name(eng)
    cited = [by["ShieldAgent"], by["MELON"]]  # the answer cited ShieldAgent first
    h = [{"role": "user", "content": "Compare MELON and ShieldAgent."},
         {"role": "assistant", "content": "x", "papers": cited}]
    assert resolve("How is the former evaluated?", h, papers).pinned == [by["MELON"]]
    assert resolve("What does the latter propose?", h, papers).pinned == [by["ShieldAgent"]]
    assert resolve("How is the second one evaluated?", h, papers).pinned == [by["ShieldAgent"]]
    h[0]["content"] = "Which papers defend agents?"
    assert resolve("How is the former evaluated?", h, papers).pinned == [by["ShieldAgent"]]


@pytest.mark.parametrize(("question", "asks"), [
    ("What accuracy does it reach on ImageNet?", True),
    ("What is the speed-up of the method over vLLM?", True),
    ("What privacy budget epsilon does Cape use?", True),
    ("What accuracy improvement does it get?", True),
    ("What success rate do agents achieve?", True),
    ("What learning rate schedule does the paper propose?", False),
    ("What score function does the method use?", False),
    ("What cost model do they assume?", False),
    ("What rate-distortion trade-off does it study?", False),
])
def test_asks_value_needs_the_measure_word_to_end_its_noun_phrase(question, asks):
    assert asks_value(question) is asks


def test_summarize_these_papers_quotes_every_pinned_paper(fake_engine):
    """Issue #26: "Summarize these papers" about chosen papers covers each one,
    even when the model's evidence choice took sentences of only the first."""
    from rag.types import Filters

    eng = fake_engine(llm=ScriptedLLM(pick("MELON"), "MELON masks tool calls. ShieldAgent "
                                      "builds rule circuits."))
    ids = by_name(eng)
    a = eng.ask("Summarize these papers.",
                filters=Filters(paper_ids=[ids["MELON"], ids["ShieldAgent"]]))
    assert "pinned_paper_uncovered" in rules_fired(a)
    assert {short_title(c.paper.title) for c in a.citations} >= {"MELON", "ShieldAgent"}
    for c in a.citations:
        assert c.quotes and all(q in c.paper.abstract for q in c.quotes)
    # A detail question about the same papers is not padded with every paper.
    b = eng.ask("Which of these uses AgentDojo?",
                filters=Filters(paper_ids=[ids["MELON"], ids["ShieldAgent"]]))
    assert "pinned_paper_uncovered" not in rules_fired(b)


def test_rule_names_uncited_paper_withdraws_a_claim_about_another_paper(fake_engine):
    """A synthesis sentence about a retrieved paper it does not cite ("<other
    paper> … [1]" with [1] ShieldAgent) is withdrawn, visibly, with the paper named."""
    probe = fake_engine(llm=ScriptedLLM(pick("11.3%"), "x"))
    other = next(h.paper.name for h in probe.search(SHIELD_Q)
                 if h.paper.name not in ("ShieldAgent", "Position"))
    # The check admits the 11.3% sentence, not the other paper's (no evidence_extended).
    verdict = lambda msgs: "yes" if "11.3%" in msgs[-1]["content"] else "no"  # noqa: E731
    eng = fake_engine(llm=ScriptedLLM(pick("11.3%"), lambda s: (
        f"ShieldAgent outperforms prior methods by 11.3% {ids_of('11.3%', s)}. "
        f"{other} outperforms prior methods too {ids_of('11.3%', s)}."), verdict))
    a = eng.ask(SHIELD_Q)
    assert other in {h.paper.name for h in a.retrieved}  # retrieved, not cited
    assert not a.declined and {c.paper.name for c in a.citations} == {"ShieldAgent"}
    first, second = a.sentences
    assert not first.withdrawn
    assert second.withdrawn and other in second.withdrawn_reason
    assert any(r.name == "names_uncited_paper" and r.fired for r in a.rules)


def test_which_paper_cites_the_most_probable_paper_alone(fake_engine):
    # The model takes evidence from every offered paper for a question asking for one.
    eng = fake_engine(llm=ScriptedLLM(lambda s: list(s), lambda s: "It protects agents [1]."),
                      evidence_floor=0.0)
    a = eng.ask("Which paper protects LLM agents from attacks?")
    assert not a.declined, a.text
    rule = next(r for r in a.rules if r.name == "paper_relevance")
    assert rule.data["asks"] == "one paper"
    assert len(rule.data["papers"]) >= 2  # the chosen papers were weighed
    kept = [r["paper_id"] for r in rule.data["papers"] if r["status"] == "kept"]
    assert [c.paper.paper_id for c in a.citations] == kept and len(kept) == 1
    # "Which papers…" may cite several from the same choice.
    plural = eng.ask("Which papers protect LLM agents from attacks?")
    assert next(r for r in plural.rules if r.name == "paper_relevance").data["asks"] == "papers"
    assert len(plural.citations) > 1


def test_a_common_term_the_quotes_lack_is_quoted_from_the_cited_abstract(fake_engine):
    # "LLM" is a field's common term: no fabrication, but the sentence of MELON's
    # abstract that says it joins the quotes (the fabrication audit checks quotes).
    synth = lambda s: f"MELON re-executes the LLM agent's trajectory with a masked user prompt {ids_of('masking function', s)}."  # noqa: E731
    eng = fake_engine(llm=ScriptedLLM(pick("masking function"), synth), evidence_floor=0.0)
    a = eng.ask("How does MELON detect attacks?")
    assert not a.declined and not a.sentences[0].withdrawn, a.text
    quotes = [q for c in a.citations for q in c.quotes]
    assert any("LLM" in q for q in quotes) and len(a.citations) == 1
    assert "evidence_extended" in rules_fired(a)


def test_a_question_term_the_quotes_lack_is_quoted_from_the_cited_abstract(fake_engine):
    # "false positives" is the question's term; the chosen sentence lacks it but
    # another sentence of MELON's abstract states it: that sentence joins the
    # quotes, verbatim, instead of the claim being withdrawn as an echo.
    synth = lambda s: ("MELON detects attacks by re-executing the agent's trajectory with a masked "  # noqa: E731
                       f"user prompt and reduces false positives {ids_of('masking function', s)}.")
    # coverage_max_added=0: the sentence is not among the candidates the model saw
    eng = fake_engine(llm=ScriptedLLM(pick("masking function"), synth), evidence_floor=0.0,
                      coverage_max_added=0)
    a = eng.ask("How does MELON keep false positives low?")
    assert not a.declined and not a.sentences[0].withdrawn, a.text
    quotes = [q for c in a.citations for q in c.quotes]
    assert any("false positives" in q for q in quotes), quotes
    assert all(q in a.citations[0].paper.abstract for q in quotes)


def test_a_question_term_no_cited_abstract_states_is_withdrawn(fake_engine):
    synth = lambda s: ("MELON detects attacks by re-executing the agent's trajectory with a masked "  # noqa: E731
                       f"user prompt for protein folding {ids_of('masking function', s)}.")
    eng = fake_engine(llm=ScriptedLLM(pick("masking function"), synth), evidence_floor=0.0)
    a = eng.ask("How does MELON detect attacks in protein folding agents?")
    assert a.declined or a.sentences[0].withdrawn, a.text
    assert "question_term_unsupported" in rules_fired(a)


def test_a_paper_added_by_evidence_extended_names_itself(fake_engine):
    # The sentence cites ShieldAgent only; its MELON half is backed by a MELON
    # sentence that evidence_extended adds. That sentence does not say "MELON",
    # but the citation now does: the question's "MELON" is no echo. (Not a
    # comparison, which would quote each paper: rule each_paper_quoted.)
    synth = lambda s: (f"ShieldAgent reaches a recall of 90.1%, while MELON identifies an attack "  # noqa: E731
                       f"if the actions of the original and masked executions are similar "
                       f"{ids_of('90.1%', s)}.")
    eng = fake_engine(llm=ScriptedLLM(pick("90.1%"), synth), evidence_floor=0.0,
                      coverage_max_added=0)
    a = eng.ask("How do ShieldAgent and MELON flag attacks?")
    assert "evidence_extended" in rules_fired(a)
    assert not a.sentences[0].withdrawn, a.sentences[0].withdrawn_reason
    assert len(a.sentences[0].citations) == 2


def test_ranker_choice_takes_the_best_scored_in_prompt_order():
    from rag.answer.evidence import Candidate, ranker_choice

    cands = [Candidate(1, 0, "a", 0.5, 0, 0.52), Candidate(2, 0, "b", 0.6, 1, 0.71),
             Candidate(3, 1, "c", 0.7, 0, 0.60), Candidate(4, 1, "d", 0.4, 2, 0.30)]
    # By the ranking score (cosine plus prior and boosts), not the bare cosine.
    assert ranker_choice(cands, 2) == [2, 3]
    assert ranker_choice(cands, 1) == [2]
    assert ranker_choice(cands, 9) == [1, 2, 3, 4]


def test_ranker_choice_for_pinned_papers_reads_every_paper():
    """Pinned papers (``each``): every paper's best sentence first, even one
    whose sentences all rank below another paper's, then the best of the rest."""
    from rag.answer.evidence import Candidate, ranker_choice

    cands = [Candidate(1, 0, "a", 0.5, 0, 0.72), Candidate(2, 0, "b", 0.6, 1, 0.71),
             Candidate(3, 0, "c", 0.7, 2, 0.70), Candidate(4, 1, "d", 0.4, 0, 0.30),
             Candidate(5, 1, "e", 0.4, 1, 0.20)]
    assert ranker_choice(cands, 2) == [1, 2]  # open question: the best two only
    assert ranker_choice(cands, 2, each=1) == [1, 4]
    assert ranker_choice(cands, 4, each=1) == [1, 2, 3, 4]
    assert ranker_choice(cands[:3], 4, each=1) == [1, 2, 3]  # fewer than asked: all


def test_the_decisions_check_takes_its_wording_from_the_setting(fake_engine):
    """AQA_VERDICT_PROMPT: the decision's check (and the trace of what it read)
    uses the named wording; the per-paper check keeps prompts/check_*."""
    from rag.prompts import render

    for prompt in ("check", "check_strict"):
        llm = ScriptedLLM(pick("11.3%"), "ShieldAgent outperforms prior methods by 11.3% [1].")
        a = fake_engine(llm=llm, verdict_prompt=prompt).ask(SHIELD_Q)
        checks = [c for c in llm.calls if c["json_schema"] and "answer" in c["json_schema"]["properties"]]
        assert [c["messages"][0]["content"] for c in checks] == [render(f"{prompt}_system")]
        assert any(r.name == "evidence_check" for r in a.rules)


def test_ranker_chooser_makes_no_choice_call_and_a_short_synthesis(fake_engine):
    """AQA_EVIDENCE_CHOOSER=ranker: the best-ranked candidates are the evidence
    without the choice prompt, and the synthesis continues the check's short
    conversation, which holds only them, numbered as they were offered."""
    def no_choice(sents):
        raise AssertionError("the ranker chooses; the model is not asked")

    llm = ScriptedLLM(no_choice, "ShieldAgent is a guardrail agent [1].")
    eng = fake_engine(llm=llm, evidence_chooser="ranker", evidence_ranker_chosen=2)
    a = eng.ask(SHIELD_Q)
    check, synthesis = llm.calls
    assert "answer" in check["json_schema"]["properties"] and synthesis["json_schema"] is None
    ids = next(r.data["ids"] for r in a.rules if r.name == "no_evidence")
    quoted_ids = [int(i) for i in re.findall(r"\[(\d+)\] \"", check["messages"][1]["content"])]
    assert len(ids) == 2 and quoted_ids == ids
    assert synthesis["messages"][:2] == check["messages"]
    assert synthesis["messages"][2] == {"role": "assistant", "content": '{"answer": "yes"}'}
    assert not a.declined and [short_title(c.paper.title) for c in a.citations] == ["ShieldAgent"]


def test_auto_chooser_ranks_pinned_questions_and_asks_the_model_otherwise(fake_engine):
    """AQA_EVIDENCE_CHOOSER=auto: a question pinned to a paper gets the
    ranker's evidence (no choice call: the check, then a synthesis continuing
    it); a question naming the paper, or none, is chosen by the model; the
    trace says which."""
    from rag.types import Filters

    llm = ScriptedLLM(lambda s: [1], "ShieldAgent is a guardrail agent [1].")
    eng = fake_engine(llm=llm, evidence_chooser="auto", evidence_ranker_pinned=3)
    pid = by_name(eng)["ShieldAgent"]
    a = eng.ask("What does this paper propose?", filters=Filters(paper_ids=[pid]))
    assert not a.declined, a.text
    chose = next(r.data for r in a.rules if r.name == "no_evidence")
    assert chose["chooser"] == "ranker" and len(chose["ids"]) == 3
    assert not any(c["json_schema"] and "ids" in c["json_schema"]["properties"] for c in llm.calls)
    assert llm.calls[-1]["messages"][:2] == llm.calls[0]["messages"]  # synthesis continues the check
    for q in (SHIELD_Q, "How can guardrails enforce safety policies on the actions of LLM agents?"):
        llm.calls.clear()
        a = eng.ask(q)
        assert next(r.data for r in a.rules if r.name == "no_evidence")["chooser"] == "model"
        assert "ids" in llm.calls[0]["json_schema"]["properties"]


def test_which_paper_answer_quotes_what_the_paper_does_without_a_synthesis(fake_engine):
    # "Which paper…": the cited paper is named and quoted, in code, by the
    # sentence of its evidence that says what it does; the model writes nothing.
    llm = ScriptedLLM(lambda s: list(s), lambda s: "A synthesis the model should not write [1].")
    eng = fake_engine(llm=llm, evidence_floor=0.0)
    a = eng.ask("Which paper protects LLM agents from attacks?")
    assert not a.declined, a.text
    assert [c["json_schema"] is not None for c in llm.calls].count(False) == 0  # no synthesis call
    (s,) = a.sentences
    cited = a.citations[0].paper
    name, _, quote = s.text.partition(": ")
    assert name == cited.name and quote.startswith("“") and quote.endswith("”")
    assert quote.strip("“”") in cited.abstract and not s.withdrawn
    assert "should not write" not in a.text


def test_which_papers_answer_quotes_each_and_the_model_writes_only_the_contrast(fake_engine):
    contrast = lambda s: f"One differs from the other {''.join(f'[{i}]' for i in s)}."  # noqa: E731
    llm = ScriptedLLM(lambda s: list(s), contrast)
    eng = fake_engine(llm=llm, evidence_floor=0.0)
    a = eng.ask("Which papers protect LLM agents from attacks?")
    assert not a.declined and len(a.citations) > 1, a.text
    *lines, last = a.sentences
    assert len(lines) == len(a.citations)
    for s, c in zip(lines, a.citations, strict=True):
        name, _, quote = s.text.partition(": ")
        assert name == c.paper.name and quote.strip("“”") in c.paper.abstract
        assert s.citations == [c.number]
    # The contrast prompt holds only the quoted sentences, one set per paper.
    (write,) = [c["messages"] for c in llm.calls if c["json_schema"] is None]
    shown = re.findall(r"^\[\d+\] (.*)$", write[1]["content"], re.M)
    assert sorted(shown) == sorted(s.text.partition(": ")[2].strip("“”") for s in lines)
    assert set(last.citations) == {c.number for c in a.citations}


def test_contrast_prompt_names_every_cited_paper_in_order():
    """With two papers the contrast form is "A … whereas B …"; with three or
    more each paper gets its clause, in the order cited (the two-paper form
    left the middle one out)."""
    from rag.answer.evidence import Candidate
    from rag.answer.listing import contrast_prompt
    from rag.types import Paper, SearchHit

    hits = [SearchHit(paper=Paper(paper_id=n, title=f"{n}: a method", abstract=f"We propose {n}.",
                                  source="s"), score=1.0, rank=i + 1)
            for i, n in enumerate(["Alpha", "Beta", "Gamma"])]
    said = [Candidate(i + 1, i, f"We propose {h.paper.name}.", 0.5, 0) for i, h in enumerate(hits)]
    two = contrast_prompt(said[:2], hits)
    assert "Alpha [n] does this, whereas Beta [n]" in two and "Gamma" not in two
    three = contrast_prompt(said, hits)
    form = three[three.index("like"):]
    assert form.index("Alpha") < form.index("Beta") < form.index("Gamma")
    assert "each of Alpha, Beta, Gamma" in three
    assert re.findall(r"^\[(\d+)\] ", three, re.M) == ["1", "2", "3"]


@pytest.mark.parametrize("question, compares", [
    ("How do MELON and ShieldAgent differ?", True),
    ("What do both papers have in common?", True),
    ("Compare DRAGO vs. the policy committee.", True),
    # A comparison word inside a hyphenated name compares nothing.
    ("Which extensions does the Difference-in-Differences meta-learner paper provide?", False),
    ("Which trick from temporal-difference learning inspired the summaries?", False),
])
def test_a_comparison_word_inside_a_hyphenated_name_is_not_a_comparison(question, compares):
    from rag.answer.reading import compares_papers, is_comparative

    assert compares_papers(question, one_named=True) is compares
    assert is_comparative(question) is compares


@pytest.mark.parametrize("question, compares", [
    # A second paper described beside the named one, with no comparison word.
    ("MELON and the guardrail-policy paper both protect agents. What does each rely on?", True),
    ("The web-agent red-teaming study and ShieldAgent: what does each one target?", True),
    # The named paper's own parts, or the named paper called "the … paper".
    ("According to the MELON paper, what does it mask?", False),
    ("What are the two components of DRAGO, and what does each do?", False),
    ("How does ShieldAgent build its policies and the verification step?", False),
])
def test_one_named_paper_beside_a_described_one_is_a_comparison(question, compares):
    from rag.answer.reading import compares_papers

    assert compares_papers(question, one_named=True) is compares


def test_a_paper_named_by_its_own_name_is_retrieved_wherever_the_search_ranks_it(fake_engine):
    # With room for one paper, the search keeps one of the two named papers; the
    # other is found by its own name in the catalog and joins the hits.
    either = lambda sents: [i for i, t in sents.items()  # noqa: E731
                            if "MELON" in t or "ShieldAgent" in t][:4]
    eng = fake_engine(llm=ScriptedLLM(either, "They differ."), evidence_floor=0.0)
    q = "MELON and ShieldAgent both protect LLM agents. What does each check?"
    plain = eng.answerer._hits(q, pinned=[], include=[], k=1, filters=None)
    assert len(plain) == 1  # the search alone holds one of them
    a = eng.ask(q, k=1)
    names = {h.paper.name for h in a.retrieved}
    assert {"MELON", "ShieldAgent"} <= names, names
    rule = next(r for r in a.rules if r.name == "named_in_catalog")
    assert rule.fired and set(rule.data["names"]) == {"MELON", "ShieldAgent"}
    assert len(rule.data["included"]) == 2
    assert "named_papers_only" in rules_fired(a)


def test_a_word_inside_a_descriptive_title_names_no_paper_in_the_catalog(fake_engine):
    eng = fake_engine(llm=ScriptedLLM(pick("CLIP"), "Nothing."))
    backdoor = next(p for p in eng.retriever.snapshot().papers.values()
                    if p.title.startswith("A Closer Look at Backdoor Attacks on CLIP"))
    assert "CLIP" in backdoor.name  # its name is its whole title
    assert backdoor.paper_id not in {pid for v in eng.answerer._catalog_named(
        "Which CLIP variant does LEMoN use?").values() for pid in v}
    assert eng.answerer._catalog_named("What does LEMoN detect?").keys() == {"LEMoN"}


@pytest.mark.parametrize("question, asks", [
    ("At what URL is the code for the Plugin model hosted?", True),
    ("Where is the code hosted?", True),
    ("Where can the dataset be downloaded?", True),
    ("What is the link to the code?", True),
    # A URL as a topic, or "where" as a relative word, asks for no address.
    ("Which papers detect phishing URLs?", False),
    ("Which paper addresses knowledge graph completion or link prediction?", False),
    ("Which papers study settings where only little labelled data is available?", False),
])
def test_asks_link_reads_questions_asking_for_a_web_address(question, asks):
    from rag.answer.reading import asks_link

    assert asks_link(question) is asks


def test_value_not_stated_needs_a_web_address_for_a_url_question():
    from rag.answer.evidence import Candidate
    from rag.answer.rules import value_not_stated
    from rag.text import has_link

    placeholder = [Candidate(1, 0, "We provide our code at this https URL.", 0.6, 0)]
    given = [Candidate(1, 0, r"The model is available at \url{https://huggingface.co/x/y}.", 0.6, 0)]
    assert not has_link(placeholder[0].text) and has_link(given[0].text)
    assert value_not_stated("Where is the code hosted?", placeholder, placeholder)[1].fired
    assert not value_not_stated("Where is the code hosted?", given, given)[1].fired


def test_a_bound_or_complexity_is_a_value_asked_for():
    from rag.answer.reading import asks_value

    assert asks_value("What is the exact regret bound of the algorithm?")
    assert asks_value("What is the sample complexity of the method?")
    assert not asks_value("Which papers prove sample-complexity bounds?")


@pytest.mark.parametrize("question, asks", [
    ("Which datasets does it use?", True),
    ("What base model does it fine-tune?", True),
    # A measure of the artifact asks for a value, not a name.
    ("What dataset sizes does EmbodiedBench use?", False),
    ("Which benchmark scores does it report?", False),
])
def test_asks_name_leaves_a_measure_of_the_artifact_to_the_value_rules(question, asks):
    from rag.answer.reading import asks_name

    assert asks_name(question) is asks


def test_signal_row_holds_what_the_check_read(fake_engine):
    """A collected decision row (``aqa eval signals``) keeps the check's view,
    the question as checked and the chosen sentences, so that a variant of the
    check can be scored on the rows without rerunning the choice."""
    from eval.dataset import Question
    from eval.decision_fit import signals_of

    eng = fake_engine(llm=ScriptedLLM(pick("11.3%"), "never written", verdict="no"))
    q = Question(id="t1", question=SHIELD_Q, type="fact")
    row = signals_of(eng, q)
    assert row["signals"]["check_logit"] > 5 and row["outcome"] == "decline"
    assert row["checked"]["question"] == SHIELD_Q and "11.3%" in row["checked"]["quotes"]


def test_rule_each_paper_quoted_needs_a_comparison_leaving_a_paper_out():
    from rag.answer.rules import each_paper_quoted

    q = "How do ShieldAgent and MELON differ in what they check?"
    papers = ["ShieldAgent", "MELON", "ShieldAgent"]
    assert each_paper_quoted(q, papers, {"ShieldAgent"}).data["quoted"] == ["MELON"]
    assert not each_paper_quoted(q, papers, {"ShieldAgent", "MELON"}).fired
    assert not each_paper_quoted(q, ["ShieldAgent", "ShieldAgent"], set()).fired
    # With one paper named, "the two" means two parts of it.
    q = "What are the two key components of DRAGO?"
    assert not each_paper_quoted(q, ["DRAGO", "MELON"], {"DRAGO"}, one_named=True).fired
    assert each_paper_quoted(q, ["DRAGO", "MELON"], {"DRAGO"}).fired
    # An overview counts only for two or more pinned papers.
    q = "Summarize these papers."
    assert each_paper_quoted(q, ["A", "B"], {"A"}, pinned=2).data["asks"] == "overview"
    assert not each_paper_quoted(q, ["A", "B"], {"A"}).fired


def test_a_comparison_quotes_a_paper_its_synthesis_leaves_out(fake_engine):
    # The model chooses both papers' sentences but writes about one of them:
    # the other is quoted under its name after the synthesis, verbatim.
    either = lambda sents: [i for i, t in sents.items()  # noqa: E731
                            if "MELON" in t or "ShieldAgent" in t][:4]
    llm = ScriptedLLM(either, lambda s: f"ShieldAgent is a guardrail agent {ids_of('ShieldAgent', s)}.")
    eng = fake_engine(llm=llm, evidence_floor=0.0)
    ids = by_name(eng)
    a = eng.ask("How do ShieldAgent and MELON differ in protecting LLM agents?")
    assert not a.declined, a.text
    fired = [r for r in a.rules if r.name == "each_paper_quoted" and r.fired]
    assert fired and fired[0].data["quoted"] == ["MELON"], a.rules
    shown = [s for s in a.sentences if not s.withdrawn]
    assert {s.paper_id for s in shown} >= {ids["ShieldAgent"], ids["MELON"]}, a.text
    body = a.text.split("\n\n")[0]  # the citations list follows
    assert body.startswith("ShieldAgent is a guardrail agent") and "MELON: “" in body, a.text
    for c in a.citations:
        assert c.quotes and all(x in c.paper.abstract for x in c.quotes)
    # A synthesis that writes about both papers stands as written.
    llm.synthesis = lambda s: (f"ShieldAgent is a guardrail agent {ids_of('ShieldAgent', s)}. "
                               f"MELON is an IPI defense {ids_of('MELON', s)}.")
    b = eng.ask("How do ShieldAgent and MELON differ in protecting LLM agents?")
    assert "each_paper_quoted" not in rules_fired(b)
    assert "MELON: “" not in b.text.split("\n\n")[0], b.text


def test_a_summary_of_two_pinned_papers_quotes_each(fake_engine):
    # "Summarize these papers" about two chosen papers: each is quoted under its
    # name, though the model's own sentence is about one of them.
    from rag.types import Filters

    llm = ScriptedLLM(pick("MELON"), lambda s: f"MELON is an IPI defense {ids_of('MELON', s)[:3]}.")
    eng = fake_engine(llm=llm, evidence_floor=0.9)
    ids = by_name(eng)
    a = eng.ask("Summarize these papers.", filters=Filters(paper_ids=[ids["MELON"], ids["ShieldAgent"]]))
    assert not a.declined, a.text
    fired = [r for r in a.rules if r.name == "each_paper_quoted"]
    assert fired and fired[0].data["asks"] == "overview", a.rules
    assert "ShieldAgent: “" in a.text.split("\n\n")[0], a.text
    # One pinned paper is summarised as before.
    b = eng.ask("Summarize this paper.", filters=Filters(paper_ids=[ids["MELON"]]))
    assert "each_paper_quoted" not in rules_fired(b)


def test_a_paper_named_by_a_run_of_capitalised_words_is_that_paper(fake_engine):
    # "Speak Easy", "Packrat", "Speculative Prefill" are neither camel-case nor
    # acronyms; each is the whole of its paper's own name.
    eng = fake_engine(llm=ScriptedLLM(pick("Speak Easy"), "Nothing."))
    ids = {p.name: p.paper_id for p in eng.papers()}
    named = eng.answerer._catalog_named
    assert named("What does the Speak Easy paper find?") == {"Speak Easy": [ids["Speak Easy"]]}
    assert named("How does Packrat choose its configuration?") == {"Packrat": [ids["Packrat"]]}
    assert named("In Speculative Prefill, what is kept?").keys() == {"Speculative Prefill"}
    # Capitalised words that are no paper's whole name, or only part of one.
    assert named("What Bayesian methods does the collection cover?") == {}
    assert named("Is it Easy to jailbreak a model by speaking?") == {}


def test_named_papers_among_the_hits_include_a_run_of_capitalised_words():
    from rag.answer.reading import named_papers
    from rag.types import Paper, SearchHit

    def hit(title: str, abstract: str) -> SearchHit:
        return SearchHit(paper=Paper(paper_id=title, title=title, abstract=abstract), score=1.0, rank=1)

    hits = [hit("Speak Easy: Eliciting Harmful Jailbreaks", "We study jailbreaks."),
            hit("Angle Domain Guidance: Latent Diffusion", "We propose a guidance method.")]
    assert named_papers("What does the Speak Easy paper find?", hits) == {"Speak Easy": [0]}
    assert named_papers("How do Speak Easy and Angle Domain Guidance differ?", hits) == {
        "Speak Easy": [0], "Angle Domain Guidance": [1]}
    # Part of a name ("Domain Guidance") is not the paper's name.
    assert named_papers("What is Domain Guidance?", hits) == {}


def test_rule_compared_paper_does_what_quotes_what_each_compared_paper_does():
    from rag.answer.evidence import Candidate
    from rag.answer.rules import compared_paper_does_what

    a = ["LLM agents are vulnerable to indirect prompt injection attacks.",
         "We propose MELON, a defense that re-executes the trajectory with a masked prompt.",
         "Experiments on AgentDojo show that it blocks most attacks."]
    b = ["We propose ShieldAgent, a guardrail agent that verifies action trajectories.",
         "It reaches 90.1% recall."]
    abstracts = {0: " ".join(a), 1: " ".join(b)}
    cands = [Candidate(i + 1, 0, t, 0.5, i) for i, t in enumerate(a)] + [
        Candidate(4 + i, 1, t, 0.5, i) for i, t in enumerate(b)]
    chosen = [cands[0], cands[3]]  # MELON by its motivation, ShieldAgent by what it does
    q = "How do MELON and ShieldAgent differ in protecting agents?"
    out, r = compared_paper_does_what(q, chosen, cands, lambda c: abstracts[c.hit])
    assert r.fired and r.data["added"] == [2], r
    assert [c.id for c in out] == [1, 2, 4]
    # Not a comparison, or one paper only: the evidence stands.
    assert not compared_paper_does_what("What does MELON mask?", chosen, cands,
                                        lambda c: abstracts[c.hit])[1].fired
    assert not compared_paper_does_what(q, chosen[:1], cands, lambda c: abstracts[c.hit])[1].fired
    # Each paper already quoted by what it does: nothing added.
    assert not compared_paper_does_what(q, [cands[1], cands[3]], cands, lambda c: abstracts[c.hit])[1].fired


def test_a_comparison_quotes_what_each_paper_does_not_only_its_motivation(fake_engine):
    # The model chooses MELON's opening sentence (the problem it addresses):
    # the answer's evidence gains the MELON sentence that says what it does.
    from rag.answer.evidence import Candidate
    from rag.answer.paper_relevance import does_what

    def choose(sents):
        melon = [i for i, t in sents.items() if "indirect prompt injection" in t.lower()]
        return melon[:1] + [i for i, t in sents.items() if "ShieldAgent" in t][:2]

    eng = fake_engine(llm=ScriptedLLM(choose, lambda s: "They differ in what they check [1]."),
                      evidence_floor=0.0)
    ids = by_name(eng)
    melon = next(p for p in eng.papers() if p.paper_id == ids["MELON"])
    a = eng.ask("How do ShieldAgent and MELON differ in protecting LLM agents?")
    assert not a.declined, a.text
    assert "compared_paper_does_what" in rules_fired(a), a.rules
    quotes = next(c.quotes for c in a.citations if c.paper.paper_id == ids["MELON"])
    sents = split_sentences(melon.abstract)
    assert any(does_what(Candidate(0, 0, q, 0.0, sents.index(q)), melon.abstract) for q in quotes), quotes


def test_a_value_sentence_found_for_a_comparison_keeps_the_other_papers_evidence():
    # "…and what improvement does each report?": the chosen sentences state no
    # value; a candidate of one paper does and replaces that paper's evidence,
    # while the other compared paper keeps its own (it replaced all of it).
    from rag.answer.evidence import Candidate
    from rag.answer.rules import value_not_stated

    cands = [Candidate(1, 0, "Packrat picks the number of instances and threads.", 0.6, 0),
             Candidate(2, 0, "Packrat improves inference latency by 1.43x to 1.83x.", 0.5, 1),
             Candidate(3, 1, "SpecPrefill speculates which prompt tokens matter.", 0.6, 0)]
    q = "Contrast Packrat and SpecPrefill: what latency improvement does each report?"
    out, r = value_not_stated(q, [cands[0], cands[2]], cands)
    assert not r.fired and [c.id for c in out] == [2, 3], r
    # A question about one paper: the value sentence alone, as before.
    out, r = value_not_stated("What latency improvement does Packrat report?", [cands[0]], cands)
    assert [c.id for c in out] == [2], r


def test_a_sentence_saying_of_one_paper_what_another_states_is_withdrawn(fake_engine):
    # The synthesis names MELON but restates a ShieldAgent sentence (cited to
    # MELON): withdrawn, visibly, by rule claim_of_another_paper.
    def choose(sents):
        return [i for i, t in sents.items() if "MELON" in t or "ShieldAgent" in t][:6]

    def write(sents):
        shield = next(t for t in sents.values() if "ShieldAgent" in t and "MELON" not in t
                      and len(t.split()) > 8)
        stolen = strip_markers(shield)[0].replace("ShieldAgent", "MELON").rstrip(".")
        return (f"MELON is an indirect prompt injection defense {ids_of('MELON', sents)}. "
                f"{stolen} {ids_of('MELON', sents)}.")

    eng = fake_engine(llm=ScriptedLLM(choose, write), evidence_floor=0.0)
    a = eng.ask("How do ShieldAgent and MELON differ?")
    assert not a.declined, a.text
    fired = [r for r in a.rules if r.name == "claim_of_another_paper" and r.fired]
    assert fired and fired[0].data["named"] == "MELON" and fired[0].data["other"] == "ShieldAgent"
    gone = [s for s in a.sentences if s.withdrawn]
    assert len(gone) == 1 and "MELON" in gone[0].text and "ShieldAgent" in gone[0].withdrawn_reason
    # The sentence about MELON itself stands.
    assert any(not s.withdrawn and s.text.startswith("MELON is an indirect") for s in a.sentences), a.text


def test_rule_claim_of_another_paper_needs_a_clear_margin():
    from rag.answer.rules import claim_of_another_paper
    from rag.config import Settings

    s = Settings(_env_file=None)
    assert claim_of_another_paper("ReVISE", 0.18, "CoLA", 1.0, s).fired
    # Both papers state it about as well, or the other paper holds too little of it.
    assert not claim_of_another_paper("MELON", 0.6, "ShieldAgent", 0.6, s).fired
    assert not claim_of_another_paper("MELON", 0.0, "ShieldAgent", 0.5, s).fired


def test_a_sentence_naming_a_second_paper_of_the_evidence_rests_on_both(fake_engine):
    # "X does A [x], while MELON does B [x]": the model marked only X's sentence,
    # but the claim about MELON is in MELON's chosen sentence (tune q889: the
    # sentence was withdrawn as "not in its evidence: NS-DPO" and the answer declined).
    def choose(sents):
        shield = [i for i, t in sents.items() if "ShieldAgent" in t][:2]
        return shield + [i for i, t in sents.items() if "AgentDojo" in t][:1]

    def write(sents):
        return ("ShieldAgent shields agents with verifiable safety policy reasoning "
                f"{ids_of('ShieldAgent', sents)}, while MELON outperforms SOTA defenses on "
                f"the IPI benchmark AgentDojo {ids_of('ShieldAgent', sents)}.")

    eng = fake_engine(llm=ScriptedLLM(choose, write), evidence_floor=0.0)
    a = eng.ask("How do ShieldAgent and MELON differ?")
    assert not a.declined, a.text
    (s,) = [s for s in a.sentences if "AgentDojo" in s.text]
    assert not s.withdrawn, s.withdrawn_reason
    melon = next(c.number for c in a.citations if c.paper.name == "MELON")
    assert melon in s.citations, (s.citations, [(c.number, c.paper.name) for c in a.citations])


def test_a_sentence_naming_a_paper_by_its_method_name_rests_on_its_evidence(fake_engine):
    # NS-DPO's paper is called "Right Now, Wrong Then" (its title before the
    # colon); the synthesis names it by its method, NS-DPO (tune q889).
    def choose(sents):
        shield = [i for i, t in sents.items() if "ShieldAgent" in t][:2]
        return shield + [i for i, t in sents.items() if "NS-DPO" in t][:1]

    def write(sents):
        ns = strip_markers(next(t for t in sents.values() if "NS-DPO" in t))[0].rstrip(".")
        return ("ShieldAgent shields agents with verifiable safety policy reasoning "
                f"{ids_of('ShieldAgent', sents)}, while {ns} {ids_of('ShieldAgent', sents)}.")

    eng = fake_engine(llm=ScriptedLLM(choose, write), evidence_floor=0.0)
    a = eng.ask("How do ShieldAgent and NS-DPO differ?")
    assert not a.declined, a.text
    s = next(s for s in a.sentences if s.text.startswith("ShieldAgent shields"))
    assert not s.withdrawn, s.withdrawn_reason
    ns = next(c.number for c in a.citations if c.paper.title.startswith("Right Now, Wrong Then"))
    assert ns in s.citations


def test_a_quote_spanning_two_synthesis_sentences_keeps_its_markers_outside():
    from rag.answer.verify import _balance_quotes

    # tune q888: “We propose DRAGO … dynamics. [2] Empirical … scenarios.” [2]
    assert _balance_quotes("DRAGO: “We propose DRAGO.") == "DRAGO: “We propose DRAGO.”"
    assert _balance_quotes("It works well.”") == "“It works well.”"
    assert _balance_quotes("MELON says “it masks” calls.") == "MELON says “it masks” calls."
