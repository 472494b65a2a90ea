"""The index: chunks (``rag.chunking``) in the Chroma vector store (embedded or a
``chroma run`` server) beside the catalog (``rag.store``): opening both lazily,
following another process's ingest, the BM25 index persisted beside the
catalog, and vector queries. Ingest, the write path, is ``rag.ingest``'s
``IndexIngest``; health checks, the embedding-model guard and ``rebuild`` are
``rag.health``'s ``IndexHealthChecks``: both are base classes of
``VectorIndex``. ``IndexHealth``, ``BATCH_PAPERS`` and ``CHROMA_MIN_BATCH``
are re-exported here.

We talk to the chromadb collection directly rather than through LlamaIndex's
ChromaVectorStore: the catalog (rag.store) already keeps chunk text, and the
wrapper would duplicate each node's JSON into Chroma metadata and offers no
cheap "list ids" for reconciling after an interrupted ingest.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np

from rag.chunking import Chunker, chunk_id, chunk_metadata, embed_text
from rag.config import Settings
from rag.embed import CachedEmbedder
from rag.errors import AqaError, IndexDamagedError
from rag.health import IndexHealth, IndexHealthChecks
from rag.ingest import BATCH_PAPERS, CHROMA_MIN_BATCH, IndexIngest
from rag.store import Catalog

__all__ = ["BATCH_PAPERS", "CHROMA_MIN_BATCH", "Chunker", "IndexHealth", "VectorIndex",
           "chunk_id", "chunk_metadata", "embed_text", "make_chroma_client", "read_only_copy"]

log = logging.getLogger(__name__)


def make_chroma_client(settings: Settings, path: Path | None = None):
    """A client for the configured store; ``path``: open the embedded store
    from there instead of the index's own ``chroma/`` folder."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    cs = ChromaSettings(anonymized_telemetry=False)
    st = settings.storage
    if st.chroma_host:
        try:
            return chromadb.HttpClient(host=st.chroma_host, port=st.chroma_port, settings=cs)
        except Exception as e:
            raise AqaError(
                f"Cannot reach the Chroma server at {st.chroma_host}:{st.chroma_port} "
                f"({e.__class__.__name__}): start it with `chroma run` or unset AQA_CHROMA_HOST."
            ) from e
    return chromadb.PersistentClient(path=str(path or st.data_dir / "chroma"), settings=cs)


def read_only_copy(chroma_dir: Path) -> Path:
    """A private, writable copy of a read-only embedded vector store, removed
    at exit. Chroma cannot open its files read-only (it writes on open), and
    the store is small beside the models (about 15 MB per 1,000 papers)."""
    import atexit
    import shutil
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="aqa-readonly-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    if chroma_dir.is_dir():
        shutil.copytree(chroma_dir, tmp / "chroma")
    log.info("the index is read-only: vectors opened from a private copy in %s", tmp)
    return tmp / "chroma"


