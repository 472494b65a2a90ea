"""Shared fixtures. Unit tests use ``FakeEmbedding``/``FakeLLM``; integration
tests use the real bundled MiniLM, real Chroma and real local GGUF models."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from llama_index.core.base.embeddings.base import BaseEmbedding  # noqa: E402

import rag  # noqa: E402,F401  (sets the offline environment first)
from rag.config import BUNDLED_CORPUS, Settings  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


class FakeEmbedding(BaseEmbedding):
    """Hashed bag of words: deterministic and instant; similar texts get
    similar vectors, which is all unit tests of the plumbing need."""

    def __init__(self, dim: int = 256, **kw) -> None:
        super().__init__(model_name="fake", embed_batch_size=64, **kw)
        self._dim = dim

    def _vec(self, text: str) -> list[float]:
        v = np.zeros(self._dim, dtype=np.float32)
        for w in re.findall(r"[a-z0-9]+", text.lower()):
            v[int(hashlib.md5(w.encode()).hexdigest(), 16) % self._dim] += 1.0
        n = np.linalg.norm(v)
        return (v / n if n else v).tolist()

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vec(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vec(text)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vec(query)


@pytest.fixture
def fake_settings(tmp_path: Path) -> Settings:
    return Settings(_env_file=None, data_dir=tmp_path / "idx", corpus_paths=[BUNDLED_CORPUS])


@pytest.fixture
def fake_engine(fake_settings):
    """Engine over the bundled corpus with fake embeddings; pass llm= per test."""
    from rag.engine import Engine

    def make(llm=None, **over):
        s = fake_settings.model_copy(update={"relevance_floor": 0.0, **over})
        eng = Engine(s, llm=llm, embed_model=FakeEmbedding())
        eng.ingest(progress=False)
        return eng

    return make


@pytest.fixture(scope="session")
def real_index_dir(tmp_path_factory) -> Path:
    """The bundled corpus ingested once per session with the real MiniLM."""
    from rag.engine import Engine

    d = tmp_path_factory.mktemp("real_idx")
    eng = Engine(Settings(_env_file=None, data_dir=d, local_model="smollm2-135m"))
    eng.ingest(progress=False)
    return d


@pytest.fixture
def real_engine(real_index_dir, tmp_path):
    """A real-MiniLM engine on a private copy of the session index."""
    from rag.engine import Engine

    d = tmp_path / "idx"
    shutil.copytree(real_index_dir, d)
    return Engine(Settings(_env_file=None, data_dir=d, local_model="smollm2-135m"))
