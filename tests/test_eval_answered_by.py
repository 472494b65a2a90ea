"""``answered_by``: an unanswerable question that a paper outside the bundled
set answers counts as answerable in runs whose index holds that paper."""

from __future__ import annotations

import pytest

from eval.dataset import DatasetError, parse_question
from eval.runner import as_indexed

BUNDLED = {"path": "icml2025/000_df6f3840f2208585.txt", "ordinal": 1}  # ShieldAgent
ELSEWHERE = {"path": "v267/_posts/2025-10-06-jiang25j.md", "ordinal": 1}


def _q(**kw):
    d = {"id": "u", "question": "Which paper watermarks LLM text?", "type": "unanswerable", **kw}
    return parse_question(d, "set.jsonl:1")


def test_answered_by_is_read_and_only_for_unanswerable_questions():
    q = _q(answered_by=[ELSEWHERE])
    assert [g.path for g in q.answered_by] == [ELSEWHERE["path"]]
    assert q.to_dict()["answered_by"] == [ELSEWHERE]
    with pytest.raises(DatasetError, match="set.jsonl:1: 'answered_by' is for unanswerable"):
        parse_question({"id": "f", "question": "?", "type": "fact", "gold": [BUNDLED],
                        "answered_by": [ELSEWHERE]}, "set.jsonl:1")
    with pytest.raises(DatasetError, match="needs 'path'"):
        _q(answered_by=[{"path": "x.md"}])


def test_a_run_holding_the_paper_scores_the_question_as_answerable(fake_engine):
    eng = fake_engine(llm=None)
    absent = _q(answered_by=[ELSEWHERE])  # the bundled index lacks the distractor
    assert as_indexed(eng, absent) is absent and not absent.answerable
    held = as_indexed(eng, _q(answered_by=[ELSEWHERE, BUNDLED]))
    assert held.answerable and [g.path for g in held.gold] == [BUNDLED["path"]]
    assert held.type == "unanswerable"  # still reported under its own type
