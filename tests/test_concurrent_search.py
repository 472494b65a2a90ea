"""Issue 8, item 2: searches never fail while an ingest commits into the same
data dir. A real ingest (real MiniLM, real Chroma) runs in another process
while this one searches in a loop; every search uses one catalog snapshot for
dense, lexical and fusion, so positions can never come from two generations."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eval.bench import synth_abstracts, write_seed_corpus
from rag.config import Settings
from rag.engine import Engine
from rag.retrieve import HybridRetriever

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent

INGEST = """
import sys
from rag.config import Settings
from rag.engine import Engine
s = Settings(_env_file=None, data_dir=sys.argv[1])
rep = Engine(s).ingest([sys.argv[2]], progress=False)
print("added", rep.papers_added, flush=True)
"""


def test_search_loop_survives_a_concurrent_ingest(real_index_dir, tmp_path):
    import shutil

    data = tmp_path / "idx"
    shutil.copytree(real_index_dir, data)
    corpus = write_seed_corpus(tmp_path / "more", synth_abstracts(96, seed=7), per_file=8)
    eng = Engine(Settings(_env_file=None, data_dir=data))
    before = eng.status().papers
    gens = {eng.retriever.snapshot().version}
    queries = ["guardrail agent safety policy", "self-supervised augmentation bound",
               "large language model agents", "diffusion model sampling"]

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", INGEST, str(data), str(corpus)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    searches, errors = 0, []
    deadline = time.time() + 600
    while proc.poll() is None and time.time() < deadline:
        for q in queries:
            try:
                for mode in ("hybrid", "bm25"):
                    hits = eng.search(q, k=5, mode=mode)
                    assert all(h.passages for h in hits)
                searches += 1
            except Exception as e:  # the test's point: no exception of any kind
                errors.append(repr(e))
        gens.add(eng.retriever.snapshot().version)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    assert not errors, errors[:3]
    assert searches > 0
    # The loop really overlapped the writer: it saw intermediate generations.
    assert len(gens) >= 2, gens
    after = Engine(Settings(_env_file=None, data_dir=data))
    assert after.status().papers == before + 96
    assert after.search("guardrail agent safety policy", k=3)


def test_one_snapshot_is_passed_down(real_engine, monkeypatch):
    """dense() and lexical() use the snapshot search() took, never their own."""
    calls = {"n": 0}
    real = HybridRetriever.snapshot

    def counting(self):
        calls["n"] += 1
        return real(self)

    monkeypatch.setattr(HybridRetriever, "snapshot", counting)
    real_engine.retriever.search("guardrail agent safety policy", k=3)
    assert calls["n"] == 1
