"""``aqa eval replay``: the evidence check re-scored on a run's recorded choices,
through the engine's own answer path, without the choice or the synthesis."""

from __future__ import annotations

import json

import pytest

from eval.dataset import Question
from eval.replay import NotReplayed, auc, recorded, replay, report
from tests.test_answer import SHIELD_Q, ScriptedLLM, pick


def _record(qid: str, answer) -> dict:
    return {"id": qid, "answer": answer.to_dict()}


def test_recorded_reads_the_choice_and_the_check_from_the_trace():
    rows = [
        {"id": "a", "answer": {"rules": [
            {"name": "no_evidence", "fired": False, "detail": "model chose [2, 5]"},
            {"name": "evidence_not_answering", "fired": False,
             "detail": "P(not answered) 0.41 vs threshold 0.50"}]}},
        {"id": "b", "answer": {"rules": [
            {"name": "off_topic", "fired": True, "detail": "best passage cosine 0.1 vs floor 0.25"}]}},
        {"id": "c", "answer": {"rules": [
            {"name": "no_evidence", "fired": True, "detail": "model chose []"}]}},
    ]
    assert recorded(rows) == {"a": {"ids": [2, 5], "p": 0.41}, "c": {"ids": [], "p": None}}


def test_auc_ranks_unanswerable_above_answerable():
    rows = [{"answerable": False, "p": 0.9}, {"answerable": True, "p": 0.2},
            {"answerable": True, "p": 0.95}, {"answerable": True, "p": None}]
    assert auc(rows, "p") == 0.5
    assert auc([r for r in rows if r["p"] != 0.95], "p") == 1.0
    assert auc([{"answerable": True, "p": 0.3}], "p") is None


class GradedOnly:
    """A model that only grades: any generated text would fail the test."""

    name = "graded"

    def __init__(self, p_no: dict[str, float]) -> None:
        self.p_no, self.asked = p_no, []

    def stream_chat(self, *a, **kw):
        raise AssertionError("a replay generated text")

    def option_probabilities(self, messages, prefix, options):
        system = messages[0]["content"]
        self.asked.append(system)
        p = self.p_no[system]
        return {"yes": 1 - p, "no": p}


def test_replay_rescores_the_check_on_the_recorded_evidence(fake_engine):
    run = fake_engine(llm=ScriptedLLM(pick("11.3%"), "ShieldAgent outperforms prior methods by 11.3% [1]."))
    first = run.ask(SHIELD_Q)
    assert not first.declined
    choices = recorded([_record("q1", first)])
    assert choices["q1"]["ids"]

    from rag.prompts import render

    graded = GradedOnly({render("check_system"): 0.99, "strict": 0.2})
    eng = fake_engine(llm=graded)
    q = Question(id="q1", question=SHIELD_Q, type="fact")
    rows = replay(eng, [q, Question(id="q2", question="unrecorded", type="fact")], choices,
                  {"strict": ("strict", "{quotes}\n\nQuestion: {question}\nAnswered?")})
    assert len(rows) == 1  # q2 has no recorded choice
    row = rows[0]
    # The engine's own check (P(no) 0.99) now makes the decision decline; the variant is scored too.
    assert row["outcome"] == "declined: decision"
    assert row["p_engine"] == pytest.approx(0.99) and row["strict"] == pytest.approx(0.2)
    assert row["p_recorded"] == 0.0  # the scripted run's check replied "yes"
    assert graded.asked.count("strict") == 1
    assert "1 reached the check" in report(rows, ["strict"])
    # The replay swapped the engine's steps (public Answerer.steps), nothing private:
    # the choice is the recorded one, and no synthesis can be written.
    steps = eng.answerer.steps
    replayed = steps.choose([], {"properties": {"ids": {"items": {"enum": [1]}}}})
    assert json.loads(replayed) == {"ids": choices["q1"]["ids"]}
    with pytest.raises(NotReplayed):
        list(steps.write([], 5, 0.0))


class ChoosesAndGrades(ScriptedLLM):
    """Chooses like ScriptedLLM and grades the check; writes no synthesis."""

    def __init__(self, choose, p_no: float) -> None:
        super().__init__(choose)
        self.p_no = p_no

    def option_probabilities(self, messages, prefix, options):
        return {"yes": 1 - self.p_no, "no": self.p_no}


def test_live_replay_lets_the_model_choose_and_records_its_choice(fake_engine):
    eng = fake_engine(llm=ChoosesAndGrades(pick("11.3%"), p_no=0.2))
    q = Question(id="q1", question=SHIELD_Q, type="fact")
    rows = replay(eng, [q], None, {"strict": ("strict", "{quotes}\n\nQuestion: {question}\nAnswered?")})
    (row,) = rows
    assert row["outcome"] == "answered" and row["ids"]  # the model's own choice, kept
    assert row["p_engine"] == pytest.approx(0.2) and row["strict"] == pytest.approx(0.2)
    # A model that chooses nothing: the closest sentence is still checked, and
    # the decision (chose_nothing) declines.
    eng = fake_engine(llm=ChoosesAndGrades(lambda sents: [], p_no=0.2))
    (row,) = replay(eng, [q], None, {})
    assert row["outcome"] == "declined: decision" and row["ids"] == [] and "p_engine" in row
