"""Ingest: idempotent, incremental, resumable, model-guarded; chunk sizes; and
both Chroma modes (embedded and a real `chroma run` server)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rag.config import BUNDLED_CORPUS, Settings
from rag.engine import Engine
from rag.errors import IndexMismatchError
from tests.conftest import FakeEmbedding


def _corpus_copy(tmp_path: Path) -> Path:
    d = tmp_path / "icml2025"
    shutil.copytree(BUNDLED_CORPUS, d)
    return d


def _engine(tmp_path: Path, **over) -> Engine:
    s = Settings(_env_file=None, data_dir=tmp_path / "idx", **over)
    return Engine(s, embed_model=FakeEmbedding())


def test_reingest_unchanged_adds_and_embeds_nothing(tmp_path):
    corpus = _corpus_copy(tmp_path)
    eng = _engine(tmp_path)
    first = eng.ingest([corpus], progress=False)
    assert first.papers_added == 57 and first.chunks_embedded > 57
    again = _engine(tmp_path).ingest([corpus], progress=False)
    assert (again.papers_added, again.papers_updated, again.chunks_embedded) == (0, 0, 0)
    assert again.papers_unchanged == 57
    assert eng.index.collection.count() == eng.status().chunks


def test_changed_abstract_is_replaced_and_removed_file_pruned(tmp_path):
    corpus = _corpus_copy(tmp_path)
    eng = _engine(tmp_path)
    eng.ingest([corpus], progress=False)
    f = sorted(corpus.glob("*.txt"))[0]
    lines = f.read_text(encoding="utf-8").splitlines()
    i = next(i for i, ln in enumerate(lines[1:], 1) if ln.strip())
    lines[i] = lines[i] + " We also release a zebra-striped widget called Zebranator."
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rep = eng.ingest([corpus], progress=False)
    assert rep.papers_updated == 1 and rep.papers_added == 0
    hits = eng.search("Zebranator zebra-striped widget", k=1)
    assert "Zebranator" in hits[0].paper.abstract
    # Old chunks of that paper are gone from Chroma, not just from the catalog.
    assert eng.index.collection.count() == eng.status().chunks

    sorted(corpus.glob("*.txt"))[1].unlink()
    rep = eng.ingest([corpus], prune=True, progress=False)
    assert rep.papers_pruned == 19 and eng.status().papers == 38
    assert eng.index.collection.count() == eng.status().chunks


def test_interrupted_ingest_leaves_usable_index_and_resumes(tmp_path, monkeypatch):
    corpus = _corpus_copy(tmp_path)
    eng = _engine(tmp_path)
    calls = {"n": 0}
    real_commit = eng.index.catalog.commit_papers

    def crash_on_second(items):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt  # Ctrl-C after vectors were written, before the catalog
        real_commit(items)

    monkeypatch.setattr(eng.index.catalog, "commit_papers", crash_on_second)
    with pytest.raises(KeyboardInterrupt):
        eng.ingest([corpus], progress=False)
    monkeypatch.undo()

    fresh = _engine(tmp_path)
    part = fresh.status().papers
    assert 0 < part < 57
    assert fresh.search("guardrail agent safety policy", k=3)  # usable meanwhile
    ids = {c for c in fresh.index.collection.get(include=[])["ids"]}
    assert len(ids) > fresh.status().chunks  # orphan vectors of the crashed batch exist

    rep = fresh.ingest([corpus], progress=False)
    assert rep.papers_added == 57 - part and fresh.status().papers == 57
    assert rep.embeddings_cached > 0  # the crashed batch's vectors were cached
    assert fresh.index.collection.count() == fresh.status().chunks  # orphans cleaned


def test_other_embedding_model_is_a_clear_error(tmp_path):
    corpus = _corpus_copy(tmp_path)
    _engine(tmp_path).ingest([corpus], progress=False)
    other = Engine(Settings(_env_file=None, data_dir=tmp_path / "idx", embed_provider="wordllama"))
    with pytest.raises(IndexMismatchError, match="re-ingest"):
        other.search("agents")


@pytest.mark.slow
def test_chunks_fit_minilm_window():
    from transformers import AutoTokenizer

    from rag.corpus import load_corpus
    from rag.index import Chunker, embed_text
    from rag.models import minilm_dir

    tok = AutoTokenizer.from_pretrained(str(minilm_dir()))
    chunker = Chunker(Settings(_env_file=None))
    papers = load_corpus([BUNDLED_CORPUS]).papers
    worst = 0
    for p in papers:
        chunks = chunker.split(p.abstract)
        assert len(chunks) >= 2  # abstracts are longer than one chunk
        for c in chunks:
            worst = max(worst, len(tok(embed_text(p, c))["input_ids"]))
    assert worst <= 256, worst


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_chroma_server_mode(tmp_path):
    port = _free_port()
    chroma = Path(sys.executable).parent / "chroma"
    proc = subprocess.Popen(
        [str(chroma), "run", "--path", str(tmp_path / "server"), "--host", "127.0.0.1",
         "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.5)
        corpus = _corpus_copy(tmp_path)
        eng = _engine(tmp_path, chroma_host="127.0.0.1", chroma_port=port)
        rep = eng.ingest([corpus], progress=False)
        assert rep.papers_added == 57
        assert eng.index.collection.count() == eng.status().chunks
        # Nothing went to a local embedded store.
        assert not (tmp_path / "idx" / "chroma").exists()
        hits = eng.search("guardrail agent enforcing safety policies on action trajectories", k=3)
        assert hits[0].paper.title.startswith("ShieldAgent")
        again = _engine(tmp_path, chroma_host="127.0.0.1", chroma_port=port)
        assert again.ingest([corpus], progress=False).chunks_embedded == 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_bm25_is_persisted_at_ingest_and_loaded_not_rebuilt(tmp_path, monkeypatch):
    from rag.lexical import Lexical

    corpus = _corpus_copy(tmp_path)
    _engine(tmp_path).ingest([corpus], progress=False)
    saved = list((tmp_path / "idx" / "bm25").iterdir())
    assert len(saved) == 1 and (saved[0] / "chunk_key.txt").is_file()

    def no_build(*a, **k):
        raise AssertionError("BM25 was rebuilt on a query after ingest")

    monkeypatch.setattr(Lexical, "build", classmethod(no_build))
    fresh = _engine(tmp_path)
    hits = fresh.search("guardrail agent safety policy", k=3, mode="bm25")
    assert hits and fresh.retriever.snapshot().lexical.loaded
    # An unchanged re-ingest moves no generation: every snapshot stays valid.
    gen = fresh.index.catalog.generation()
    fresh.ingest([corpus], progress=False)
    assert fresh.index.catalog.generation() == gen
    monkeypatch.undo()

    # A changed corpus gets a new BM25 index, saved by the ingest; the old one goes.
    f = sorted(corpus.glob("*.txt"))[0]
    f.write_text(f.read_text(encoding="utf-8") + "\nA zebra-striped widget called Zebranator "
                 "that sorts abstracts by stripe count and reports high agreement.\n",
                 encoding="utf-8")
    fresh.ingest([corpus], progress=False)
    now = list((tmp_path / "idx" / "bm25").iterdir())
    assert len(now) == 1 and now[0].name != saved[0].name
    monkeypatch.setattr(Lexical, "build", classmethod(no_build))
    hits = _engine(tmp_path).search("Zebranator zebra-striped widget", k=1, mode="bm25")
    assert "Zebranator" in hits[0].paper.abstract


def test_centroid_only_papers_and_filters_in_fusion(tmp_path):
    """Vectorised fusion: filters hold, each paper once, passages from their paper."""
    from rag.types import Filters

    corpus = _corpus_copy(tmp_path)
    eng = _engine(tmp_path)
    eng.ingest([corpus], progress=False)
    hits = eng.search("agents", k=10)
    assert len({h.paper.paper_id for h in hits}) == len(hits) == 10
    assert [h.rank for h in hits] == list(range(1, 11))
    assert all(p.paper_id == h.paper.paper_id and p.text in h.paper.abstract
               for h in hits for p in h.passages)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    one = hits[3].paper.paper_id
    only = eng.search("agents", k=5, filters=Filters(paper_ids=[one]))
    assert [h.paper.paper_id for h in only] == [one]


def test_unchanged_reingest_does_not_open_chroma_but_repairs_a_lost_store(tmp_path, monkeypatch):
    """An unchanged re-ingest after a completed one reads the catalog only;
    after an interrupted ingest or a deleted vector store it reconciles."""
    from rag.index import VectorIndex

    corpus = _corpus_copy(tmp_path)
    _engine(tmp_path).ingest([corpus], progress=False)

    def no_chroma(self):
        raise AssertionError("an unchanged re-ingest opened Chroma")

    monkeypatch.setattr(VectorIndex, "_open_collections", no_chroma)
    rep = _engine(tmp_path).ingest([corpus], progress=False)
    assert rep.papers_unchanged == 57 and rep.chunks_embedded == 0
    monkeypatch.undo()

    from chromadb.api.shared_system_client import SharedSystemClient

    shutil.rmtree(tmp_path / "idx" / "chroma")
    SharedSystemClient.clear_system_cache()  # as a new process would be
    eng = _engine(tmp_path)
    rep = eng.ingest([corpus], progress=False)
    assert rep.papers_updated == 57 and rep.chunks_embedded == 0  # all from the cache
    assert eng.index.collection.count() == eng.status().chunks
    assert eng.search("guardrail agent safety policy", k=3)
