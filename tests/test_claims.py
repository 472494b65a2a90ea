"""The one claim scorer (rag.claims) that the answer's synthesis check and
Compare's attribution share."""

from __future__ import annotations

from rag import claims
from rag.text import split_sentences


def test_compare_and_the_answer_check_score_a_claim_alike(fake_engine):
    eng = fake_engine()
    hits = eng.search("defense against indirect prompt injection for LLM agents", k=3)
    paper = hits[0].paper
    sents = split_sentences(paper.abstract)
    claim = sents[1]  # a claim that repeats the abstract scores high in both
    made_up = "It reaches 97.3% accuracy on the HoloBench-9 suite."
    for text in (claim, made_up):
        compare = eng.attributor.attribute(f"{text} [1]", hits)[0].sentence
        answer = eng.answerer.checker._support(text, sents, paper.title)
        assert compare.support == answer == claims.support(eng.answerer.embedder, text, sents, paper.title)
    assert eng.attributor.attribute(f"{claim} [1]", hits)[0].sentence.supported
    # A number and a name no cited abstract holds: unsupported whatever the score.
    assert not eng.attributor.attribute(f"{made_up} [1]", hits)[0].sentence.supported
    assert claims.unstated_specifics(made_up, sents) == ["97.3%", "HoloBench-9"]


def test_support_parts():
    assert claims.lexical_support("MELON masks the user prompt", "We mask the user prompt.", "MELON") == 1.0
    assert claims.lexical_support("MELON", "anything", "MELON") == 1.0  # naming a paper claims nothing
    assert claims.combine(0.5, -0.2) == 0.25  # a negative cosine counts as 0
    # A value stated another way counts as stated.
    assert claims.unstated_specifics("It holds 3K pairs.", ["a dataset with 3,000 pairs"]) == []


def test_a_name_the_abstract_typesets_in_latex_is_stated() -> None:
    # An answer writes "W2-convergence" where the abstract typesets the name in
    # LaTeX (tune q077: its only synthesis sentence was withdrawn for it); a
    # name the evidence does not hold in any form still counts as unstated.
    ev = [r"We present a framework for analyzing $\mathcal{W}_2$-convergence in SGMs."]
    assert claims.unstated_specifics("It bounds W2-convergence under weak assumptions.", ev) == []
    assert claims.unstated_specifics("It bounds W3-convergence under weak assumptions.", ev) == [
        "W3-convergence"]
    assert claims.unstated_specifics("It reaches 44% on GSM8K.", [r"It reaches 44\% on MATH."]) == [
        "GSM8K"]
