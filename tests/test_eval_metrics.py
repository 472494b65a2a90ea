"""Unit tests for eval.metrics on hand-made cases with known values."""

from __future__ import annotations

import math

import pytest

from eval import metrics as M
from eval.metrics import CitedPaper, GoldRef

G = [GoldRef("icml2025/000_a.txt", 3), GoldRef("icml2025/001_b.txt", 1)]


def P(path: str, ordinal: int) -> list[tuple[str, int]]:
    return [(path, ordinal)]


# --- gold matching ---


def test_path_matches_suffix_either_way():
    assert M.path_matches("icml2025/000_a.txt", "icml2025/000_a.txt")
    assert M.path_matches("data/icml2025/000_a.txt", "icml2025/000_a.txt")
    assert M.path_matches("000_a.txt", "icml2025/000_a.txt")
    assert M.path_matches("icml2025\\000_a.txt", "./icml2025/000_a.txt")
    # a suffix that is not at a "/" boundary is a different file
    assert not M.path_matches("x000_a.txt", "000_a.txt")
    assert not M.path_matches("icml2025/000_a.txt", "icml2025/001_b.txt")


def test_gold_index_needs_same_ordinal():
    assert M.gold_index(P("icml2025/000_a.txt", 3), G) == 0
    assert M.gold_index(P("icml2025/000_a.txt", 4), G) is None
    # a merged paper matches through any of its provenance entries
    assert M.gold_index([("other.jsonl", 7), ("001_b.txt", 1)], G) == 1


def test_relevance_vector_counts_each_gold_once():
    ranked = [P("x.txt", 1), P("icml2025/000_a.txt", 3), P("000_a.txt", 3), P("001_b.txt", 1)]
    assert M.relevance_vector(ranked, G) == [None, 0, None, 1]


# --- retrieval metrics ---


def test_hit_recall_mrr_at_k():
    rel = [None, 0, None, 1]
    assert M.hit_at_k(rel, 1) == 0.0
    assert M.hit_at_k(rel, 2) == 1.0
    assert M.recall_at_k(rel, 2, 2) == 0.5
    assert M.recall_at_k(rel, 2, 4) == 1.0
    assert M.recall_at_k(rel, 0, 4) is None
    assert M.reciprocal_rank(rel) == 0.5
    assert M.reciprocal_rank([None, None]) == 0.0
    assert M.first_gold_rank(rel) == 2
    assert M.first_gold_rank([]) is None


def test_ndcg_known_values():
    # gold at ranks 2 and 4, two gold papers:
    # DCG = 1/log2(3) + 1/log2(5); IDCG = 1 + 1/log2(3)
    rel = [None, 0, None, 1]
    expect = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    assert M.ndcg_at_k(rel, 2, 5) == pytest.approx(expect)
    assert M.ndcg_at_k([0, 1], 2, 5) == pytest.approx(1.0)
    # more gold than k: the ideal is k hits, so a perfect top-2 scores 1
    assert M.ndcg_at_k([0, 1], 5, 2) == pytest.approx(1.0)
    assert M.ndcg_at_k([None, None], 1, 2) == 0.0
    assert M.ndcg_at_k([0], 0, 2) is None


def test_retrieval_metrics_none_without_gold():
    m = M.retrieval_metrics([None], 0, ks=(1, 5))
    assert all(v is None for v in m.values())
    m = M.retrieval_metrics([None, 0], 1, ks=(1, 5))
    assert m["hit@1"] == 0.0 and m["hit@5"] == 1.0 and m["mrr"] == 0.5


# --- citations ---


def test_citation_precision_and_recall():
    cited = [
        CitedPaper(1, is_gold=True, gold_idx=0, supported=False),
        CitedPaper(2, is_gold=False, gold_idx=None, supported=True),
        CitedPaper(3, is_gold=False, gold_idx=None, supported=False),
        CitedPaper(4, is_gold=True, gold_idx=0, supported=True),  # same gold again
    ]
    assert M.citation_precision(cited) == 0.75
    assert M.citation_recall(cited, 2) == 0.5
    assert M.citation_precision([]) is None
    assert M.citation_recall([], 2) == 0.0
    assert M.citation_recall(cited, 0) is None


