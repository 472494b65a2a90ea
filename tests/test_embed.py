"""Embedding models and the content-hash cache."""

from __future__ import annotations

import numpy as np

from rag.config import BUNDLED_CORPUS, Settings
from rag.embed import CachedEmbedder, EmbeddingCache
from rag.engine import Engine
from tests.conftest import FakeEmbedding


def test_cache_embeds_each_text_once(tmp_path):
    cache = EmbeddingCache(tmp_path / "c.sqlite")
    emb = CachedEmbedder(FakeEmbedding(), "fake", cache)
    a = emb.embed_texts(["alpha beta", "gamma", "alpha beta"])
    assert (emb.hits, emb.misses) == (1, 2)
    again = CachedEmbedder(FakeEmbedding(), "fake", EmbeddingCache(tmp_path / "c.sqlite"))
    b = again.embed_texts(["gamma", "alpha beta"])
    assert again.misses == 0 and np.allclose(b, a[[1, 0]])
    other = CachedEmbedder(FakeEmbedding(), "other-model", cache)  # keyed by model too
    other.embed_texts(["gamma"])
    assert other.misses == 1


def test_wordllama_static_model_works_offline(tmp_path):
    """The fast option for very large corpora: bundled weights, no download."""
    eng = Engine(Settings(_env_file=None, data_dir=tmp_path / "idx", embed_provider="wordllama"))
    rep = eng.ingest([BUNDLED_CORPUS], progress=False)
    assert rep.papers_added == 57 and eng.status().embed_model == "wordllama-l2-supercat"
    hits = eng.search("guardrail agent that verifies safety policy compliance of agent actions", k=3)
    assert "ShieldAgent" in [h.paper.title for h in hits]
