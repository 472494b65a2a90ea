"""The index: token-aware chunking, the Chroma vector store (embedded or a
``chroma run`` server), and idempotent, incremental, resumable ingest.

We talk to the chromadb collection directly rather than through LlamaIndex's
ChromaVectorStore: the catalog (rag.store) already keeps chunk text, and the
wrapper would duplicate each node's JSON into Chroma metadata and offers no
cheap "list ids" for reconciling after an interrupted ingest.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from rag.config import Settings
from rag.corpus import content_hash, load_corpus
from rag.embed import CachedEmbedder
from rag.errors import AqaError, IndexDamagedError, IndexMismatchError
from rag.store import Catalog, damaged_message, sqlite_problem
from rag.types import IngestReport, Paper

BATCH_PAPERS = 32
log = logging.getLogger(__name__)


def _sidecars(db: Path) -> list[Path]:
    return [db.with_name(db.name + suffix) for suffix in ("-wal", "-shm")]


class Chunker:
    """Sentence-boundary chunks of at most ``chunk_tokens`` tiktoken tokens
    (LlamaIndex SentenceSplitter). 128 tiktoken tokens stay well under
    MiniLM's 256 word-piece limit even for symbol-heavy abstracts."""

    def __init__(self, settings: Settings) -> None:
        from llama_index.core.node_parser import SentenceSplitter

        self._splitter = SentenceSplitter(
            chunk_size=settings.chunk_tokens, chunk_overlap=settings.chunk_overlap
        )

    def split(self, text: str) -> list[str]:
        return [c.strip() for c in self._splitter.split_text(text) if c.strip()]


def embed_text(paper: Paper, chunk: str) -> str:
    """What gets embedded and BM25-indexed: a real title adds signal; a label
    derived from the abstract itself adds none."""
    return chunk if paper.title_derived else f"{paper.title}. {chunk}"


def chunk_id(paper: Paper, h: str, i: int) -> str:
    # Content hash in the id: a changed abstract gets fresh ids, so the old
    # chunks can be deleted only after the new ones are committed.
    return f"{paper.paper_id}::{h[:12]}::{i}"


def make_chroma_client(settings: Settings):
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    cs = ChromaSettings(anonymized_telemetry=False)
    if settings.chroma_host:
        try:
            return chromadb.HttpClient(host=settings.chroma_host, port=settings.chroma_port, settings=cs)
        except Exception as e:
            raise AqaError(
                f"Cannot reach the Chroma server at {settings.chroma_host}:{settings.chroma_port} "
                f"({e.__class__.__name__}): start it with `chroma run` or unset AQA_CHROMA_HOST."
            ) from e
    return chromadb.PersistentClient(path=str(settings.data_dir / "chroma"), settings=cs)


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


