"""Citation validation, sentence attribution and the decline paths, with a
fake LLM (fast) over the bundled corpus indexed with fake embeddings."""

from __future__ import annotations

from rag.attribution import split_sentences, strip_markers
from rag.llm import FakeLLM

SHIELD_Q = "What does ShieldAgent achieve on ShieldAgent-Bench?"


def _shield_hit_number(eng, question=SHIELD_Q) -> int:
    hits = eng.search(question, k=5)
    return next(i for i, h in enumerate(hits, 1) if h.paper.title == "ShieldAgent")


def test_split_and_strip_markers():
    s = split_sentences("ShieldAgent is a guardrail [1]. It improves recall by 11.3% [1, 2].")
    assert len(s) == 2
    text, nums = strip_markers(s[1])
    assert nums == [1, 2] and text == "It improves recall by 11.3%."


def test_supported_answer_is_cited_and_renumbered(fake_engine):
    eng = fake_engine()
    n = _shield_hit_number(eng)
    # The model cites a real hit with the wrong number and one that points nowhere.
    reply = (
        f"ShieldAgent outperforms prior methods by 11.3% on average with a recall of 90.1% [{n}][42]."
    )
    eng._llm = FakeLLM(reply)
    a = eng.ask(SHIELD_Q)
    assert not a.declined, a.decline_reason
    assert [c.number for c in a.citations] == [1]
    assert a.citations[0].paper.title == "ShieldAgent"
    assert "[42]" not in a.text and a.text.endswith("[1]")
    s = a.sentences[0]
    assert s.supported and s.support >= 0.45 and "11.3%" in s.evidence


def test_marker_on_wrong_paper_is_reattributed(fake_engine):
    eng = fake_engine()
    n = _shield_hit_number(eng)
    wrong = 1 if n != 1 else 2
    eng._llm = FakeLLM(
        f"ShieldAgent outperforms prior methods by 11.3% on average with a high recall of 90.1% [{wrong}]."
    )
    a = eng.ask(SHIELD_Q)
    assert not a.declined
    assert a.citations[0].paper.title == "ShieldAgent"


def test_hallucinated_number_is_declined(fake_engine):
    eng = fake_engine()
    eng._llm = FakeLLM("ShieldAgent uses a privacy budget of epsilon 3.7 and 512 GPUs [1].")
    a = eng.ask("What privacy budget does ShieldAgent use?")
    assert a.declined
    assert a.sentences and not a.sentences[0].supported
    assert "nearest papers" in a.text and "ShieldAgent" in a.text


def test_model_not_found_reply_is_declined(fake_engine):
    eng = fake_engine()
    eng._llm = FakeLLM("NOT FOUND")
    a = eng.ask("What learning rate does ShieldAgent use?")
    assert a.declined and a.citations == []
    assert a.retrieved and a.nearest


def test_partial_support_flags_the_unsupported_sentence(fake_engine):
    eng = fake_engine()
    eng._llm = FakeLLM(
        "ShieldAgent outperforms prior methods by 11.3% on average with a high recall of 90.1% [1]. "
        "ShieldAgent-Bench contains 3K safety-related pairs of agent instructions [1]. "
        "It was trained on 4096 TPUs by Google DeepMind [1]."
    )
    a = eng.ask(SHIELD_Q)
    assert not a.declined
    flags = [s.supported for s in a.sentences]
    assert flags == [True, True, False]
    assert "(unsupported)" in a.text


def test_relevance_floor_declines_without_calling_llm(fake_engine):
    llm = FakeLLM("should not be called")
    eng = fake_engine(llm=llm, relevance_floor=0.99)
    a = eng.ask("zebra migration patterns in the Serengeti")
    assert a.declined and llm.calls == []


def test_follow_up_is_condensed_with_history(fake_engine):
    seen = []

    def reply(messages):
        seen.append(messages[-1]["content"])
        if "Rewritten question" in messages[-1]["content"]:
            return "What benchmark does ShieldAgent introduce?"
        return "NOT FOUND"

    eng = fake_engine(llm=FakeLLM(fn=reply))
    history = [
        {"role": "user", "content": "What is ShieldAgent?"},
        {"role": "assistant", "content": "A guardrail agent for LLM agents [1]."},
    ]
    a = eng.ask("What benchmark does it introduce?", history=history)
    assert a.standalone_question == "What benchmark does ShieldAgent introduce?"
    assert "ShieldAgent" in seen[0]  # the history reached the condense prompt
    assert any(h.paper.title == "ShieldAgent" for h in a.retrieved)


def test_stream_yields_tokens_then_answer(fake_engine):
    eng = fake_engine(llm=FakeLLM("ShieldAgent achieves a high recall of 90.1% [1]."))
    kinds = [ev.kind for ev in eng.ask_stream(SHIELD_Q)]
    assert "token" in kinds and kinds[-1] == "answer"
    assert kinds.index("token") < kinds.index("answer")


def test_bare_marker_answer_names_and_quotes_the_top_paper(fake_engine):
    eng = fake_engine(llm=FakeLLM("[3]"))
    a = eng.ask("Which paper proposes a guardrail agent for safety policy compliance of agents?")
    assert not a.declined
    top = a.retrieved[0].paper
    assert a.citations[0].paper.paper_id == top.paper_id
    quote = a.sentences[0].text.split(": ", 1)[1]
    assert a.sentences[0].text.startswith(top.title) and quote in top.abstract


def test_marker_used_as_noun_becomes_the_title(fake_engine):
    from rag.checks import name_markers

    eng = fake_engine()
    hits = eng.search("guardrail agent safety policy", k=3)
    out = name_markers("According to [1], rules come from policy documents.", hits)
    assert out.startswith(f"According to {hits[0].paper.title} [1],")
    assert name_markers("MELON [1] uses masks.", hits) == "MELON [1] uses masks."


def test_restating_the_question_is_declined(fake_engine):
    eng = fake_engine(llm=FakeLLM("The base LLM is fine-tuned with ReVISE in the experiments. [1]"))
    a = eng.ask("Which base LLM is fine-tuned with ReVISE in the experiments?")
    assert a.declined and "restates" in a.decline_reason


def test_quantity_question_needs_a_stated_value(fake_engine):
    eng = fake_engine(llm=FakeLLM(  # supported, verbatim, but states no count
        "ShieldAgent first constructs a safety policy model by extracting verifiable rules from "
        "policy documents and structuring them into a set of action-based probabilistic rule "
        "circuits [1]."))
    a = eng.ask("How many verifiable rules does ShieldAgent extract from policy documents?")
    assert a.declined and "value" in a.decline_reason
    eng._llm = FakeLLM("ShieldAgent outperforms prior methods by 11.3% on average [1].")
    b = eng.ask("How much does ShieldAgent outperform prior methods on average?")
    assert not b.declined and "11.3%" in b.text


def test_unknown_technical_name_is_declined_before_the_llm(fake_engine):
    llm = FakeLLM("should not be called")
    eng = fake_engine(llm=llm)
    a = eng.ask("What pass@1 on HumanEval does the collection's code model reach?")
    assert a.declined and "HumanEval" in a.decline_reason and llm.calls == []
