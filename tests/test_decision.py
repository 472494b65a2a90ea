"""The calibrated answer decision (rag/answer/decision.py) and its fit (eval/decision_fit.py)."""

from __future__ import annotations

import json
import random

import pytest

from eval.decision_fit import fit_rows, stratum_weights
from rag.answer.decision import DECISION_FILE, DecisionModel, Signals, auc, curve, logit
from rag.errors import AqaError


def _model(**coef: float) -> DecisionModel:
    names = Signals.names()
    return DecisionModel({n: coef.get(n, 0.0) for n in names}, 0.0,
                         {n: 0.0 for n in names}, {n: 1.0 for n in names}, "test")


def test_every_signal_is_documented_and_in_the_bundled_model() -> None:
    data = json.loads(DECISION_FILE.read_text(encoding="utf-8"))
    assert set(data["coef"]) == set(Signals.names())
    src = open(Signals.__module__.replace(".", "/") + ".py", encoding="utf-8").read()
    for n in Signals.names():  # each field carries its comment (its documentation)
        line = next(ln for ln in src.splitlines() if ln.strip().startswith(f"{n}: float"))
        assert "#" in line, n


def test_outcomes_follow_the_two_cutoffs() -> None:
    m = _model(check_logit=-1.0)
    assert m.decide(Signals(check_logit=-3.0), 0.5, 0.2).outcome == "answer"  # p = 0.95
    assert m.decide(Signals(check_logit=1.0), 0.5, 0.2).outcome == "not_confirmed"  # p = 0.27
    assert m.decide(Signals(check_logit=3.0), 0.5, 0.2).outcome == "decline"  # p = 0.05


def test_contributions_sum_to_the_logit_and_name_the_strongest_signal() -> None:
    m = _model(check_logit=-1.0, unknown_name=-2.0, top_cosine=4.0)
    s = Signals(check_logit=0.5, unknown_name=1.0, top_cosine=0.6)
    d = m.decide(s, 0.5, 0.2)
    z = sum(d.contributions.values())
    assert d.p_answer == pytest.approx(1 / (1 + 2.718281828 ** -z), abs=1e-3)
    assert d.strongest(1)[0][0] == "top_cosine"
    assert d.signals["unknown_name"] == 1.0


def test_logit_is_clipped() -> None:
    assert logit(1.0) == pytest.approx(6.0)
    assert logit(0.0) == pytest.approx(-6.0)
    assert logit(0.5) == pytest.approx(0.0)


def _rows(n: int, seed: int = 1) -> list[dict]:
    """Synthetic rows where the check and coverage carry the label, noisily."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        y = i % 3 != 0
        sig = Signals(check_logit=rng.gauss(-1.0 if y else 1.0, 1.0),
                      coverage=rng.gauss(0.6 if y else 0.3, 0.15),
                      top_cosine=rng.gauss(0.5, 0.1))
        rows.append({"id": f"q{i:03d}", "split": "tune", "answerable": y, "signals": sig.to_dict()})
    return rows


def test_fit_learns_the_informative_signals_and_reports_its_curve() -> None:
    data = fit_rows(_rows(150))
    assert data["coef"]["check_logit"] < 0 < data["coef"]["coverage"]
    assert abs(data["coef"]["top_cosine"]) < abs(data["coef"]["check_logit"])
    assert data["oof_auc"] > 0.8
    assert 0.0 <= data["suggested_answer_at"] <= 1.0
    m = DecisionModel(data["coef"], data["intercept"], data["mean"], data["scale"])
    good = Signals(check_logit=-2.0, coverage=0.7, top_cosine=0.5)
    bad = Signals(check_logit=2.0, coverage=0.2, top_cosine=0.5)
    assert m.p_answer(good) > 0.8 > 0.2 > m.p_answer(bad)


def _confounded(n: int, seed: int = 2) -> list[dict]:
    """Rows where ``uncovered`` is higher on answerable questions (long answerable
    questions hold more uncovered terms), as it came out on tune."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        y = i % 3 != 0
        sig = Signals(check_logit=rng.gauss(-1.0 if y else 1.0, 1.0),
                      uncovered=float(min(3, max(0, round(rng.gauss(2.0 if y else 1.0, 0.8))))))
        rows.append({"id": f"q{i:03d}", "split": "tune", "answerable": y, "signals": sig.to_dict()})
    return rows


