"""Index health and recovery (re-exported by ``rag.index``): ``IndexHealth``
(what ``aqa status`` prints), and ``IndexHealthChecks``, the part of
``VectorIndex`` that checks the catalog and the vector store agree, guards the
embedding model an index was built with, and ``rebuild``s it, moving damaged
files aside first.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from rag.errors import AqaError, IndexDamagedError, IndexMismatchError
from rag.store import damaged_message, disk_full, sqlite_problem

log = logging.getLogger(__name__)


def _sidecars(db: Path) -> list[Path]:
    return [db.with_name(db.name + suffix) for suffix in ("-wal", "-shm")]


@dataclass
class IndexHealth:
    """What ``aqa status`` prints about the index: ``ok`` and one line per part."""

    ok: bool
    catalog: str
    vectors: str
    problems: list[str] = field(default_factory=list)

    @property
    def summary(self) -> str:
        return "ok" if self.ok else self.problems[0]

    def to_dict(self) -> dict:
        return {"ok": self.ok, "catalog": self.catalog, "vectors": self.vectors,
                "problems": list(self.problems)}


class IndexHealthChecks:
    """Health checks and recovery of ``VectorIndex`` (its base class), which
    provides ``settings``, ``catalog``/``_catalog``, ``collection``,
    ``paper_collection``, ``_client``, ``_verified``, the paths and
    ``_open_collections``."""

    def _chroma_message(self, e: Exception) -> str:
        st = self.settings.storage
        if st.chroma_host:
            return (f"The Chroma server at {st.chroma_host}:{st.chroma_port} "
                    f"failed ({e.__class__.__name__}: {str(e)[:160]}).")
        if disk_full(e, self.settings.storage.data_dir):
            return (f"The disk holding {self.settings.storage.data_dir} is full, so the vector "
                    "store cannot open: free some space (nothing is damaged; an interrupted "
                    "ingest resumes when run again).")
        return (f"The vector store {self.chroma_path / 'chroma.sqlite3'} is damaged "
                f"({e.__class__.__name__}: {str(e)[:160]}): run `aqa ingest --rebuild` to move "
                "it aside and rebuild the index from the corpus.")

    # --- health ---
    def health(self) -> IndexHealth:
        """Check every part now; never raises."""
        problems: list[str] = []
        catalog = vectors = "unknown"
        counts = None
        try:
            counts = self.catalog.counts()
            catalog = f"ok ({counts[0]} papers, {counts[1]} chunks; {self.catalog_path})"
            if self.read_only:
                catalog += " (read-only: search and ask work; ingest needs write access)"
        except AqaError as e:
            catalog = "damaged"
            problems.append(str(e))
        except Exception as e:  # damage quick_check missed
            catalog = "damaged"
            problems.append(damaged_message(self.catalog_path, str(e)))
        try:
            n_vec, n_pvec = self.collection.count(), self.paper_collection.count()
            vectors = f"{n_vec} chunk vectors, {n_pvec} paper vectors"
            if counts is not None:
                problem = self._count_problem(counts, n_vec, n_pvec)
                if problem:
                    problems.append(problem)
                    vectors += " (incomplete)"
                else:
                    vectors = "ok (" + vectors + ")"
        except AqaError as e:
            vectors = "damaged"
            problems.append(str(e))
        except Exception as e:
            vectors = "unavailable (disk full)" if disk_full(e, self.settings.storage.data_dir) \
                else "damaged"
            problems.append(self._chroma_message(e))
        return IndexHealth(ok=not problems, catalog=catalog, vectors=vectors, problems=problems)

    def _count_problem(self, counts: tuple[int, int], n_vec: int, n_pvec: int) -> str | None:
        """Fewer vectors than the catalog lists means a lost or replaced store.
        (More is fine: a writer adds vectors before committing the catalog.)"""
        papers, chunks = counts
        if n_vec >= chunks and n_pvec >= papers:
            return None
        st = self.settings.storage
        where = (f"the Chroma server at {st.chroma_host}:{st.chroma_port}"
                 if st.chroma_host else f"the vector store {self.chroma_path}")
        return (f"{where[0].upper()}{where[1:]} holds {n_vec} of the {chunks} chunk vectors "
                f"(and {n_pvec} of {papers} paper vectors) the catalog lists: it is missing or "
                "was replaced. Run `aqa ingest --rebuild` to rebuild it from the corpus "
                "(cached embeddings are reused).")

    def ensure_healthy(self) -> None:
        """Raise ``IndexDamagedError`` unless the catalog and the vectors agree;
        cheap when nothing changed since the last check."""
        counts = self.catalog.counts()
        if counts == self._verified or counts[1] == 0:
            return
        try:
            n_vec, n_pvec = self.collection.count(), self.paper_collection.count()
        except AqaError:
            raise
        except Exception as e:
            raise IndexDamagedError(self._chroma_message(e)) from None
        problem = self._count_problem(counts, n_vec, n_pvec)
        if problem:
            raise IndexDamagedError(problem)
        self._verified = counts

    # --- model guard ---
    def check_model(self, model_name: str) -> None:
        """Before every search/answer: the index is healthy and was built with
        this embedding model."""
        self.ensure_healthy()
        self._check_model_name(model_name)

    def _check_model_name(self, model_name: str) -> None:
        built = self.catalog.get_meta("embed_model")
        if built and built != model_name and self.catalog.counts()[0]:
            base = "all-MiniLM-L6-v2"
            if built.startswith(base) and model_name.startswith(base):
                raise IndexMismatchError(_precision_message(
                    str(self.settings.storage.data_dir), built, model_name,
                    self.catalog.get_meta("embed_backend")))
            raise IndexMismatchError(
                f"The index in {self.settings.storage.data_dir} was built with embedding model "
                f"'{built}' "
                f"but '{model_name}' is configured: re-ingest with `aqa ingest --rebuild`, or "
                "use another --data-dir."
            )

    def rebuild(self) -> Path | None:
        """Empty the index. Damaged parts (catalog, vector store, BM25 files,
        an unsound embedding cache) are first moved aside to
        ``<data_dir>/backup-<timestamp>/``, which is returned (None when
        nothing was damaged)."""
        damaged: list[Path] = []
        try:
            _ = self.catalog
        except IndexDamagedError:
            damaged += [self.catalog_path, *_sidecars(self.catalog_path)]
        chroma_ok = True
        try:
            _ = self.collection
        except IndexDamagedError:
            chroma_ok = False
            if self.settings.storage.chroma_host:
                raise
            damaged.append(self.chroma_path)
        cache = self.settings.storage.data_dir / "embed_cache.sqlite"
        if sqlite_problem(cache):
            damaged += [cache, *_sidecars(cache)]
        backup = None
        if damaged:
            backup = self.settings.storage.data_dir / f"backup-{datetime.now():%Y%m%d-%H%M%S}"
            backup.mkdir(parents=True, exist_ok=True)
            if not chroma_ok:
                self._release_chroma()
            if self._catalog is not None and self.catalog_path in damaged:
                self._catalog.close()
                self._catalog = None
            for p in [*damaged, self.lexical_dir]:
                if p.exists():
                    shutil.move(str(p), str(backup / p.name))
            self._verified = None
            log.warning("moved damaged index files to %s", backup)
        if chroma_ok:
            collection = self.settings.storage.collection
            for name in (collection, f"{collection}_papers"):
                self._client.delete_collection(name)
            self._collection = self._paper_collection = None
        self.catalog.clear()
        self._open_collections()
        return backup

    def _release_chroma(self) -> None:
        """Forget this process's (broken) embedded Chroma system for our path,
        so the next client opens the files afresh."""
        from chromadb.api.shared_system_client import SharedSystemClient

        key = str(self.chroma_path)
        system = SharedSystemClient._identifier_to_system.pop(key, None)
        SharedSystemClient._identifier_to_refcount.pop(key, None)
        if system is not None:
            try:
                system.stop()
            except Exception:  # a broken system may fail to stop; it is dropped anyway
                pass
        self._client = self._collection = self._paper_collection = None


def _precision_message(data_dir: str, built: str, configured: str, backend: str | None) -> str:
    """Same MiniLM weights, vectors of another precision: say which setting to flip."""
    from rag.embed import INT8_SUFFIX

    how = f" ({backend})" if backend else ""
    if built.endswith(INT8_SUFFIX):
        return (f"The index in {data_dir} was built with int8-quantized MiniLM vectors{how}, "
                "but fp32 vectors are configured and the two must not be mixed: set "
                "AQA_EMBED_BACKEND=onnx AQA_EMBED_PRECISION=int8, or re-ingest with "
                "`aqa ingest --rebuild`.")
    return (f"The index in {data_dir} was built with fp32 MiniLM vectors{how}, but int8 "
            "vectors are configured (AQA_EMBED_PRECISION=int8, the default since it matched "
            "fp32 retrieval) and int8 vectors differ: re-ingest with `aqa ingest --rebuild`, "
            "or keep this index with AQA_EMBED_PRECISION=fp32.")
