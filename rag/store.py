"""The catalog: a small sqlite file beside the vectors that is the source of
truth for which papers and chunks are indexed, their metadata, content hashes
and the embedding model the index was built with.

Chroma holds vectors; the catalog decides what counts. A chunk in Chroma that
the catalog does not list (left by an interrupted ingest) is ignored at query
time and deleted by the next ingest, which is what makes ingest resumable.
"""

from __future__ import annotations

import errno
import json
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path

from rag.errors import IndexDamagedError
from rag.types import Paper

SCHEMA = """
CREATE TABLE IF NOT EXISTS papers (paper_id TEXT PRIMARY KEY, hash TEXT, source TEXT, json TEXT);
CREATE TABLE IF NOT EXISTS chunks (chunk_id TEXT PRIMARY KEY, paper_id TEXT, idx INTEGER, text TEXT);
CREATE INDEX IF NOT EXISTS chunks_paper ON chunks(paper_id);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS derived (kind TEXT, key TEXT, value TEXT, PRIMARY KEY (kind, key));
"""


def damaged_message(path: Path, reason: str) -> str:
    return (f"The catalog {path} is damaged ({reason}): run `aqa ingest --rebuild` to move it "
            "aside and rebuild the index from the corpus.")


def writable(folder: Path) -> bool:
    """Whether files can be created in ``folder``: no on a read-only mount or
    without permission (a probe file, since ``os.access`` is wrong for root)."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


DISK_LOW_BYTES = 16 * 2**20  # a failed write with less free than this: the disk was full
_DISK_FULL_MARKERS = ("disk is full", "no space left", "quota exceeded")


def disk_full(e: BaseException, folder: Path) -> bool:
    """Whether a failed write was the disk filling up: ENOSPC anywhere in the
    chain, sqlite's or Chroma's wording, or (Chroma's compaction error names
    no cause) hardly any space left on ``folder``'s file system now."""
    cur: BaseException | None = e
    while cur is not None:
        if isinstance(cur, OSError) and cur.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if any(m in str(cur).lower() for m in _DISK_FULL_MARKERS):
            return True
        cur = cur.__cause__ or cur.__context__
    try:
        return shutil.disk_usage(folder).free < DISK_LOW_BYTES
    except OSError:
        return False


def connect(path: Path, *, read_only: bool = False) -> sqlite3.Connection:
    """A connection to ``path``; ``read_only`` opens it immutable, which is
    what lets sqlite read a WAL-mode file where it cannot create ``-shm``."""
    if read_only:
        return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True,
                               check_same_thread=False)
    return sqlite3.connect(path, check_same_thread=False)


def sqlite_problem(path: Path, *, read_only: bool = False) -> str | None:
    """Why the sqlite file at ``path`` is unusable (``PRAGMA quick_check``), or None."""
    if not path.exists():
        return None
    try:
        db = connect(path, read_only=read_only)
        try:
            rows = db.execute("PRAGMA quick_check").fetchall()
        finally:
            db.close()
    except sqlite3.Error as e:
        return str(e)
    result = "; ".join(str(r[0]) for r in rows[:3])
    return None if result == "ok" else f"quick_check: {result}"


def _has_wal(path: Path) -> bool:
    wal = path.with_name(path.name + "-wal")
    return wal.is_file() and wal.stat().st_size > 0