def test_signed_fit_holds_each_signal_to_its_direction() -> None:
    free = fit_rows(_confounded(300), signed=False)
    signed = fit_rows(_confounded(300))
    assert free["coef"]["uncovered"] > 0.1  # the confound, learned freely
    assert signed["coef"]["uncovered"] == pytest.approx(0.0, abs=1e-6)  # held at "may only lower"
    assert signed["coef"]["check_logit"] < 0 and signed["signs"]["uncovered"] == -1
    dropped = fit_rows(_confounded(300), drop=["uncovered"])
    assert "uncovered" not in dropped["coef"]


def test_unsigned_fit_matches_sklearn() -> None:
    # The hand-written solver has sklearn's objective: the same coefficients.
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    rows = _rows(150)
    data = fit_rows(rows, signed=False)
    names = data["signals"]
    x = np.array([[r["signals"][n] for n in names] for r in rows])
    z = (x - np.array([data["mean"][n] for n in names])) / np.array([data["scale"][n] for n in names])
    ref = LogisticRegression(C=data["C"], max_iter=5000).fit(z, [r["answerable"] for r in rows])
    assert [data["coef"][n] for n in names] == pytest.approx(list(ref.coef_[0]), abs=1e-3)
    assert data["intercept"] == pytest.approx(float(ref.intercept_[0]), abs=1e-3)


def test_a_sample_of_the_answerable_rows_counts_for_the_rows_it_stands_for() -> None:
    from types import SimpleNamespace

    rows = _rows(300)
    qs = [SimpleNamespace(id=r["id"], type="fact" if r["answerable"] else "unanswerable",
                          answerable=r["answerable"], split="tune") for r in rows]
    # Every unanswerable row, one answerable row in four.
    sample = [r for i, r in enumerate(rows) if not r["answerable"] or i % 4 == 1]
    w = stratum_weights(sample, qs)
    assert {round(x, 2) for x, r in zip(w, sample, strict=True) if not r["answerable"]} == {1.0}
    assert sum(x for x, r in zip(w, sample, strict=True) if r["answerable"]) == pytest.approx(200)
    full = fit_rows(rows, signed=False)
    weighted = fit_rows(sample, signed=False, questions=qs)
    plain = fit_rows(sample, signed=False)
    assert weighted["weighted"] and not plain["weighted"]
    # The sample's class balance would lower the intercept; its weights restore it.
    assert abs(weighted["intercept"] - full["intercept"]) < abs(plain["intercept"] - full["intercept"])


def test_fit_refuses_heldout_rows_and_one_class() -> None:
    rows = _rows(30)
    rows[0]["split"] = "heldout"
    with pytest.raises(AqaError, match="tune only"):
        fit_rows(rows)
    with pytest.raises(AqaError, match="both"):
        fit_rows([r for r in _rows(30) if r["answerable"]])


class _Grades:
    """A model that only grades: P(no) by the check's system prompt."""

    def __init__(self, p_no: dict[str, float]) -> None:
        self.p_no, self.asked = p_no, []

    def option_probabilities(self, messages, prefix, options):
        self.asked.append(messages)
        p = self.p_no[messages[0]["content"]]
        return {"yes": 1 - p, "no": p}


def test_rescore_replaces_the_check_signals_and_resumes(tmp_path) -> None:
    from eval.decision_fit import read_rows, rescore_rows
    from rag.prompts import render

    view = {"question": "Which recall?", "quotes": '[1] "A recall of 90.1%."'}
    rows = [{"id": "a", "answerable": True, "outcome": "answer", "p_answer": 0.9, "checked": view,
             "signals": Signals(pinned=1.0, check_logit=-2.0, check_pinned=-2.0, top_cosine=0.5).to_dict()},
            {"id": "b", "answerable": False, "checked": view, "signals": Signals().to_dict()},
            {"id": "c", "answerable": False, "checked": None, "signals": Signals().to_dict()}]
    model = _Grades({render("check_strict_system"): 0.8})
    out = tmp_path / "rescored.jsonl"
    kept, skipped = rescore_rows(model, rows[:1], "check_strict", out, progress=False)
    assert skipped == 0 and len(model.asked) == 1
    # The check's own prompt, filled with what the row's check read.
    assert view["quotes"] in model.asked[0][1]["content"]
    sig = kept[0]["signals"]
    assert sig["check_logit"] == pytest.approx(logit(0.8), abs=1e-4) == sig["check_pinned"]
    assert sig["check_overview"] == 0.0 and sig["top_cosine"] == 0.5  # the rest kept
    assert "outcome" not in kept[0] and kept[0]["rescored"] == {"prompt": "check_strict", "p_no": 0.8}
    # Resumed: "a" is not asked again; "c" has no view and is counted, not guessed.
    kept, skipped = rescore_rows(model, rows, "check_strict", out, progress=False)
    assert [r["id"] for r in kept] == ["a", "b"] and skipped == 1 and len(model.asked) == 2
    assert [r["id"] for r in read_rows([out])] == ["a", "b"]


