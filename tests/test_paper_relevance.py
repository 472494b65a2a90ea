"""Which retrieved papers an answer cites (rag.answer.paper_relevance), the question
reading it depends on, and compare's number attribution."""

from __future__ import annotations

import json

from rag.answer.decision import DecisionModel
from rag.answer.evidence import Candidate
from rag.answer.paper_relevance import (
    PaperModel,
    PaperSignals,
    contribution_sentence,
    paper_evidence,
    paper_signals,
    select_papers,
)
from rag.answer.reading import asks_for_papers
from rag.compare import misattributed, short_name
from rag.types import Paper, SearchHit


def _hit(pid: str, title: str, abstract: str, score: float, dense: float = 0.5) -> SearchHit:
    return SearchHit(paper=Paper(paper_id=pid, title=title, abstract=abstract), score=score,
                     rank=0, dense_score=dense)


HITS = [
    _hit("melon", "MELON: Provable Defense Against Indirect Prompt Injection Attacks",
         "LLM agents are vulnerable to indirect prompt injection. We propose MELON, a defense "
         "that re-executes the trajectory with a masked user prompt. MELON blocks 99% of attacks.",
         1.0, 0.7),
    _hit("clip", "A Closer Look at Backdoor Attacks on CLIP",
         "Backdoor attacks on CLIP are studied. We present a detection method for poisoned "
         "image encoders.", 0.8, 0.4),
    _hit("shield", "ShieldAgent: Shielding Agents via Verifiable Safety Policy Reasoning",
         "Existing guardrails fail for agents. We propose ShieldAgent, a guardrail agent that "
         "enforces safety policies on agent trajectories. ShieldAgent improves recall by 11.3%.",
         0.9, 0.6),
]


def _cands() -> list[Candidate]:
    out = []
    for h, hit in enumerate(HITS):
        from rag.text import split_sentences
        for i, t in enumerate(split_sentences(hit.paper.abstract)):
            out.append(Candidate(len(out) + 1, h, t, 0.6 - 0.1 * h - 0.01 * i, i))
    return out


def test_asks_for_papers_reads_plural_paper_questions():
    assert asks_for_papers("Which papers defend LLM agents against prompt injection?")
    assert asks_for_papers("Are there any studies on federated learning?")
    assert asks_for_papers("What recent works use Gaussian processes?")
    assert asks_for_papers("Which of these papers are position papers?")
    assert not asks_for_papers("What do these two papers have in common?")
    assert not asks_for_papers("Which paper studies decentralized SGD?")
    assert not asks_for_papers("Which paper proposes a guardrail agent?")
    assert not asks_for_papers("What does MELON find?")
    # An imperative asks for a set even with "the" (tune q462); a question about
    # "the papers" already in view does not.
    assert asks_for_papers("List the papers that discuss how peer review should be run.")
    assert asks_for_papers("Show me the papers on diffusion models")
    assert not asks_for_papers("What do the papers say about robustness?")
    assert not asks_for_papers("Summarize the papers.")


def _evidence(cands: list[Candidate]) -> dict[int, list[Candidate]]:
    return {h: paper_evidence(cands, HITS, h, 100 + h, lambda t: 0.3) for h in range(len(HITS))}


def test_a_paper_is_judged_by_the_sentence_that_says_what_it_does():
    assert contribution_sentence(HITS[2].paper.abstract)[1].startswith("We propose ShieldAgent")
    assert contribution_sentence("Attacks are common. They are hard to stop.") is None
    # the closest candidate is the motivation; the contribution joins as a new candidate
    cands = [c for c in _cands() if not c.text.startswith("We propose ShieldAgent")]
    ev = paper_evidence(cands, HITS, 2, 99, lambda t: 0.25)
    assert [c.text[:10] for c in ev] == ["Existing g", "We propose"]
    assert ev[1].id == 99 and ev[1].relevance == 0.25 and ev[1].position == 1


def test_paper_signals_reward_the_papers_that_hold_the_question_terms():
    terms = lambda t: {w.lower().strip(".,?") for w in t.split()}  # noqa: E731
    distinctive = lambda w: w in {"prompt", "injection", "agents", "defend"}  # noqa: E731

    def overlap(q: str, text: str) -> float:
        qt = terms(q)
        return len(qt & terms(text)) / len(qt)

    sig = paper_signals("Which papers defend agents against prompt injection?", HITS, _cands(), [4],
                        overlap=overlap, terms=terms, distinctive=distinctive)
    assert set(sig) == {0, 1, 2}
    assert sig[0].first == 1.0 and sig[1].first == 0.0
    assert sig[0].distinctive > sig[1].distinctive
    assert sig[0].coverage_ratio == 1.0 and sig[1].coverage_ratio < 1.0
    assert abs(sig[1].score_ratio - 0.8) < 1e-9
    assert [sig[i].chosen for i in range(3)] == [0.0, 1.0, 0.0]  # candidate 4 is the CLIP paper's