class VectorIndex:
    """Chroma collection + catalog for one data dir.

    Both open lazily, on first use, with a health check: a damaged catalog
    (``PRAGMA quick_check``) or vector store raises ``IndexDamagedError`` (one
    line naming the file and the fix) from whatever touched it first, and the
    vector count must agree with the catalog before a search may run, so a
    deleted ``chroma/`` never degrades silently to keyword-only results.
    ``ingest(rebuild=True)`` moves damaged parts aside and always recovers."""

    def __init__(self, settings: Settings, embedder: Callable[[], CachedEmbedder]) -> None:
        self.settings = settings
        self._embedder_factory = embedder
        self._catalog: Catalog | None = None
        self._client = None
        self._collection = None
        self._paper_collection = None
        self._verified: tuple | None = None  # catalog counts the vector store agreed with

    # --- lazy parts ---
    @property
    def catalog_path(self) -> Path:
        return self.settings.data_dir / "catalog.sqlite"

    @property
    def chroma_path(self) -> Path:
        return self.settings.data_dir / "chroma"

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = Catalog(self.catalog_path)
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
            if self._client is None:
                self._client = make_chroma_client(s)
            coll = self._client.get_or_create_collection(
                s.collection, metadata={"hnsw:space": "cosine"}, embedding_function=None
            )
            # One vector per paper: the normalised mean of its chunk vectors, which
            # matches "which paper does X" questions that describe a whole abstract.
            papers = self._client.get_or_create_collection(
                f"{s.collection}_papers", metadata={"hnsw:space": "cosine"},
                embedding_function=None,
            )
            coll.count()
        except AqaError:
            raise
        except Exception as e:
            raise IndexDamagedError(self._chroma_message(e)) from None
        self._collection, self._paper_collection = coll, papers

    def _chroma_message(self, e: Exception) -> str:
        if self.settings.chroma_host:
            return (f"The Chroma server at {self.settings.chroma_host}:{self.settings.chroma_port} "
                    f"failed ({e.__class__.__name__}: {str(e)[:160]}).")
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
            vectors = "damaged"
            problems.append(self._chroma_message(e))
        return IndexHealth(ok=not problems, catalog=catalog, vectors=vectors, problems=problems)

    def _count_problem(self, counts: tuple[int, int], n_vec: int, n_pvec: int) -> str | None:
        """Fewer vectors than the catalog lists means a lost or replaced store.
        (More is fine: a writer adds vectors before committing the catalog.)"""
        papers, chunks = counts
        if n_vec >= chunks and n_pvec >= papers:
            return None
        where = (f"the Chroma server at {self.settings.chroma_host}:{self.settings.chroma_port}"
                 if self.settings.chroma_host else f"the vector store {self.chroma_path}")
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
                    str(self.settings.data_dir), built, model_name,
                    self.catalog.get_meta("embed_backend")))
            raise IndexMismatchError(
                f"The index in {self.settings.data_dir} was built with embedding model '{built}' "
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
            if self.settings.chroma_host:
                raise
            damaged.append(self.chroma_path)
        cache = self.settings.data_dir / "embed_cache.sqlite"
        if sqlite_problem(cache):
            damaged += [cache, *_sidecars(cache)]
        backup = None
        if damaged:
            backup = self.settings.data_dir / f"backup-{datetime.now():%Y%m%d-%H%M%S}"
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
            for name in (self.settings.collection, f"{self.settings.collection}_papers"):
                self._client.delete_collection(name)
            self._collection = self._paper_collection = None
        self.catalog.clear()
        self._open_collections()
        return backup

    def _release_chroma(self) -> None:
        """Forget this process's (broken) embedded Chroma system for our path,
        so the next client opens the files afresh."""
        from chromadb.api.shared_system_client import SharedSystemClient as C

        key = str(self.chroma_path)
        system = C._identifier_to_system.pop(key, None)
        C._identifier_to_refcount.pop(key, None)
        if system is not None:
            try:
                system.stop()
            except Exception:  # a broken system may fail to stop; it is dropped anyway
                pass
        self._client = self._collection = self._paper_collection = None

    # --- ingest ---
    def ingest(
        self,
        paths: Sequence[Path | str],
        *,
        model_name: str,
        prune: bool = False,
        rebuild: bool = False,
        progress: bool = True,
    ) -> IngestReport:
        t0 = time.perf_counter()
        backup = self.rebuild() if rebuild else None
        self._check_model_name(model_name)  # no health check: ingest repairs missing vectors
        loaded = load_corpus(paths, dedup_threshold=self.settings.dedup_threshold)
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
            for i in range(0, len(todo), BATCH_PAPERS):
                batch = todo[i : i + BATCH_PAPERS]
                self._ingest_batch(batch, chunker, embedder)
                bar(len(batch))
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
        report.seconds = round(time.perf_counter() - t0, 3)
        return report

    def _vectors_clean(self) -> bool:
        """The catalog's marker that the last ingest completed (cleared before
        any vector write), and, for the embedded store, its file still there."""
        if self.catalog.get_meta("vectors_clean") != "1":
            return False
        return bool(self.settings.chroma_host) or (self.chroma_path / "chroma.sqlite3").is_file()

    def _ingest_batch(
        self, batch: list[tuple[Paper, str]], chunker: Chunker, embedder: CachedEmbedder
    ) -> None:
        rows: list[tuple[Paper, str, list[tuple[str, int, str]]]] = []
        ids: list[str] = []
        texts: list[str] = []
        metas: list[dict] = []
        for paper, h in batch:
            chunks = chunker.split(paper.abstract) or [paper.abstract]
            crow = []
            for j, c in enumerate(chunks):
                cid = chunk_id(paper, h, j)
                crow.append((cid, j, c))
                ids.append(cid)
                texts.append(embed_text(paper, c))
                metas.append(chunk_metadata(paper, j))
            rows.append((paper, h, crow))
        vecs = embedder.embed_texts(texts)
        stale = self.catalog.chunk_ids(p.paper_id for p, _ in batch)
        owner = np.array([m["paper_id"] for m in metas])
        centroids = []
        for paper, _ in batch:
            c = vecs[owner == paper.paper_id].mean(axis=0)
            centroids.append((c / (np.linalg.norm(c) + 1e-12)).tolist())
        # Order matters for resumability: vectors first, then the catalog
        # (atomic), then the stale vectors. A crash anywhere leaves a usable index.
        self.collection.upsert(ids=ids, embeddings=vecs.tolist(), metadatas=metas, documents=texts)
        self.paper_collection.upsert(
            ids=[p.paper_id for p, _ in batch],
            embeddings=centroids,
            metadatas=[chunk_metadata(p, 0) for p, _ in batch],
        )
        self.catalog.commit_papers(rows)
        fresh = set(ids)
        stale = [c for c in stale if c not in fresh]
        if stale:
            self.collection.delete(ids=stale)

    def _delete_papers(self, paper_ids: list[str]) -> None:
        if not paper_ids:
            return
        ids = self.catalog.chunk_ids(paper_ids)
        self.catalog.delete_papers(paper_ids)
        for i in range(0, len(ids), 5000):
            self.collection.delete(ids=ids[i : i + 5000])
        for i in range(0, len(paper_ids), 5000):
            self.paper_collection.delete(ids=paper_ids[i : i + 5000])

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
            for i in range(0, len(orphans), 5000):
                coll.delete(ids=orphans[i : i + 5000])

    # --- BM25 ---
    @property
    def lexical_dir(self) -> Path:
        return self.settings.data_dir / "bm25"

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
        res = coll.query(
            query_embeddings=[vec.tolist()],
            n_results=n,
            where=where or None,
            include=["distances"],
        )
        return [(cid, 1.0 - float(d)) for cid, d in zip(res["ids"][0], res["distances"][0], strict=True)]


def _backend_of(model: object) -> str:
    """What computed the vectors: ``backend_name`` when the model has one."""
    b = getattr(model, "backend_name", None)
    if isinstance(b, str):
        return b
    name = type(model).__name__
    return {"HuggingFaceEmbedding": "torch-fp32 (sentence-transformers)"}.get(name, name)


def _precision_message(data_dir: str, built: str, configured: str, backend: str | None) -> str:
    """Same MiniLM weights, vectors of another precision: say which setting to flip."""
    from rag.embed import INT8_SUFFIX

    how = f" ({backend})" if backend else ""
    if built.endswith(INT8_SUFFIX):
        return (f"The index in {data_dir} was built with int8-quantized MiniLM vectors{how}, "
                "but fp32 vectors are configured and the two must not be mixed: set "
                "AQA_EMBED_BACKEND=onnx AQA_EMBED_PRECISION=int8, or re-ingest with "
                "`aqa ingest --rebuild`.")
    return (f"The index in {data_dir} was built with fp32 MiniLM vectors{how}, but "
            "AQA_EMBED_PRECISION=int8 is configured and int8 vectors differ: re-ingest with "
            "`aqa ingest --rebuild`, or set AQA_EMBED_PRECISION=fp32.")


def chunk_metadata(paper: Paper, idx: int) -> dict:
    # Chroma metadata values cannot be None: leave missing fields out.
    m: dict = {"paper_id": paper.paper_id, "source": paper.source, "idx": idx}
    if paper.venue:
        m["venue"] = paper.venue
    if paper.year:
        m["year"] = int(paper.year)
    return m


def _progress(total: int, enabled: bool):
    """tqdm bar on stderr for long ingests; a no-op for small ones."""
    if not enabled or total < 64:
        return lambda n, close=False: None
    from tqdm import tqdm

    bar = tqdm(total=total, unit="paper", desc="Embedding")

    def step(n: int, close: bool = False) -> None:
        bar.update(n)
        if close:
            bar.close()

    return step