def test_cited_supported_reads_sentence_flags():
    sents = [
        {"citations": [1, 2], "supported": True, "paper_id": "p1"},
        {"citations": [3], "supported": False, "paper_id": "p3"},
        {"citations": [3, 4], "supported": True, "paper_id": "p3"},
    ]
    assert M.cited_supported(1, sents)
    assert M.cited_supported(2, sents)  # second marker of a supported sentence
    assert M.cited_supported(3, sents)  # supported in one of its sentences
    assert not M.cited_supported(5, sents)
    assert not M.cited_supported(3, sents[1:2])


# --- answer content ---


def test_must_include_alternatives_and_normalisation():
    text = "It improves by 11.3 % on average \u2013 with a recall of 90.1%."
    assert M.includes(text, "11.3%")
    assert M.includes(text, "RECALL")
    assert M.includes(text, "precision|90.1%")
    assert not M.includes(text, "precision|12%")
    assert M.includes("a\u2212b", "a-b")  # unicode minus vs hyphen
    assert M.must_include_recall(text, ["11.3%", "precision|recall", "42"]) == pytest.approx(2 / 3)
    assert M.must_include_recall(text, []) is None


def test_support_rate():
    assert M.support_rate([True, False, True, True]) == 0.75
    assert M.support_rate([]) is None


# --- aggregation ---


def test_mean_and_percentile_skip_none():
    assert M.mean([1.0, None, 0.0]) == 0.5
    assert M.mean([None]) is None
    assert M.percentile([1, 2, 3, 4], 50) == 2.5
    assert M.percentile([10, 20, 30, 40, 50], 95) == pytest.approx(48.0)
    assert M.percentile([7.0], 95) == 7.0
    assert M.percentile([], 50) is None


def test_bootstrap_ci_seeded_and_sane():
    vals = [0, 1] * 20
    a = M.bootstrap_ci(vals, seed=1)
    b = M.bootstrap_ci(vals, seed=1)
    assert a == b  # deterministic
    lo, hi = a
    assert 0.25 < lo < 0.5 < hi < 0.75
    assert M.bootstrap_ci([1.0, 1.0, 1.0]) == (1.0, 1.0)
    assert M.bootstrap_ci([None]) is None


def test_aggregate_by_type_and_latency():
    recs = [
        {"id": "a", "type": "fact", "metrics": {"hit@1": 1.0, "x": None},
         "timings": {"total_ms": 100.0}},
        {"id": "b", "type": "fact", "metrics": {"hit@1": 0.0, "x": None},
         "timings": {"total_ms": 300.0}},
        {"id": "c", "type": "unanswerable", "metrics": {"hit@1": None, "x": 1.0},
         "timings": {"total_ms": 200.0}},
    ]
    s = M.aggregate(recs, ["hit@1", "x"], n_boot=200)
    assert s["n_questions"] == 3
    assert s["n_by_type"] == {"fact": 2, "unanswerable": 1}
    assert s["overall"]["hit@1"]["mean"] == 0.5 and s["overall"]["hit@1"]["n"] == 2
    assert s["by_type"]["unanswerable"]["hit@1"]["mean"] is None
    assert s["by_type"]["unanswerable"]["x"]["mean"] == 1.0
    assert s["latency_ms"]["total_ms"]["p50"] == 200.0
    assert s["latency_ms"]["ttft_ms"]["n"] == 0


# --- one question end to end (plain dicts) ---


def _paper(pid: str, path: str, ordinal: int) -> dict:
    return {"paper_id": pid, "title": pid, "provenance": [{"path": path, "ordinal": ordinal,
                                                            "line": ordinal + 2}]}


