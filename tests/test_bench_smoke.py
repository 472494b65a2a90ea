"""Smoke run of every benchmark section at tiny size (real MiniLM, real
Chroma, the real LlamaIndex baseline; a fake LLM so the run is hermetic).
Checks the figures exist and are sane, never how fast they are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval import bench
from tests.fakes import FakeLLM

pytestmark = pytest.mark.slow


def test_synthetic_corpus_is_varied_and_stable(tmp_path: Path):
    a = bench.synth_abstracts(30, seed=1)
    assert a == bench.synth_abstracts(30, seed=1)  # deterministic
    assert len(set(a)) == 30 and all(len(x) > 200 for x in a)
    real = set(bench.bundled_abstracts())
    assert len(real) == 57 and not real & set(a)
    folder = bench.write_seed_corpus(tmp_path / "s", a, per_file=12)
    files = sorted(folder.glob("*.txt"))
    assert len(files) == 3
    mtimes = [f.stat().st_mtime_ns for f in files]
    bench.write_seed_corpus(tmp_path / "s", a, per_file=12)  # unchanged: not rewritten
    assert [f.stat().st_mtime_ns for f in files] == mtimes


def test_bench_all_tiny(tmp_path: Path, capsys):
    llm = FakeLLM(reply="ShieldAgent is a guardrail agent [1].", name="fake-llm")
    out = tmp_path / "out"
    res = bench.run_bench("all", size="tiny", out=out, data_root=tmp_path / "data",
                          base_overrides={"embed_provider": "minilm"}, llm=llm)
    saved = json.loads((out / "bench.json").read_text())
    assert saved["sections"] == ["ingest", "search", "llm", "baseline"]

    provs = saved["ingest"]["providers"]
    ing = provs["minilm"]
    assert ing["papers"] == 57 and ing["chunks"] >= 57
    assert ing["cold_chunks_per_s"] > 0 and ing["raw_chunks_per_s"] > 0
    # re-ingest ran in a fresh process, found everything unchanged, embedded nothing
    assert ing["reingest_unchanged"] == 57 and ing["reingest_chunks_embedded"] == 0
    assert ing["reingest_process_s"] >= ing["reingest_s"] > 0
    assert ing["ingest_vs_raw"] == pytest.approx(
        ing["cold_chunks_per_s"] / ing["raw_chunks_per_s"], rel=0.01)
    # every variant's speed is also a ratio to raw sentence-transformers, same run
    assert set(provs) == set(bench.VARIANTS)
    for r in provs.values():
        if "error" not in r:
            assert r["cold_vs_st_raw"] == pytest.approx(
                r["cold_chunks_per_s"] / ing["raw_chunks_per_s"], rel=0.01)
            assert r["reingest_unchanged"] == 57

    levels = {lv["level"]: lv for lv in saved["search"]["levels"]}
    assert levels["bundled"]["papers"] == 57
    assert levels["mid"]["papers"] == bench.SIZES["tiny"]["papers"]
    assert levels["big"]["chunks"] >= bench.SIZES["tiny"]["big_chunks"] - 4
    for lv in levels.values():
        assert 0 < lv["p50"] <= lv["p95"] and lv["index_mb"] > 0 and lv["peak_rss_mb"] > 0
    assert levels["big"]["index_mb"] > levels["bundled"]["index_mb"]

    llm_res = saved["llm"]
    assert llm_res["model"] == "fake-llm" and llm_res["runs"]
    assert llm.calls, "the LLM section must go through the engine's answer path"
    run = llm_res["runs"][0]
    # (a fake reply may end in a decline with no token events: timings only when streamed)
    assert run["total_s"] > 0 and (run["tokens"] == 0 or run["ttft_client_s"] is not None)
    assert llm_res["questions"] == bench.SIZES["tiny"]["llm_questions"]
    assert llm_res["answer_s_p50"] <= llm_res["answer_s_p95"]
    assert bench.SIZES["full"]["llm_questions"] >= 30  # issue #26: speed p50s over >= 30 questions
    for lv in levels.values():
        assert lv["p50_over_query_embed"] > 0

    base = saved["baseline"]
    assert base["questions"] == bench.SIZES["tiny"]["baseline_questions"]
    for side in ("ours", "baseline"):
        assert 0.0 <= base[side]["hit@5"] <= 1.0 and base[side]["search_ms"]["p50"] > 0
    if base["baseline"]["hit@5"]:
        assert base["ratios"]["hit@5"] == pytest.approx(
            base["ours"]["hit@5"] / base["baseline"]["hit@5"], abs=1e-3)

    keys = {t["key"] for t in saved["targets"]}
    assert keys == set(bench.TARGETS)
    # at tiny size the corpus-size targets are reported but never judged
    assert all(t["met"] is None for t in saved["targets"] if t["key"] in bench.SIZED_TARGETS)
    assert res["targets"] == saved["targets"]

    # history: one JSON line per run; the second run prints the change
    hist = tmp_path / "data" / "bench" / bench.HISTORY
    assert len(hist.read_text().splitlines()) == 1
    bench.run_bench("search", size="tiny", out=tmp_path / "out2", data_root=tmp_path / "data",
                    base_overrides={"embed_provider": "minilm"}, llm=llm)
    rows = [json.loads(x) for x in hist.read_text().splitlines()]
    assert len(rows) == 2 and rows[1]["figures"]["search.big.p50_ms"] > 0
    assert "Change since the previous tiny run" in capsys.readouterr().out


def test_baseline_same_corpus_and_same_number_of_sources(tmp_path: Path):
    """With --run, the baseline indexes the run's corpus and is scored on as many
    sources as ours cited, question by question (never a fixed 2)."""
    from eval.dataset import DEFAULT_SET, load_questions

    qs = [q for q in load_questions(DEFAULT_SET) if q.gold and q.answerable][:3]
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps(
        {"overall": {}, "run": {"extra_corpus": []}}), encoding="utf-8")
    (run / "results.jsonl").write_text("".join(
        json.dumps({"id": q.id, "cited": [{"n": j} for j in range(i + 1)]}) + "\n"
        for i, q in enumerate(qs)), encoding="utf-8")
    ctx = bench.BenchContext(size="tiny", root=tmp_path / "b", base_overrides={
        "embed_provider": "minilm"}, run_dir=run)
    (tmp_path / "b").mkdir()
    corpus, rows = bench.baseline_corpus(ctx)
    assert len(corpus) == 1 and set(rows) == {q.id for q in qs}
    out = bench.bench_baseline(ctx)
    assert out["baseline"]["citation_precision_basis"].startswith("top-n sources")
    assert [r.get("n_cited") for r in out["per_question"][:3]] == [1, 2, 3]
    assert out["ours"]["mean_cited"] == 2.0 and out["papers"] == 57
