"""Ingest, the index's write path: ``IndexIngest``, the part of
``rag.index.VectorIndex`` (its base class) that loads the corpus, decides which
papers changed, chunks and embeds them in growing batches with a progress
display, and writes vectors, catalog rows and paper centroids in an order that
leaves a usable index after a crash anywhere (idempotent, incremental,
resumable). Also the reconciling after an interrupted ingest (orphan vectors)
and pruning papers no longer in the corpus.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from rag.chunking import Chunker, chunk_id, chunk_metadata, embed_text
from rag.corpus import content_hash, load_corpus
from rag.derived import DerivedCache
from rag.embed import CachedEmbedder
from rag.errors import AqaError, DiskFullError, IndexReadOnlyError
from rag.store import disk_full
from rag.types import IngestReport, Paper

BATCH_PAPERS = 32
BATCH_PAPERS_MAX = 128
PROGRESS_MIN_PAPERS = 64  # an ingest this small finishes before a bar would help
PROGRESS_LINE_EVERY = 500  # papers between plain progress lines (not a terminal)
CHROMA_MIN_BATCH = 5000  # delete/get slices below, and the fallback write limit


class IndexIngest:
    """Ingest into ``VectorIndex`` (its base class), which provides
    ``settings``, ``read_only``, ``catalog``, ``collection``,
    ``paper_collection``, ``_client``, ``_embedder_factory``,
    ``_vectors_generation``, ``chroma_path``, ``_open_collections``,
    ``persist_lexical`` and (from ``IndexHealthChecks``) ``rebuild`` and
    ``_check_model_name``."""

    def ingest(
        self,
        paths: Sequence[Path | str],
        *,
        model_name: str,
        prune: bool = False,
        rebuild: bool = False,
        progress: bool = True,
    ) -> IngestReport:
        self.check_writable()
        try:
            return self._ingest(paths, model_name=model_name, prune=prune, rebuild=rebuild,
                                progress=progress)
        except AqaError:
            raise
        except Exception as e:
            if disk_full(e, self.settings.storage.data_dir):
                raise DiskFullError(
                    f"The disk holding {self.settings.storage.data_dir} is full "
                    f"({e.__class__.__name__}): free some space and run `aqa ingest` again; it "
                    "resumes where it stopped, and the papers indexed so far stay searchable."
                ) from None
            raise

    def _ingest(self, paths: Sequence[Path | str], *, model_name: str, prune: bool,
                rebuild: bool, progress: bool) -> IngestReport:
        t0 = time.perf_counter()
        backup = self.rebuild() if rebuild else None
        self._check_model_name(model_name)  # no health check: ingest repairs missing vectors
        # Labels and dedup groups of unchanged content come from the catalog's
        # memo (rag.derived): 1.8 s of a 3,300-paper re-ingest otherwise.
        derived = DerivedCache.load(self.catalog)
        loaded = load_corpus(paths, dedup_threshold=self.settings.corpus.dedup_threshold,
                             cache=derived,
                             max_abstract_chars=self.settings.corpus.max_abstract_chars)
        derived.save(self.catalog)
        report = IngestReport(
            errors=[str(e) for e in loaded.errors], duplicates_merged=loaded.duplicates_merged
        )
        if backup is not None:
            report.errors.insert(0, f"{backup}: damaged index files were moved here; the index "
                                    "was rebuilt from the corpus")
        self.catalog.set_meta(embed_model=model_name)
        old = self.catalog.hashes()
        # The last ingest finished and nothing wrote vectors since: the vector
        # store matches the catalog, so an unchanged re-ingest never needs to
        # open (or even import) Chroma. Otherwise reconcile first.
        clean = self._vectors_clean()
        centroids: set[str] = set()
        vectors_ok = True
        if not clean:
            self._drop_orphans()
            # A paper without its centroid vector (an index from before
            # centroids) is redone; its chunk vectors come from the cache.
            centroids = self._ids(self.paper_collection)
            # Fewer chunk vectors than the catalog lists (a lost vector store):
            # redo every paper; the embedding cache makes that cheap.
            vectors_ok = self.collection.count() >= self.catalog.counts()[1]

        todo: list[tuple[Paper, str]] = []
        meta_only: list[Paper] = []
        for p in loaded.papers:
            h = content_hash(p)
            if old.get(p.paper_id) == h and (clean or (p.paper_id in centroids and vectors_ok)):
                report.papers_unchanged += 1
                meta_only.append(p)  # provenance/links may have changed; cheap to refresh
            else:
                todo.append((p, h))
                if p.paper_id in old:
                    report.papers_updated += 1
                else:
                    report.papers_added += 1
        if meta_only:
            self.catalog.update_metadata(meta_only)

        keep = {p.paper_id for p in loaded.papers}
        gone = [pid for pid in old if pid not in keep] if prune else []
        if todo or gone:
            self.catalog.set_meta(vectors_clean="0")  # until this ingest completes
        if todo:
            chunker = Chunker(self.settings)
            embedder = self._embedder_factory()
            hits0, miss0 = embedder.hits, embedder.misses
            bar = _progress(len(todo), progress)
            self._embed_and_write(todo, chunker, embedder, bar)
            bar(0, close=True)
            self.catalog.set_meta(embed_backend=_backend_of(embedder.model))
            report.chunks_embedded = embedder.misses - miss0
            report.embeddings_cached = embedder.hits - hits0

        if prune:
            self._delete_papers(gone)
            report.papers_pruned = len(gone)

        n_papers, _ = self.catalog.counts()
        report.papers_total = n_papers
        self.persist_lexical()
        self.catalog.set_meta(last_ingest=datetime.now(UTC).isoformat(timespec="seconds"),
                              vectors_clean="1")
        self.catalog.checkpoint()
        report.seconds = round(time.perf_counter() - t0, 3)
        return report

    def check_writable(self) -> None:
        """Raise ``IndexReadOnlyError`` (one line) on a read-only index."""
        if self.read_only:
            raise IndexReadOnlyError(
                f"The index at {self.settings.storage.data_dir} is read-only here (a read-only "
                "mount or no write permission): search and ask work, but ingest needs write "
                "access. Nothing was changed; pass --data-dir of a writable folder to build "
                "an index there.")

    def _vectors_clean(self) -> bool:
        """The catalog's marker that the last ingest completed (cleared before
        any vector write), and, for the embedded store, its file still there."""
        if self.catalog.get_meta("vectors_clean") != "1":
            return False
        return (bool(self.settings.storage.chroma_host)
                or (self.chroma_path / "chroma.sqlite3").is_file())

    def _embed_and_write(self, todo: list[tuple[Paper, str]], chunker: Chunker,
                         embedder: CachedEmbedder, bar: Callable) -> None:
        """Chunk, embed and write ``todo`` batch by batch, each batch written
        vectors first, then the catalog, then its stale vectors.

        Measured, and kept simple: a pipeline that chunked and wrote on this
        thread while another encoded (ONNX Runtime releases the GIL) gained
        nothing on 2 cores (32.9 s against 32.7 s for 800 papers, int8, under
        CPU contention): the two ONNX workers already fill both cores, and
        Chroma's upsert holds the GIL, so the encoder stalled behind it."""
        for batch in _batches(todo):
            prep = self._prepare(batch, chunker)
            self._write(batch, prep, embedder.embed_texts(prep.texts))
            bar(len(batch))

    def _prepare(self, batch: list[tuple[Paper, str]], chunker: Chunker) -> _Prepared:
        prep = _Prepared()
        for paper, h in batch:
            chunks = chunker.split(paper.abstract) or [paper.abstract]
            crow = []
            for j, c in enumerate(chunks):
                cid = chunk_id(paper, h, j)
                crow.append((cid, j, c))
                prep.ids.append(cid)
                prep.texts.append(embed_text(paper, c))
                prep.metas.append(chunk_metadata(paper, j))
            prep.rows.append((paper, h, crow))
            prep.sizes.append(len(chunks))
        return prep

    def _write(self, batch: list[tuple[Paper, str]], prep: _Prepared, vecs: np.ndarray) -> None:
        stale = self.catalog.chunk_ids(p.paper_id for p, _ in batch)
        # A paper's chunks are consecutive rows: its centroid is their mean.
        centroids = []
        start = 0
        for n in prep.sizes:
            c = vecs[start : start + n].mean(axis=0)
            centroids.append(c / (np.linalg.norm(c) + 1e-12))
            start += n
        # Order matters for resumability: vectors first, then the catalog
        # (atomic), then the stale vectors. A crash anywhere leaves a usable index.
        # No documents: the catalog keeps the chunk text, and Chroma's full-text
        # index of it cost a quarter to a third of the write time.
        # Each write within the store's own batch limit (5,461 on embedded
        # Chroma): one paper with thousands of chunks must not fail its batch.
        step = self._max_batch()
        for i in range(0, len(prep.ids), step):
            self.collection.upsert(ids=prep.ids[i : i + step], embeddings=vecs[i : i + step],
                                   metadatas=prep.metas[i : i + step])
        cents = np.stack(centroids)
        for i in range(0, len(batch), step):
            part = batch[i : i + step]
            self.paper_collection.upsert(
                ids=[p.paper_id for p, _ in part],
                embeddings=cents[i : i + step],
                metadatas=[chunk_metadata(p, 0) for p, _ in part],
            )
        self.catalog.commit_papers(prep.rows)
        self._vectors_generation = self.catalog.generation()  # our own write: already visible
        fresh = set(prep.ids)
        stale = [c for c in stale if c not in fresh]
        for i in range(0, len(stale), step):
            self.collection.delete(ids=stale[i : i + step])

    def _max_batch(self) -> int:
        """The most records one Chroma call may carry (the client says)."""
        if self._client is None:
            self._open_collections()
        try:
            return max(1, int(self._client.get_max_batch_size()))
        except Exception:  # an old server without the endpoint: Chroma's documented floor
            return CHROMA_MIN_BATCH

    def _delete_papers(self, paper_ids: list[str]) -> None:
        if not paper_ids:
            return
        ids = self.catalog.chunk_ids(paper_ids)
        self.catalog.delete_papers(paper_ids)
        self._vectors_generation = self.catalog.generation()
        for i in range(0, len(ids), CHROMA_MIN_BATCH):
            self.collection.delete(ids=ids[i : i + CHROMA_MIN_BATCH])
        for i in range(0, len(paper_ids), CHROMA_MIN_BATCH):
            self.paper_collection.delete(ids=paper_ids[i : i + CHROMA_MIN_BATCH])

    @staticmethod
    def _ids(coll) -> set[str]:
        out: set[str] = set()
        for off in range(0, coll.count(), 10000):
            out.update(coll.get(include=[], limit=10000, offset=off)["ids"])
        return out

    def _drop_orphans(self) -> None:
        """Delete vectors the catalog does not list (an interrupted ingest)."""
        chunks = {c[0] for c in self.catalog.chunks()}
        papers = set(self.catalog.hashes())
        for coll, known in ((self.collection, chunks), (self.paper_collection, papers)):
            orphans = sorted(self._ids(coll) - known)
            for i in range(0, len(orphans), CHROMA_MIN_BATCH):
                coll.delete(ids=orphans[i : i + CHROMA_MIN_BATCH])