def test_score_question_answerable():
    ranked = [_paper("x", "icml2025/009_z.txt", 1), _paper("a", "icml2025/000_a.txt", 3)]
    answer = {
        "answer": "ShieldAgent beats prior work by 11.3% [1]. It is fast [2].",
        "declined": False,
        "citations": [
            {"number": 1, "paper": _paper("a", "icml2025/000_a.txt", 3)},
            {"number": 2, "paper": _paper("x", "icml2025/009_z.txt", 1)},
        ],
        "sentences": [
            {"text": "s1", "citations": [1], "supported": True, "paper_id": "a"},
            {"text": "s2", "citations": [2], "supported": True, "paper_id": "x"},
            {"text": "s3", "citations": [], "supported": False, "paper_id": None},
        ],
    }
    out = M.score_question(qtype="fact", gold=G[:1], must_include=["11.3%", "90.1%"],
                           ranked_papers=ranked, answer=answer, k=5)
    m = out["metrics"]
    assert out["relevance"] == [None, 0]
    assert m["hit@1"] == 0.0 and m["hit@k"] == 1.0 and m["mrr"] == 0.5
    assert m["citation_precision"] == 0.5  # only gold papers count
    assert m["citation_supported_share"] == 1.0  # [2] is not gold but supports its sentence
    assert m["citation_recall"] == 1.0
    assert m["must_include_recall"] == 0.5
    assert m["support_rate"] == pytest.approx(2 / 3)
    assert m["wrong_decline"] == 0.0 and m["correct_decline"] is None
    assert m["pass"] == 0.0  # misses a must-include string


def test_score_question_unanswerable_and_retrieval_only():
    declined = {"answer": "Not in the collection.", "declined": True, "citations": [],
                "sentences": []}
    m = M.score_question(qtype="unanswerable", gold=[], must_include=[], ranked_papers=[],
                         answer=declined, k=5)["metrics"]
    assert m["correct_decline"] == 1.0 and m["wrong_decline"] is None
    assert m["hit@k"] is None and m["citation_precision"] is None
    assert m["pass"] == 1.0
    # a decline naming the nearest papers does not earn must-include credit
    named = {**declined, "answer": "Can't answer. The nearest papers are: ShieldAgent."}
    m = M.score_question(qtype="which", gold=G[:1], must_include=["ShieldAgent"],
                         ranked_papers=[], answer=named, k=5)["metrics"]
    assert m["must_include_recall"] == 0.0 and m["wrong_decline"] == 1.0 and m["pass"] == 0.0
    m = M.score_question(qtype="fact", gold=G, must_include=["x"],
                         ranked_papers=[_paper("b", "001_b.txt", 1)], answer=None, k=5)["metrics"]
    assert m["hit@1"] == 1.0 and m["recall@k"] == 0.5 and m["pass"] == 1.0
    assert "citation_precision" not in m


def test_answer_passes_rules():
    assert not M.answer_passes(True, True, {})
    assert not M.answer_passes(True, False, {"citation_recall": 0.0})
    assert M.answer_passes(True, False, {"citation_recall": 0.5, "must_include_recall": 1.0})
    assert M.answer_passes(True, False, {"citation_recall": None, "must_include_recall": None})
    assert not M.answer_passes(False, False, {})


def test_eval_index_dir_is_per_embedding(tmp_path):
    """fp32 and int8 eval runs keep an index each (an index refuses the other's
    vectors); fp32 MiniLM keeps the names eval indexes had before int8."""
    from eval.runner import eval_data_dir
    from rag.config import BUNDLED_CORPUS

    assert eval_data_dir(tmp_path, [BUNDLED_CORPUS]) == tmp_path / "eval"
    assert eval_data_dir(tmp_path, [BUNDLED_CORPUS], "all-MiniLM-L6-v2+onnx-int8") == \
        tmp_path / "eval-int8"
    fp32 = eval_data_dir(tmp_path, [BUNDLED_CORPUS, tmp_path], "all-MiniLM-L6-v2")
    other = eval_data_dir(tmp_path, [BUNDLED_CORPUS, tmp_path], "wordllama-l2-supercat")
    assert other.name == fp32.name + "-wordllama-l2-supercat"


