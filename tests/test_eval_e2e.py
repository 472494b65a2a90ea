"""End to end: a small eval through the real engine (real MiniLM index from
the session fixture) with a fake LLM; checks the run folder, the numbers in
summary.json and report.md, the plots, ``eval compare`` and the CLI wiring."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from eval import metrics as M
from eval.dataset import load_questions
from eval.runner import RunConfig, load_run, run_eval
from rag.config import Settings
from rag.engine import Engine
from tests.fakes import FakeLLM

pytestmark = pytest.mark.slow  # real MiniLM

QUESTIONS = [
    {"id": "f1", "type": "fact",
     "question": "By how much does ShieldAgent outperform prior methods, and with what recall?",
     "gold": [{"path": "icml2025/000_df6f3840f2208585.txt", "ordinal": 1}],
     "must_include": ["11.3%", "90.1%"]},
    {"id": "f2", "type": "fact",
     "question": "What does ShieldAgent construct from policy documents?",
     "gold": [{"path": "icml2025/000_df6f3840f2208585.txt", "ordinal": 1}],
     "must_include": ["a phrase no answer contains"]},
    {"id": "t1", "type": "topic",
     "question": "Which papers build guardrails or safety policies for autonomous agents?",
     "gold": [{"path": "data/icml2025/000_df6f3840f2208585.txt", "ordinal": 1},
              {"path": "icml2025/no_such_file.txt", "ordinal": 1}],
     "must_include": []},
    {"id": "u1", "type": "unanswerable",
     "question": "What is the best hydration ratio for a sourdough bread loaf?",
     "gold": [], "must_include": []},
]


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def echo_best_sentence(messages: list[dict]) -> str:
    """Fake LLM for the evidence-first pipeline. Evidence choice (the first
    call, two messages): the sentence of the top-ranked paper sharing most
    words with the question, as ``{"ids": [n]}``; that paper is listed last,
    next to the question (``AQA_EVIDENCE_BEST_LAST``). Synthesis (the
    follow-up call): that sentence again, cited [n]."""
    prompt = messages[1]["content"]
    q = re.search(r"^Question: (.*)$", prompt, re.MULTILINE)
    blocks = re.split(r"^Paper: .*$", prompt, flags=re.MULTILINE)
    sents = {int(m.group(1)): m.group(2)
             for m in re.finditer(r"^\[(\d+)\] (.*)$", blocks[-1] if len(blocks) > 1 else "",
                                  re.MULTILINE)}
    if not q or not sents:
        return '{"ids": []}'
    qwords = _words(q.group(1))
    best = max(sents, key=lambda i: len(qwords & _words(sents[i])))
    if len(messages) == 2:
        return json.dumps({"ids": [best]})
    return sents[best].rstrip(".") + f" [{best}]."


@pytest.fixture
def qset(tmp_path: Path) -> Path:
    p = tmp_path / "set.jsonl"
    p.write_text("\n".join(json.dumps(q) for q in QUESTIONS) + "\n", encoding="utf-8")
    return p


@pytest.fixture
def index_copy(real_index_dir: Path, tmp_path: Path) -> Path:
    d = tmp_path / "base" / "eval-int8"  # where `aqa eval run --data-dir base` looks (int8 default)
    shutil.copytree(real_index_dir, d)
    return d


UNIT_DECISION = Path(__file__).resolve().parent / "decision_unit.json"


def run(index: Path, qset: Path, out: Path, llm: FakeLLM) -> tuple[dict, list[dict]]:
    # The hand-set unit decision: the fake's replies are no data the product's fit knows.
    eng = Engine(Settings(_env_file=None, data_dir=index, decision_file=UNIT_DECISION), llm=llm)
    cfg = RunConfig(set_path=qset, use_llm=True, label="e2e", n_boot=200)
    run_eval(eng, load_questions(qset), cfg, out, progress=lambda _m: None)
    return load_run(out)


def test_eval_run_report_and_compare(index_copy: Path, qset: Path, tmp_path: Path):
    llm = FakeLLM(fn=echo_best_sentence)
    out_a = tmp_path / "run_a"
    summary, recs = run(index_copy, qset, out_a, llm)

    # --- files ---
    for name in ("results.jsonl", "summary.json", "report.md", "metrics_by_type.png",
                 "latency.png"):
        assert (out_a / name).is_file(), name
    for png in ("metrics_by_type.png", "latency.png"):
        data = (out_a / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    assert [r["id"] for r in recs] == ["f1", "f2", "t1", "u1"]
    by_id = {r["id"]: r for r in recs}

    # --- per-question facts that follow from the corpus and the fake ---
    f1 = by_id["f1"]["metrics"]
    assert f1["hit@1"] == 1.0 and f1["mrr"] == 1.0 and f1["first_gold_rank"] == 1
    assert f1["must_include_recall"] == 1.0, by_id["f1"]["answer"]["answer"]
    assert f1["citation_recall"] == 1.0 and f1["citation_precision"] == 1.0
    assert f1["pass"] == 1.0
    assert by_id["f2"]["metrics"]["must_include_recall"] == 0.0
    assert by_id["f2"]["metrics"]["pass"] == 0.0
    # the gold path given with a longer prefix still matches; the missing file never does
    t1 = by_id["t1"]["metrics"]
    assert t1["recall@10"] == 0.5 and t1["citation_recall"] == 0.5 and t1["pass"] == 1.0
    u1 = by_id["u1"]["metrics"]
    assert u1["correct_decline"] == 1.0 and u1["hit@k"] is None and u1["pass"] == 1.0
    assert by_id["u1"]["answer"]["declined"]
    # Three calls (evidence choice, evidence check, synthesis) per answered
    # question; the unanswerable one gets the choice and the check (signals of
    # the decision, which declines it) and no synthesis; the "which papers"
    # question (t1) also checks each of its 4 candidate papers (paper_relevance)
    # and, citing one paper, is answered in code (rag.answer.listing): no synthesis.
    assert len(llm.calls) == 11 + 4 - 1

    # --- summary numbers are the means of the per-question numbers ---
    for name, v in summary["overall"].items():
        vals = [r["metrics"].get(name) for r in recs]
        assert v["mean"] == pytest.approx(M.mean(vals)) if M.mean(vals) is not None \
            else v["mean"] is None, name
    assert summary["overall"]["pass"]["mean"] == pytest.approx(0.75)
    assert summary["by_type"]["fact"]["must_include_recall"]["mean"] == pytest.approx(0.5)
    assert summary["n_by_type"] == {"fact": 2, "topic": 1, "unanswerable": 1}
    assert summary["failed_ids"] == ["f2"]
    assert summary["latency_ms"]["total_ms"]["n"] == 4
    assert summary["run"]["corpus"]["papers"] == 57

    # --- the report shows those numbers ---
    md = (out_a / "report.md").read_text()
    k = summary["k"]
    assert f"| hit@{k} | {summary['overall']['hit@k']['mean']:.3f} |" in md
    assert "| pass | 0.750 |" in md
    assert "| must_include_recall | 0.500 |" in md  # f1 1.0, f2 0.0; others have none
    assert "![metrics by type](metrics_by_type.png)" in md
    assert "## Failed questions (1)" in md and "### f2 (fact)" in md
    assert "| f1 | fact | ✅ |" in md and "| u1 | unanswerable | ✅ |" in md

    # --- rescore recomputes every metric from the stored records ---
    from eval.runner import rescore_run

    tampered = tmp_path / "tampered"
    shutil.copytree(out_a, tampered)
    lines = [json.loads(x) for x in (tampered / "results.jsonl").read_text().splitlines()]
    lines[0]["metrics"].update({"hit@1": 0.0, "pass": 0.0, "must_include_recall": 0.0})
    (tampered / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    again = rescore_run(tampered)
    assert again["overall"] == summary["overall"]
    assert load_run(tampered)[1][0]["metrics"] == recs[0]["metrics"]
    # A question whose file says "answerable": false (a follow-up or pinned
    # question the abstract cannot answer) stays unanswerable when rescored.
    lines[3].update(type="followup", answerable=False)
    (tampered / "results.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    rescore_run(tampered)
    u1_again = load_run(tampered)[1][3]["metrics"]
    assert u1_again["correct_decline"] == 1.0 and u1_again["wrong_decline"] is None

    # --- compare: a run whose LLM never chooses evidence breaks every answerable pass ---
    out_b = tmp_path / "run_b"
    run(index_copy, qset, out_b, FakeLLM(reply='{"ids": []}'))
    from eval.compare import compare_runs, render_comparison

    c = compare_runs(out_a, out_b)
    assert [i["id"] for i in c["flips"]["broken"]] == ["f1", "t1"]
    assert c["flips"]["fixed"] == [] and c["flips"]["retrieval_broken"] == []
    assert c["overall"]["wrong_decline"]["delta"] == pytest.approx(1.0)
    text = render_comparison(c)
    assert "Broken (pass → fail): 2" in text and "`t1`" in text
    assert load_run(out_a)[0]["run"]["host"]["isa"] is not None
    assert "Different hosts" not in text  # both runs on this machine
    # A run made where the int8 kernels differ (VNNI) is flagged as such.
    sb_path = out_b / "summary.json"
    sb = json.loads(sb_path.read_text())
    sb["run"]["host"] = {**sb["run"]["host"], "isa": ["avx2", "avx512f", "avx512_vnni"]}
    sb_path.write_text(json.dumps(sb))
    assert "Different hosts" in render_comparison(compare_runs(out_a, out_b))

    # --- merge: run_a's questions, with f1 taken from a partial run (run_b's f1) ---
    from eval.runner import merge_runs

    partial = tmp_path / "partial"
    shutil.copytree(out_b, partial)
    b_recs = load_run(partial)[1]
    (partial / "results.jsonl").write_text(json.dumps(b_recs[0]) + "\n")
    merged = merge_runs(out_a, partial, tmp_path / "merged")
    m_recs = load_run(tmp_path / "merged")[1]
    assert [r["id"] for r in m_recs] == [r["id"] for r in recs]
    assert m_recs[0] == b_recs[0] and m_recs[1:] == load_run(out_a)[1][1:]
    assert merged["overall"]["pass"]["mean"] == pytest.approx(0.5)  # f1 now fails too
    assert merged["run"]["merged"]["replaced"] == 1 and merged["run"]["merged"]["of"] == 4


def test_cli_retrieval_only_run_and_compare(index_copy: Path, qset: Path, tmp_path: Path,
                                           capsys):
    from eval.cli import main

    base = index_copy.parent
    out = tmp_path / "cli_run"
    rc = main(["eval", "run", "--no-llm", "--set", str(qset), "--out", str(out),
               "--data-dir", str(base), "--retriever", "bm25"])
    assert rc == 0
    summary, recs = load_run(out)
    assert summary["use_llm"] is False and summary["run"]["settings"]["retriever"] == "bm25"
    assert "citation_precision" not in summary["overall"]
    assert all(r["answer"] is None for r in recs)
    assert summary["overall"]["hit@1"]["mean"] is not None
    printed = capsys.readouterr().out
    assert "hit@1" in printed and str(out / "report.md") in printed

    rc = main(["eval", "compare", str(out), str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "Fixed (fail → pass): 0" in text and "Broken (pass → fail): 0" in text


def test_bad_question_set_is_a_clean_error(tmp_path: Path, capsys):
    from eval.cli import main

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "question": "q?", "type": "fact", "gold": []}\n')
    assert main(["eval", "run", "--set", str(bad), "--data-dir", str(tmp_path)]) == 2
    assert "bad.jsonl:1" in capsys.readouterr().err


def test_ablation_table(tmp_path: Path, qset: Path):
    """Two configurations, each in its own data dir, tabulated with the command."""
    from eval.ablate import run_ablation
    from rag.config import BUNDLED_CORPUS
    from tests.conftest import FakeEmbedding

    out = tmp_path / "abl"
    res = run_ablation(
        load_questions(qset), set_path=qset, out_dir=out,
        base_overrides={"_env_file": None}, data_root=tmp_path / "data",
        corpus=[BUNDLED_CORPUS], configs=["bm25", "hybrid-no-floor"],
        embed_model=FakeEmbedding(),
    )
    assert (tmp_path / "data" / "ablate" / "bm25" / "catalog.sqlite").is_file()
    assert (tmp_path / "data" / "ablate" / "hybrid-no-floor" / "catalog.sqlite").is_file()
    saved = json.loads((out / "ablation.json").read_text())
    assert list(saved["configs"]) == ["bm25", "hybrid-no-floor"]
    assert saved["configs"]["bm25"]["overrides"] == {"retriever": "bm25"}
    for name in ("bm25", "hybrid-no-floor"):
        s, recs = load_run(out / name)
        assert s["run"]["settings"]["retriever"] == ("bm25" if name == "bm25" else "hybrid")
        assert saved["configs"][name]["overall"]["hit@1"] == s["overall"]["hit@1"]["mean"]
    # no floor: nothing is declined for distance, so the unanswerable one is not caught
    assert saved["configs"]["hybrid-no-floor"]["overall"]["floor_correct_decline"] == 0.0
    md = (out / "ablation.md").read_text()
    assert md == res["table"]
    assert "| bm25 | retriever=bm25 |" in md and "| hybrid-no-floor | relevance_floor=0.0 |" in md
