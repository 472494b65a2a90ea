"""The `aqa` CLI as a user runs it: real subprocesses, real MiniLM, real
Chroma, and the small real SmolLM2 model for `ask`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
AQA = str(Path(sys.executable).parent / "aqa")


def run(args: list[str], data_dir: Path, **env) -> subprocess.CompletedProcess:
    e = {**os.environ, "AQA_LOCAL_MODEL": "smollm2-135m", "AQA_LLM_PROVIDER": "local", **env}
    e.pop("OPENAI_API_KEY", None)
    # run outside the checkout, so that no .env file there changes the settings
    return subprocess.run([AQA, *args, "--data-dir", str(data_dir)], capture_output=True,
                          text=True, env=e, timeout=600, cwd=data_dir.parent)


@pytest.fixture
def index(real_index_dir, tmp_path) -> Path:
    d = tmp_path / "idx"
    shutil.copytree(real_index_dir, d)
    return d


def _check_paper(p: dict) -> None:
    for key in ("paper_id", "title", "title_derived", "authors", "url", "provenance"):
        assert key in p, key
    prov = p["provenance"][0]
    assert prov["path"].startswith("icml2025/") and prov["ordinal"] >= 1 and prov["line"] >= 2


def test_search_json_schema_and_batch(index, tmp_path):
    r = run(["search", "guardrail agent enforcing safety policies", "--json", "-k", "3"], index)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["query"] and len(out["results"]) == 3
    top = out["results"][0]
    # The bundled papers carry their real titles (metadata.jsonl), not derived labels.
    assert top["paper"]["title"] == "ShieldAgent: Shielding Agents via Verifiable Safety Policy Reasoning"
    assert top["paper"]["title_derived"] is False
    assert top["snippet"] in top["paper"]["abstract"] and isinstance(top["score"], float)
    _check_paper(top["paper"])

    qs = tmp_path / "qs.txt"
    qs.write_text("prompt injection defense\n\nmasked diffusion token order\n", encoding="utf-8")
    r = run(["search", "--batch", str(qs), "-k", "2"], index)
    lines = [json.loads(ln) for ln in r.stdout.splitlines()]
    assert [ln["query"] for ln in lines] == ["prompt injection defense", "masked diffusion token order"]


def test_ask_json_with_real_small_model(index):
    r = run(["ask", "What does ShieldAgent-Bench contain?", "--json"], index)
    assert r.returncode == 0, r.stderr
    a = json.loads(r.stdout)
    for key in ("answer", "sentences", "citations", "declined", "decline_reason", "model",
                "timings", "retrieved", "standalone_question"):
        assert key in a, key
    assert a["model"].startswith("local:SmolLM2")
    assert set(a["timings"]) == {"retrieval_ms", "passages_ms", "evidence_ms", "ttft_ms",
                                 "total_ms"}
    assert a["timings"]["total_ms"] >= a["timings"]["retrieval_ms"] > 0
    _check_paper(a["retrieved"][0]["paper"])
    for c in a["citations"]:  # citations only ever name retrieved papers
        assert c["paper"]["paper_id"] in {h["paper"]["paper_id"] for h in a["retrieved"]}
    if not a["declined"]:
        assert a["citations"] and all(0 <= s["support"] <= 1 for s in a["sentences"])


def test_compare_and_papers_json(index):
    r = run(["compare", "ShieldAgent", "MELON", "--json"], index, AQA_MAX_TOKENS="60")
    assert r.returncode == 0, r.stderr
    c = json.loads(r.stdout)
    # Papers are named as in running text; the JSON carries their full titles.
    assert [p["title"].split(":")[0] for p in c["papers"]] == ["ShieldAgent", "MELON"]
    assert c["papers"][1]["title"].startswith("MELON: Provable Defense")
    assert c["aspects"] == ["problem", "approach", "data", "results", "limitations"]
    r = run(["papers", "--json"], index)
    assert len(r.stdout.splitlines()) == 57


def test_errors_are_one_line(tmp_path, index):
    r = run(["ask", "anything?"], tmp_path / "empty")
    assert r.returncode == 2 and "aqa ingest" in r.stderr and "Traceback" not in r.stderr
    r = run(["ask", "What is ShieldAgent?"], index, AQA_LLM_PROVIDER="openai",
            OPENAI_BASE_URL="http://127.0.0.1:9/v1", AQA_LLM_RETRIES="0")
    assert r.returncode == 2 and "Cannot reach the LLM server" in r.stderr
    assert "Traceback" not in r.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"abstract": "A fine abstract about graph neural networks and molecules."}\n{oops\n')
    r = run(["ingest", str(bad)], tmp_path / "idx2")
    assert "bad.jsonl:2" in r.stderr and r.returncode == 0


def test_ask_and_search_say_loading_before_the_models_load(index):
    """The first thing on stderr is the loading message, printed before any
    model loads; how soon it comes is printed (a figure, not a timed assertion)."""
    import time

    for cmd in (["search", "diffusion models"], ["ask", "What does ShieldAgent propose?"]):
        e = {**os.environ, "AQA_LOCAL_MODEL": "smollm2-135m", "AQA_LLM_PROVIDER": "local"}
        t0 = time.monotonic()
        proc = subprocess.Popen([AQA, *cmd, "--data-dir", str(index)], stderr=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, text=True, env=e, cwd=index.parent)
        try:
            line = proc.stderr.readline()
            elapsed = time.monotonic() - t0
        finally:
            proc.kill()
            rc = proc.wait()
        assert "loading" in line.lower(), (cmd, rc, line, proc.stderr.read())
        print(f"\n{cmd[0]}: first stderr line after {elapsed:.2f} s")


def test_ask_shows_each_stage_and_the_quotes_before_the_answer(index):
    """Issue #29, item 5: piped (no TTY), `aqa ask` says what it is doing at each
    stage on stderr, and prints the quoted evidence before the synthesis."""
    r = run(["ask", "What does ShieldAgent propose?"], index)
    assert r.returncode == 0, r.stderr
    assert "Embedding model ready" in r.stderr and "Loading the language model" in r.stderr
    out = r.stdout
    if "Answer:" in out:
        assert "Evidence:" in out and out.index("Evidence:") < out.index("Answer:")
        assert "“" in out[out.index("Evidence:"):out.index("Answer:")]  # verbatim quotes
    else:  # declined: the reason, no synthesis
        assert out.strip() and "Cited:" not in out


def test_status_text_and_json(index):
    r = run(["status"], index)
    assert r.returncode == 0, r.stderr
    assert "Papers:      57" in r.stdout and "Sources:     icml2025 (57)" in r.stdout
    assert not r.stdout.lstrip().startswith("{") and "'" not in r.stdout  # no dict dumps
    st = json.loads(run(["status", "--json"], index).stdout)
    assert st["papers"] == 57 and st["sources"] == {"icml2025": 57}


def test_papers_query_shows_scores_and_snippets_and_rejects_useless_flags(index):
    r = run(["papers", "prompt injection defense for agents", "--limit", "3"], index)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^1\. .+score=\d\.\d{3}", r.stdout, re.MULTILINE), r.stdout
    assert r.stdout.count("“") == 3  # one snippet per result
    for flag in (["-k", "3"], ["--mode", "bm25"], ["--batch", "x.txt"]):
        r = run(["papers", "agents", *flag], index)
        assert r.returncode == 2 and "unrecognized arguments" in r.stderr, flag


def test_read_only_commands_do_not_create_a_missing_data_dir(tmp_path):
    missing = tmp_path / "nope"
    for cmd in (["search", "x"], ["ask", "x?"], ["status"], ["papers"], ["papers", "x"]):
        r = run(cmd, missing)
        assert r.returncode == 2, (cmd, r.stderr)
        assert "does not exist" in r.stderr and "aqa ingest" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
        assert not missing.exists(), f"{cmd[0]} created {missing}"


def test_ingest_and_compare_show_progress(tmp_path, index):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(json.dumps({
        "id": f"p{i}", "title": f"Paper {i}",
        "abstract": f"We propose method {i} for graph learning and report gains on benchmark {i}."
    }) for i in range(5)) + "\n", encoding="utf-8")
    r = run(["ingest", str(corpus)], tmp_path / "new")
    assert r.returncode == 0, r.stderr
    assert "Reading, embedding and indexing" in r.stderr and "Topic map:" in r.stderr
    assert (tmp_path / "new").is_dir()  # ingest creates the data dir
    r = run(["compare", "ShieldAgent", "MELON"], index, AQA_MAX_TOKENS="40")
    assert r.returncode == 0, r.stderr
    assert "Extracting problem, approach" in r.stderr and "Writing the synthesis" in r.stderr