def test_curve_and_auc() -> None:
    p, y = [0.9, 0.8, 0.3, 0.1], [1, 1, 0, 0]
    assert auc(p, y) == 1.0
    c = {pt["cutoff"]: pt for pt in curve(p, y, steps=11)}
    assert c[0.5]["answered_answerable"] == 1.0 and c[0.5]["declined_unanswerable"] == 1.0
    assert c[0.0]["declined_unanswerable"] == 0.0 and c[0.0]["precision"] == 0.5


def test_synthesis_may_not_take_names_or_terms_from_the_question() -> None:
    """A benchmark the question names but the evidence lacks is a fabrication
    when the synthesis pairs it with the paper; so is a question term echoed
    as the paper's claim (rules claim_not_in_evidence, question_term_unsupported)."""
    from rag.answer.rules import claim_not_in_evidence, question_term_unsupported
    from rag.text import stemmer

    ev = ["MELON masks the user prompt and compares tool calls on AgentDojo."]
    # "Does MELON evaluate on WebArena-Lite?": the name is no evidence however asked.
    assert claim_not_in_evidence("MELON is evaluated on WebArena-Lite [1].", ev).fired
    assert not claim_not_in_evidence("MELON is evaluated on AgentDojo [1].", ev).fired
    terms = stemmer().terms
    common = {"model", "diffus"}
    r = question_term_unsupported("The paper uses diffusion models for protein folding [1].",
                                  ["Masked diffusion models generate text."],
                                  "What about protein folding with diffusion models?",
                                  terms, lambda t: t not in common)
    assert r.fired and "protein" in r.data["terms"]
    assert not question_term_unsupported("Masked diffusion models generate text [1].",
                                         ["Masked diffusion models generate text."],
                                         "What do diffusion models generate?", terms,
                                         lambda t: True).fired



def test_the_questions_frame_verb_is_not_a_claim_term() -> None:
    """ "Which bottleneck does each target": a synthesis saying "Packrat
    targets …" echoes how the question asks, not a term the paper must state
    (rag.answer.reading.frame_verbs); a content term is still checked."""
    from rag.answer.reading import frame_verbs
    from rag.answer.rules import question_term_unsupported
    from rag.text import stemmer

    assert frame_verbs("Which inference bottleneck does each target, and what does each report?") \
        == {"target", "report"}
    assert frame_verbs("How do ShieldAgent and MELON differ in the way they protect LLM agents?") \
        == {"protect"}
    assert frame_verbs("What does each attack target, and how are attacks produced?") == {"target"}
    assert frame_verbs("How do MILS and LEMoN each relate to image captioning?") == {"relate"}
    # a word that may be a noun, with no object or clause end after it, is no frame verb
    assert frame_verbs("How does each target indirect prompt injection?") == set()
    assert frame_verbs("Both study convergence. How do their assumptions differ?") == set()
    assert frame_verbs("For each benchmark, what score is reported?") == set()
    q = "Which inference bottleneck does each target, and on which protein benchmark?"
    ev = ["Packrat speeds up the prefill stage of batched inference."]
    terms = stemmer().terms
    assert not question_term_unsupported("Packrat targets the prefill stage [1].", ev, q, terms,
                                         lambda t: True).fired
    r = question_term_unsupported("Packrat targets the prefill stage on a protein benchmark [1].",
                                  ev, q, terms, lambda t: True)
    assert r.fired and "protein" in r.data["terms"] and "target" not in r.data["terms"]

def test_broken_sentences_are_never_answers() -> None:
    from rag.answer.rules import broken_sentence

    assert broken_sentence("This is stated in and. [1]").fired
    assert broken_sentence("Additionally, ShieldAgent uses the [1]").fired
    assert not broken_sentence("MELON detects attacks by masking the user prompt [1].").fired
    assert not broken_sentence("It uses AgentDojo and ASB [2].").fired


def test_rescore_check_names_a_missing_prompt_in_one_line(tmp_path, capsys) -> None:
    from eval.cli import main

    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": "a", "answerable": true, "signals": {}}\n')
    rc = main(["eval", "rescore-check", str(rows), "--prompt", "no_such", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "--prompt no_such" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