def _backend_of(model: object) -> str:
    """What computed the vectors: ``backend_name`` when the model has one."""
    b = getattr(model, "backend_name", None)
    if isinstance(b, str):
        return b
    name = type(model).__name__
    return {"HuggingFaceEmbedding": "torch-fp32 (sentence-transformers)"}.get(name, name)


@dataclass
class _Prepared:
    """A batch chunked and ready to embed: catalog rows, Chroma ids, the texts
    to embed, their metadata, and each paper's number of chunks (in order)."""

    rows: list[tuple[Paper, str, list[tuple[str, int, str]]]] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    metas: list[dict] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)


def _batches(todo: list[tuple[Paper, str]]):
    """``BATCH_PAPERS`` papers first (an early Ctrl-C loses little, progress
    shows soon), then doubling up to ``BATCH_PAPERS_MAX``: fewer, larger Chroma
    writes cost less per vector."""
    i, size = 0, BATCH_PAPERS
    while i < len(todo):
        yield todo[i : i + size]
        i += size
        size = min(size * 2, BATCH_PAPERS_MAX)


def _progress(total: int, enabled: bool):
    """Progress of a long ingest (``rag.progress``: a bar on a terminal, plain
    lines in a log); a no-op for small ones."""
    if not enabled or total < PROGRESS_MIN_PAPERS:
        return lambda n, close=False: None
    from rag.progress import Progress

    bar = Progress(total, verb="embedded", unit="paper", desc="Embedding",
                   every=PROGRESS_LINE_EVERY)

    def step(n: int, close: bool = False) -> None:
        if n:
            bar.step(n=n)
        if close:
            bar.close()

    return step
