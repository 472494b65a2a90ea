"""eval.choice_order: the sample, the report (faked rows) and one row (a scripted model)."""

import re

from eval.choice_order import report, sample


def test_sample_interleaves_types_and_is_seeded():
    qs = [{"id": f"w{i}", "type": "which"} for i in range(10)] + \
         [{"id": f"u{i}", "type": "unanswerable"} for i in range(10)]
    a = sample(qs, {"which": 4, "unanswerable": 2})
    assert a == sample(qs, {"which": 4, "unanswerable": 2})
    assert [q["type"] for q in a].count("which") == 4 and len(a) == 6
    assert {a[0]["type"], a[1]["type"]} == {"which", "unanswerable"}


def test_report_counts_gold_choices_and_flips():
    rows = [
        {"id": "q1", "gold_idx": [0], "rank": {"papers": [3]}, "last": {"papers": [0]}},
        {"id": "q2", "gold_idx": [0], "rank": {"papers": [0]}, "last": {"papers": [0, 2]}},
        {"id": "q3", "gold_idx": [], "rank": {"papers": [1]}, "last": {"papers": [2]}},
        {"id": "q4", "skip": "names a paper"},
    ]
    text = report(rows)
    assert "3 questions chosen in both orders; gold paper offered in 2" in text
    assert "rank: quotes a gold paper 1, only gold papers 1, papers quoted 2" in text
    assert "last: quotes a gold paper 2, only gold papers 1, papers quoted 3" in text
    assert "fixed 1 q1; broken 0" in text


def test_choose_both_asks_in_each_order_and_finds_the_same_papers(fake_engine):
    from eval.choice_order import choose_both
    from tests.test_answer import ScriptedLLM, pick

    llm = ScriptedLLM(pick("prompt injection"))
    eng = fake_engine(llm=llm)
    q = {"id": "q1", "type": "which", "question": "Which papers defend agents against prompt injection?",
         "gold": []}
    row = choose_both(eng, q)
    assert "skip" not in row, row
    chosen = [c for c in llm.calls if c["json_schema"] and "ids" in c["json_schema"]["properties"]]
    assert len(chosen) == 2  # one choice per order, no check or synthesis
    first, second = (c["messages"][1]["content"] for c in chosen)
    heads = [re.findall(r"^Paper: (.*)$", t, re.M) for t in (first, second)]
    assert len(heads[0]) > 1 and heads[1] == heads[0][::-1]
    # Chosen by content, so the same papers in both orders.
    assert row["rank"]["papers"] and row["rank"]["papers"] == row["last"]["papers"]
