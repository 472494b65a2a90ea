"""Issue 8, item 3: index health with real damaged files. Each damage gives
one clear IndexDamagedError line naming the file and the fix, never a
traceback or silently keyword-only results, and `ingest --rebuild` recovers:
damaged files go to a timestamped backup, the index is rebuilt from the
corpus and the (sound) embedding cache is reused."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from rag.config import BUNDLED_CORPUS, Settings
from rag.engine import Engine
from rag.errors import AqaError, IndexDamagedError
from tests.conftest import FakeEmbedding

Q = "guardrail agent that enforces safety policies"


def _engine(data: Path) -> Engine:
    _forget_chroma()  # a new process would not have this process's cached Chroma
    return Engine(Settings(_env_file=None, data_dir=data), embed_model=FakeEmbedding())


def _forget_chroma() -> None:
    from chromadb.api.shared_system_client import SharedSystemClient

    SharedSystemClient.clear_system_cache()


@pytest.fixture
def built(tmp_path) -> Path:
    data = tmp_path / "idx"
    eng = _engine(data)
    eng.ingest([BUNDLED_CORPUS], progress=False)
    assert eng.index.health().ok
    del eng
    with sqlite3.connect(data / "catalog.sqlite") as db:  # fold the WAL into the file
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return data


def _recovers(data: Path, backup: bool = True) -> None:
    eng = _engine(data)
    rep = eng.ingest([BUNDLED_CORPUS], rebuild=True, progress=False)
    assert rep.papers_total == 57
    assert rep.chunks_embedded == 0 and rep.embeddings_cached > 0  # the cache was sound
    backups = list(data.glob("backup-*"))
    if backup:  # damaged files are kept aside, never deleted
        assert len(backups) == 1 and any(backups[0].iterdir())
        assert rep.errors and str(backups[0]) in rep.errors[0]
    else:  # nothing damaged to keep: the lost store is just rebuilt
        assert not backups and not rep.errors
    assert eng.index.health().ok
    hits = eng.search(Q, k=3)
    assert hits and hits[0].dense_score and hits[0].dense_score > 0
    fresh = _engine(data)  # and it stays healthy for the next process
    assert fresh.search(Q, k=3)[0].paper.paper_id == hits[0].paper.paper_id


def test_truncated_catalog_is_one_clear_line_and_rebuild_recovers(built):
    cat = built / "catalog.sqlite"
    data = cat.read_bytes()
    cat.write_bytes(data[: len(data) // 3])
    for side in ("-wal", "-shm"):
        Path(str(cat) + side).unlink(missing_ok=True)
    eng = _engine(built)
    # `aqa status` reports the damage (one line naming the file and the fix) instead of raising.
    st = eng.status()
    assert not st.health["ok"] and st.papers == 0
    assert any("catalog.sqlite" in p and "aqa ingest --rebuild" in p for p in st.health["problems"])
    from rag.cli import status_text

    assert "DAMAGED" in status_text(st)
    for call in (lambda: eng.search(Q), lambda: eng.ingest([BUNDLED_CORPUS])):
        with pytest.raises(IndexDamagedError) as e:
            call()
        msg = str(e.value)
        assert "catalog.sqlite" in msg and "aqa ingest --rebuild" in msg and "\n" not in msg
    h = eng.index.health()
    assert not h.ok and "catalog.sqlite" in h.summary
    _recovers(built)


def test_garbage_chroma_sqlite_is_one_clear_line_and_rebuild_recovers(built):
    (built / "chroma" / "chroma.sqlite3").write_bytes(b"this is not a database " * 4096)
    eng = _engine(built)
    with pytest.raises(IndexDamagedError) as e:
        eng.search(Q)
    msg = str(e.value)
    assert "chroma.sqlite3" in msg and "aqa ingest --rebuild" in msg and "\n" not in msg
    assert not eng.index.health().ok
    _recovers(built)


def test_deleted_chroma_folder_never_degrades_to_keyword_only(built):
    shutil.rmtree(built / "chroma")
    eng = _engine(built)
    with pytest.raises(IndexDamagedError, match=r"holds 0 of the \d+ chunk vectors.*--rebuild"):
        eng.search(Q)
    assert "chroma" in eng.index.health().summary
    _recovers(built, backup=False)


def test_errors_are_aqa_errors_for_the_cli():
    assert issubclass(IndexDamagedError, AqaError)