def test_select_papers_drops_a_paper_that_does_not_answer_and_adds_an_overlooked_one():
    cands = _cands()
    chosen = [cands[0], cands[3]]  # MELON's motivation and the CLIP paper: ShieldAgent overlooked
    probs = {0: 0.9, 1: 0.1, 2: 0.7}
    out, r = select_papers(chosen, _evidence(cands), HITS, probs, {}, cite_at=0.5, max_papers=4)
    assert {c.hit for c in out} == {0, 2}
    # each cited paper is quoted by the sentence that says what it does
    assert any(c.text.startswith("We propose MELON") for c in out)
    assert any(c.text.startswith("We propose ShieldAgent") for c in out)
    assert r.fired and r.name == "paper_relevance"
    status = {row["paper_id"]: row["status"] for row in r.data["papers"]}
    assert status == {"melon": "kept", "clip": "dropped", "shield": "added"}
    assert [c.id for c in out] == sorted(c.id for c in out)


def test_select_papers_keeps_the_most_probable_chosen_paper_and_caps_the_count():
    cands = _cands()
    chosen = [cands[3]]  # only a weak paper chosen: it stays (the decision said answered)
    out, r = select_papers(chosen, _evidence(cands), HITS, {0: 0.4, 1: 0.2, 2: 0.3}, {},
                           cite_at=0.5, max_papers=4)
    assert {c.hit for c in out} == {1}
    assert [row["status"] for row in r.data["papers"] if row["paper_id"] == "clip"] == ["kept"]
    out, _ = select_papers(chosen, _evidence(cands), HITS, {0: 0.9, 1: 0.2, 2: 0.8}, {},
                           cite_at=0.5, max_papers=2)
    assert {c.hit for c in out} == {1, 0}  # capped at two papers


def test_paper_model_loads_fitted_data_and_is_monotone_in_its_coefficients(tmp_path):
    names = PaperSignals.names()
    data = {"coef": {n: 0.0 for n in names} | {"coverage": 2.0}, "intercept": 0.0,
            "mean": {n: 0.0 for n in names}, "scale": {n: 1.0 for n in names}}
    f = tmp_path / "m.json"
    f.write_text(json.dumps(data))
    m = PaperModel.load(f)
    assert isinstance(m.model, DecisionModel)
    assert m.p(PaperSignals(coverage=0.9)) > m.p(PaperSignals(coverage=0.1))
    assert set(m.model.contributions(PaperSignals())) == set(names)


def test_bundled_paper_model_is_fitted_on_tune():
    m = PaperModel.load()
    assert m.model.meta.get("n", 0) >= 40 and m.model.meta.get("questions", 0) >= 10
    assert set(m.model.coef) == set(PaperSignals.names())


def test_compare_number_given_to_the_wrong_paper_is_withdrawn():
    papers = [HITS[2].paper, HITS[0].paper]
    names = [short_name(p) for p in papers]
    assert misattributed("MELON improves recall by 11.3%.", papers, names) is not None
    assert "ShieldAgent" in misattributed("MELON improves recall by 11.3%.", papers, names)
    assert misattributed("ShieldAgent improves recall by 11.3%.", papers, names) is None
    assert misattributed("MELON blocks 99% of attacks while ShieldAgent gains 11.3%.",
                         papers, names) is None
    assert misattributed("Both use two stages.", papers, names) is None


def test_rule_names_uncited_paper():
    from rag.answer.rules import names_uncited_paper

    r = names_uncited_paper("The fourth paper, Speak Easy, shows harmful responses [1].",
                            ["MELON (Provable Defense …)"], ["Speak Easy", "ShieldAgent"])
    assert r.fired and r.data["papers"] == ["Speak Easy"]
    assert not names_uncited_paper("MELON masks the user prompt [1].", ["MELON"], ["Speak Easy"]).fired
    # a name inside a longer word or hyphenated name is not that paper
    assert not names_uncited_paper("It beats MELON-2 [1].", ["X"], ["MELON"]).fired


def test_papers_evidence_numbers_new_candidates_once_each():
    from rag.answer.paper_relevance import papers_evidence

    # no contribution sentence offered: each paper gains one, numbered after the offered ids
    cands = [c for c in _cands() if not c.text.startswith("We ")]
    ev = papers_evidence(cands, HITS, [0, 1, 2], lambda t: 0.2)
    new = [c.id for v in ev.values() for c in v if c.id > max(x.id for x in cands)]
    assert len(new) == 3 and len(set(new)) == 3 and min(new) == max(x.id for x in cands) + 1


def test_asks_for_one_paper_reads_singular_paper_questions():
    from rag.answer.reading import asks_for_one_paper

    assert asks_for_one_paper("Which paper proposes a guardrail agent?")
    assert asks_for_one_paper("Which recent work recovers sharp images from event cameras?")
    assert asks_for_one_paper("Is there a paper that compresses files with language models?")
    assert asks_for_one_paper("What paper introduced FlexTok?")
    assert not asks_for_one_paper("Which papers defend LLM agents?")  # a set
    assert not asks_for_one_paper("What is this paper about?")
    assert not asks_for_one_paper("Which of the two papers uses more data?")  # known papers
    assert not asks_for_one_paper("Which paper is faster, MeCo or Blockwise?")
    assert not asks_for_one_paper("What does MELON find?")
