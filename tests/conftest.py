"""Shared fixtures. Unit tests use ``FakeEmbedding``/``FakeLLM``; integration
tests use the real bundled MiniLM, real Chroma and real local GGUF models.

Both fakes are registered as providers named ``fake`` (``rag.providers``), so
``Settings(llm_provider="fake", embed_provider="fake")`` builds an engine on
them by name, as the real providers are built; ``fake_llm_provider`` hands a
test the ``FakeLLM`` that the ``fake`` LLM provider makes.

Nothing heavy is imported here: ``FakeEmbedding`` (a llama_index embedding)
is built on first use, so ``pytest -m "not slow"`` loads no model library
that its tests do not need."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from functools import cache
from pathlib import Path

import pytest

from rag.config import BUNDLED_CORPUS, Settings, get_settings, setup_offline_env
from rag.providers import register_embedding, register_llm
from tests.fakes import FakeLLM

setup_offline_env()  # as every entry point does, before any model library is imported

REPO = Path(__file__).resolve().parent.parent

# The caller's shell must not change what the tests see: every AQA_*/OPENAI_*
# variable is removed for each test (and .env files are not read), except the
# knobs of the test suite itself and the location of the downloaded models.
_ENV_PREFIXES = ("AQA_", "OPENAI_")
_ENV_KEEP = frozenset({"AQA_MODEL_CACHE_DIR", "AQA_UI_TEST_MODEL", "AQA_UI_README_SHOTS"})


@pytest.fixture(scope="session", autouse=True)
def _no_env_file():
    """``Settings()`` anywhere in a test process ignores ``.env``."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(Settings.model_config, "env_file", None)
        get_settings.cache_clear()
        yield


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch):
    for name in list(os.environ):
        if name.startswith(_ENV_PREFIXES) and name not in _ENV_KEEP:
            monkeypatch.delenv(name)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


@cache
def _fake_embedding_class() -> type:
    import numpy as np
    from llama_index.core.base.embeddings.base import BaseEmbedding

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

    return FakeEmbedding


def _fake_llm(settings: Settings) -> FakeLLM:
    return FakeLLM("")


register_llm("fake", _fake_llm, replace=True)
register_embedding("fake", lambda settings: _fake_embedding_class()(), replace=True)


@pytest.fixture
def fake_llm_provider():
    """``llm_provider="fake"`` makes this test's ``FakeLLM``: set its ``reply``
    or ``fn``, read its ``calls``."""
    llm = FakeLLM("")
    register_llm("fake", lambda settings: llm, replace=True)
    yield llm
    register_llm("fake", _fake_llm, replace=True)


def __getattr__(name: str):
    """``from tests.conftest import FakeEmbedding`` builds the class then."""
    if name == "FakeEmbedding":
        return _fake_embedding_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@pytest.fixture
def fake_settings(tmp_path: Path) -> Settings:
    return Settings(_env_file=None, data_dir=tmp_path / "idx", corpus_paths=[BUNDLED_CORPUS])


# Settings that change what an ingest writes: with one of these overridden,
# fake_engine ingests from scratch instead of copying the session's index.
_INDEX_FIELDS = frozenset({
    "collection", "corpus_paths", "chunk_tokens", "chunk_overlap", "dedup_threshold",
    "embed_provider", "embed_model", "embed_batch_size", "embed_backend", "embed_precision",
})


@pytest.fixture(scope="session")
def fake_index_dir(tmp_path_factory) -> Path:
    """The bundled corpus ingested once per session with fake embeddings."""
    from rag.engine import Engine

    d = tmp_path_factory.mktemp("fake_idx") / "idx"
    s = Settings(_env_file=None, data_dir=d, corpus_paths=[BUNDLED_CORPUS])
    Engine(s, embed_model=_fake_embedding_class()()).ingest(progress=False)
    return d


@pytest.fixture
def fake_engine(fake_settings, fake_index_dir):
    """Engine over the bundled corpus with fake embeddings; pass llm= per test.
    It starts from a copy of the session's fake index (the ingest then finds
    every paper unchanged), so each test gets a private, fully built index."""
    from rag.engine import Engine

    def make(llm=None, **over):
        # A hand-set decision (tests/decision_unit.json), so that unit tests do
        # not move when the product's decision is refit on eval data.
        s = fake_settings.updated(**{"relevance_floor": 0.0, "decision_file": UNIT_DECISION, **over})
        if not _INDEX_FIELDS & set(over) and not s.storage.data_dir.exists():
            shutil.copytree(fake_index_dir, s.storage.data_dir)
        eng = Engine(s, llm=llm, embed_model=_fake_embedding_class()())
        eng.ingest(progress=False)
        return eng

    return make


UNIT_DECISION = Path(__file__).resolve().parent / "decision_unit.json"


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