def _private_copy(path: Path) -> Path:
    """``path`` and its ``-wal`` copied to a temporary folder removed at exit."""
    import atexit

    tmp = Path(tempfile.mkdtemp(prefix="aqa-readonly-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    for suffix in ("", "-wal"):
        shutil.copy2(path.with_name(path.name + suffix), tmp / (path.name + suffix))
    return tmp / path.name


class Catalog:
    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        """``read_only``: the index's folder cannot be written here (a read-only
        mount or permissions); reads work, and any write raises
        ``IndexReadOnlyError`` with one line."""
        self.path, self.read_only = path, read_only
        if not read_only:
            path.parent.mkdir(parents=True, exist_ok=True)
        elif _has_wal(path):
            # Commits still in the -wal file are invisible to an immutable
            # open: read a private copy of the file and its log instead.
            path = _private_copy(path)
            read_only = False
        # Health on open: a damaged file is one clear line, never a traceback.
        problem = sqlite_problem(path, read_only=read_only)
        if problem:
            raise IndexDamagedError(damaged_message(path, problem))
        try:
            self._db = connect(path, read_only=read_only)
            if not read_only:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.executescript(SCHEMA)
        except sqlite3.DatabaseError as e:
            raise IndexDamagedError(damaged_message(path, str(e))) from None
        self._lock = threading.Lock()
        # Reads that every query makes (meta, counts) are cached until the file
        # changes: PRAGMA data_version moves on another connection's commit,
        # and our own writes clear the cache.
        self._cache: dict = {}
        self._data_version = -1

    def _cached(self, key: object, read):
        """``read()`` under the lock, memoised until the database changes."""
        with self._lock:
            v = self._db.execute("PRAGMA data_version").fetchone()[0]
            if v != self._data_version:
                self._cache.clear()
                self._data_version = v
            if key not in self._cache:
                self._cache[key] = read()
            return self._cache[key]

    # --- meta ---
    def get_meta(self, key: str) -> str | None:
        def read() -> str | None:
            row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
            return row[0] if row else None

        return self._cached(("meta", key), read)

    def set_meta(self, **values: str) -> None:
        with self._lock, self._db:
            self._cache.clear()
            self._db.executemany("INSERT OR REPLACE INTO meta VALUES (?,?)", values.items())

    # --- derived (rag.derived: labels and dedup groups memoised by content hash) ---
    def derived_rows(self, kind: str) -> dict[str, str]:
        with self._lock:
            return dict(self._db.execute("SELECT key, value FROM derived WHERE kind=?", (kind,)))

    def replace_derived(self, prefix: str, kind: str, rows: dict[str, str]) -> None:
        """Every row whose kind starts with ``prefix`` (all rule versions) is
        replaced by ``rows`` under ``kind``, in one transaction."""
        with self._lock, self._db:
            self._cache.clear()
            self._db.execute("DELETE FROM derived WHERE substr(kind, 1, ?) = ?",
                             (len(prefix), prefix))
            self._db.executemany("INSERT INTO derived VALUES (?,?,?)",
                                 [(kind, k, v) for k, v in rows.items()])

    def generation(self) -> int:
        """A counter every committed change of papers or chunks increments:
        one cheap read tells a reader whether its snapshot is current."""
        v = self.get_meta("generation")
        return int(v) if v else 0

    def _bump(self) -> None:
        """Increment the generation inside the caller's write transaction."""
        self._cache.clear()
        self._db.execute(
            "INSERT INTO meta VALUES ('generation', '1') ON CONFLICT(key) DO UPDATE "
            "SET value = CAST(value AS INTEGER) + 1"
        )

    def read_snapshot(self) -> tuple[int, list[Paper], list[tuple[str, str, int, str]]]:
        """(generation, papers, chunks) read in ONE read transaction, so a
        writer committing meanwhile can never mix two generations."""
        with self._lock:
            self._db.execute("BEGIN")
            try:
                row = self._db.execute("SELECT value FROM meta WHERE key='generation'").fetchone()
                papers = self._db.execute("SELECT json FROM papers").fetchall()
                chunks = self._db.execute(
                    "SELECT chunk_id, paper_id, idx, text FROM chunks ORDER BY paper_id, idx"
                ).fetchall()
            finally:
                self._db.execute("COMMIT")
        gen = int(row[0]) if row else 0
        return gen, [Paper.from_dict(json.loads(r[0])) for r in papers], chunks

    # --- papers ---
    def hashes(self) -> dict[str, str]:
        with self._lock:
            return dict(self._db.execute("SELECT paper_id, hash FROM papers"))

    def papers(self) -> list[Paper]:
        with self._lock:
            rows = self._db.execute("SELECT json FROM papers").fetchall()
        return [Paper.from_dict(json.loads(r[0])) for r in rows]

    def chunk_ids(self, paper_ids: Iterable[str]) -> list[str]:
        ids = list(paper_ids)
        out: list[str] = []
        with self._lock:
            for i in range(0, len(ids), 500):
                b = ids[i : i + 500]
                q = ",".join("?" * len(b))
                out += [
                    r[0]
                    for r in self._db.execute(
                        f"SELECT chunk_id FROM chunks WHERE paper_id IN ({q})", b
                    )
                ]
        return out

    def chunks(self) -> list[tuple[str, str, int, str]]:
        """All (chunk_id, paper_id, idx, text), in a stable order."""
        with self._lock:
            return self._db.execute(
                "SELECT chunk_id, paper_id, idx, text FROM chunks ORDER BY paper_id, idx"
            ).fetchall()

    def counts(self) -> tuple[int, int]:
        def read() -> tuple[int, int]:
            p = self._db.execute("SELECT COUNT(*) FROM papers").fetchone()[0]
            c = self._db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
            return p, c

        return self._cached("counts", read)

    def source_counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._db.execute("SELECT source, COUNT(*) FROM papers GROUP BY source"))

    def commit_papers(
        self, items: list[tuple[Paper, str, list[tuple[str, int, str]]]]
    ) -> None:
        """Atomically replace papers and their chunks: (paper, hash, [(chunk_id, idx, text)])."""
        with self._lock, self._db:
            for paper, h, chunks in items:
                self._db.execute("DELETE FROM chunks WHERE paper_id=?", (paper.paper_id,))
                self._db.execute(
                    "INSERT OR REPLACE INTO papers VALUES (?,?,?,?)",
                    (paper.paper_id, h, paper.source, json.dumps(paper.to_dict())),
                )
                self._db.executemany(
                    "INSERT INTO chunks VALUES (?,?,?,?)",
                    [(cid, paper.paper_id, i, t) for cid, i, t in chunks],
                )
            self._bump()

    def update_metadata(self, papers: list[Paper]) -> int:
        """Refresh provenance/links of unchanged papers; only rows that really
        differ are written (and only then does the generation move, so an
        unchanged re-ingest leaves every reader's snapshot valid)."""
        new = {p.paper_id: (json.dumps(p.to_dict()), p.source) for p in papers}
        with self._lock:
            old = dict(self._db.execute("SELECT paper_id, json FROM papers"))
        rows = [(j, src, pid) for pid, (j, src) in new.items() if old.get(pid) != j]
        if rows:
            with self._lock, self._db:
                self._db.executemany("UPDATE papers SET json=?, source=? WHERE paper_id=?", rows)
                self._bump()
        return len(rows)

    def delete_papers(self, paper_ids: list[str]) -> None:
        with self._lock, self._db:
            for pid in paper_ids:
                self._db.execute("DELETE FROM chunks WHERE paper_id=?", (pid,))
                self._db.execute("DELETE FROM papers WHERE paper_id=?", (pid,))
            self._bump()

    def checkpoint(self) -> None:
        """Fold the -wal log into the file, so that a reader that cannot write
        (a read-only copy of the index) sees every commit."""
        with self._lock:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def clear(self) -> None:
        with self._lock, self._db:
            self._db.execute("DELETE FROM chunks")
            self._db.execute("DELETE FROM papers")
            # The generation survives a clear: a reader must never mistake the
            # rebuilt catalog for the one it already has.
            self._db.execute("DELETE FROM meta WHERE key != 'generation'")
            self._bump()