def _answer(sentences, evidence, titles, declined=False):
    return {
        "declined": declined,
        "sentences": [{"text": t, "citations": c, "withdrawn": w, "contentless": False}
                      for t, c, w in sentences],
        "evidence": [{"number": n, "text": t} for n, t in evidence],
        "citations": [{"number": n, "paper": {"title": t}} for n, t in titles.items()],
    }


def test_claimed_specifics_are_names_and_numbers_not_ordinary_words():
    got = M.claimed_specifics("ShieldAgent reaches 90.1% recall on AgentDojo and GPT-4 [1], "
                              "beating two baselines on WikiText-2 with 3 seeds.")
    assert got == {"ShieldAgent", "90.1%", "AgentDojo", "GPT-4", "WikiText-2"}


def test_fabrication_audit_flags_a_benchmark_the_cited_abstract_never_names():
    a = _answer(
        sentences=[("MELON detects attacks on AgentDojo with 11.3% overhead [1].", [1], False),
                   ("ShieldAgent improves recall by 90.1% [2].", [2], False),
                   ("It also runs on SWE-bench [2].", [2], True)],  # withdrawn: not shown
        evidence=[(1, "We evaluate MELON on the AgentDojo benchmark."),
                  (2, "ShieldAgent reaches 90.1\\% recall.")],
        titles={1: "MELON: Provable Defense", 2: "ShieldAgent: Shielding Agents"})
    fab = M.fabricated_sentences(a)
    assert [f["missing"] for f in fab] == [["11.3%"]]
    assert M.fabrication_rate(a) == pytest.approx(1 / 2)
    # A number stated by another cited paper is still absent from this sentence's evidence.
    b = _answer([("MELON reaches 90.1% recall [1].", [1], False)],
                [(1, "MELON masks re-execution."), (2, "ShieldAgent reaches 90.1% recall.")],
                {1: "MELON", 2: "ShieldAgent"})
    assert M.fabricated_sentences(b)[0]["missing"] == ["90.1%"]
    assert M.fabrication_rate({**a, "declined": True}) is None


def test_fabrication_audit_reads_a_latex_typeset_name_as_written():
    """An answer writes "W2-convergence" where the abstract typesets
    ``$\\mathcal{W}_2$-convergence``: stated, not fabricated; a name absent
    in every form still is."""
    ev = [(1, "We prove $\\mathcal{W}_2$-convergence under mild conditions.")]
    ok = _answer([("The paper proves W2-convergence [1].", [1], False)], ev, {1: "Diffusion"})
    assert M.fabricated_sentences(ok) == []
    bad = _answer([("The paper proves W3-convergence [1].", [1], False)], ev, {1: "Diffusion"})
    assert M.fabricated_sentences(bad)[0]["missing"] == ["W3-convergence"]


def test_fabrication_audit_reads_a_name_hyphenated_across_a_line_break():
    """tune q979: the abstract reads "confidence-aware weights (CoA- weights)";
    an answer writing "CoA-weights" states its name."""
    ev = [(1, "This uses confidence-aware weights (CoA- weights) per class.")]
    ok = _answer([("CoCoA-Mix adjusts CoA-weights per class [1].", [1], False)], ev, {1: "CoCoA-Mix"})
    assert M.fabricated_sentences(ok) == []
    bad = _answer([("CoCoA-Mix adjusts CoB-weights per class [1].", [1], False)], ev, {1: "CoCoA-Mix"})
    assert M.fabricated_sentences(bad)[0]["missing"] == ["CoB-weights"]