class VectorIndex(IndexIngest, IndexHealthChecks):
    """Chroma collection + catalog for one data dir.

    Both open lazily, on first use, with a health check: a damaged catalog
    (``PRAGMA quick_check``) or vector store raises ``IndexDamagedError`` (one
    line naming the file and the fix) from whatever touched it first, and the
    vector count must agree with the catalog before a search may run, so a
    deleted ``chroma/`` never degrades silently to keyword-only results.
    ``ingest(rebuild=True)`` moves damaged parts aside and always recovers."""

    def __init__(self, settings: Settings, embedder: Callable[[], CachedEmbedder], *,
                 read_only: bool = False) -> None:
        """``read_only``: the data dir cannot be written here; search and
        answers work, ingest and rebuild raise ``IndexReadOnlyError``."""
        self.settings = settings
        self.read_only = read_only
        self._embedder_factory = embedder
        self._catalog: Catalog | None = None
        self._client = None
        self._collection = None
        self._paper_collection = None
        self._verified: tuple | None = None  # catalog counts the vector store agreed with
        # The catalog generation our open vector store is known to reflect:
        # another process's ingest moves the catalog past it (see sync_vectors).
        self._vectors_generation: int | None = None

    # --- lazy parts ---
    @property
    def catalog_path(self) -> Path:
        return self.settings.storage.data_dir / "catalog.sqlite"

    @property
    def chroma_path(self) -> Path:
        return self.settings.storage.data_dir / "chroma"

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = Catalog(self.catalog_path, read_only=self.read_only)
        return self._catalog

    @property
    def collection(self):
        if self._collection is None:
            self._open_collections()
        return self._collection

    @property
    def paper_collection(self):
        if self._paper_collection is None:
            self._open_collections()
        return self._paper_collection

    def _open_collections(self) -> None:
        s = self.settings
        try:
            gen = self.catalog.generation()
        except AqaError:
            gen = None  # a damaged catalog is reported by whoever reads it
        try:
            if self._client is None:
                ro = self.read_only and not s.storage.chroma_host
                self._client = make_chroma_client(
                    s, read_only_copy(self.chroma_path) if ro else None)
            coll = self._client.get_or_create_collection(
                s.storage.collection, metadata={"hnsw:space": "cosine"}, embedding_function=None
            )
            # One vector per paper: the normalised mean of its chunk vectors, which
            # matches "which paper does X" questions that describe a whole abstract.
            papers = self._client.get_or_create_collection(
                f"{s.storage.collection}_papers", metadata={"hnsw:space": "cosine"},
                embedding_function=None,
            )
            coll.count()
        except AqaError:
            raise
        except Exception as e:
            raise IndexDamagedError(self._chroma_message(e)) from None
        self._collection, self._paper_collection = coll, papers
        self._vectors_generation = gen

    def sync_vectors(self, generation: int) -> bool:
        """Reopen the embedded vector store when the catalog moved to a
        generation this process did not write (an ``aqa ingest`` run beside a
        serving app): Chroma's in-process system keeps the vectors it loaded,
        so without this the app's keyword side would see new papers and its
        vector side would not. Cheap when nothing changed; True if reopened."""
        if (self._collection is None or self.settings.storage.chroma_host or self.read_only
                or generation == self._vectors_generation):
            return False
        from chromadb.api.shared_system_client import SharedSystemClient

        # Forget (not stop) the cached system for our path: a query running on
        # it in another thread finishes; the next one opens the files afresh.
        # chromadb has no public per-path API for this (clear_system_cache()
        # drops every path's system).
        key = str(self.chroma_path)
        SharedSystemClient._identifier_to_system.pop(key, None)
        SharedSystemClient._identifier_to_refcount.pop(key, None)
        self._client = self._collection = self._paper_collection = None
        self._verified = None
        log.info("the index changed on disk (generation %s): vector store reopened", generation)
        self._open_collections()
        return True

    # --- BM25 ---
    @property
    def lexical_dir(self) -> Path:
        return self.settings.storage.data_dir / "bm25"

    def persist_lexical(self) -> None:
        """Save the BM25 index of the committed catalog beside it, so no query
        pays for building it (a no-op when the saved one is current)."""
        from rag.lexical import corpus_key, load_or_build

        gen = str(self.catalog.generation())
        saved = self.catalog.get_meta("bm25_key")
        if self.catalog.get_meta("bm25_generation") == gen and saved and (
                self.lexical_dir / saved).is_dir():
            return  # nothing committed since it was saved: no catalog read at all
        g, papers, rows = self.catalog.read_snapshot()
        gen = str(g)  # the generation these rows belong to
        by_id = {p.paper_id: p for p in papers}
        rows = [r for r in rows if r[1] in by_id]
        if not rows:
            return
        ids = [r[0] for r in rows]
        key = corpus_key(ids)
        if not (self.lexical_dir / key).is_dir():
            load_or_build(self.lexical_dir, ids, [embed_text(by_id[r[1]], r[3]) for r in rows])
        self.catalog.set_meta(bm25_generation=gen, bm25_key=key)

    # --- query ---
    def query(
        self, vec: np.ndarray, n: int, where: dict | None, papers: bool = False
    ) -> list[tuple[str, float]]:
        """(chunk_id or paper_id, cosine similarity), best first."""
        coll = self.paper_collection if papers else self.collection
        # No count() first: it cost as much as the query itself (4 ms at 100k
        # chunks), and Chroma returns fewer than n_results when it has fewer.
        try:
            res = coll.query(
                query_embeddings=[vec.tolist()],
                n_results=n,
                where=where or None,
                include=["distances"],
            )
        except Exception as e:  # a Chroma server gone mid-session: one line, not httpx's trace
            if not self.settings.storage.chroma_host:
                raise
            st = self.settings.storage
            raise AqaError(
                f"Lost the Chroma server at {st.chroma_host}:{st.chroma_port} "
                f"({e.__class__.__name__}): restart it with `chroma run` and search again."
            ) from None
        return [(cid, 1.0 - float(d)) for cid, d in zip(res["ids"][0], res["distances"][0], strict=True)]

