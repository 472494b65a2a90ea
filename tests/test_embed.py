"""Embedding models and the content-hash cache."""

from __future__ import annotations

import numpy as np
import pytest

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


def test_a_question_is_embedded_once_per_answer(tmp_path):
    calls: list[str] = []

    class Counting(FakeEmbedding):
        def _get_query_embedding(self, query: str) -> list[float]:
            calls.append(query)
            return super()._get_query_embedding(query)

    emb = CachedEmbedder(Counting(), "fake", EmbeddingCache(tmp_path / "c.sqlite"), query_cache=2)
    a = emb.embed_query("which papers defend agents?")
    b = emb.embed_query("which papers defend agents?")
    assert calls == ["which papers defend agents?"] and np.array_equal(a, b)
    with pytest.raises(ValueError):  # shared between callers: read-only
        a[0] = 1.0
    emb.embed_query("two")
    emb.embed_query("three")  # the oldest is dropped beyond query_cache
    emb.embed_query("which papers defend agents?")
    assert len(calls) == 4
    off = CachedEmbedder(Counting(), "fake", EmbeddingCache(tmp_path / "c.sqlite"))
    off.embed_query("x")
    off.embed_query("x")
    assert calls[-2:] == ["x", "x"]


def test_wordllama_static_model_works_offline(tmp_path):
    """The fast option for very large corpora: bundled weights, no download."""
    eng = Engine(Settings(_env_file=None, data_dir=tmp_path / "idx", embed_provider="wordllama"))
    rep = eng.ingest([BUNDLED_CORPUS], progress=False)
    assert rep.papers_added == 57 and eng.status().embed_model == "wordllama-l2-supercat"
    hits = eng.search("guardrail agent that verifies safety policy compliance of agent actions", k=3)
    assert any(h.paper.title.startswith("ShieldAgent") for h in hits)


# --- ONNX Runtime backend (issue 10) -------------------------------------------------

def _fake_index(tmp_path, model_name: str):
    emb = FakeEmbedding()
    object.__setattr__(emb, "model_name", model_name)
    eng = Engine(Settings(_env_file=None, data_dir=tmp_path / "idx"), embed_model=emb)
    eng.ingest([BUNDLED_CORPUS], progress=False)


def test_switching_int8_and_fp32_is_a_clear_model_change(tmp_path):
    import pytest

    from rag.errors import IndexMismatchError

    _fake_index(tmp_path, "all-MiniLM-L6-v2+onnx-int8")
    fp32 = Engine(Settings(_env_file=None, data_dir=tmp_path / "idx", embed_backend="onnx",
                           embed_precision="fp32"))
    with pytest.raises(IndexMismatchError, match="int8-quantized.*AQA_EMBED_PRECISION=int8"):
        fp32.search("agents")
    torch = Engine(Settings(_env_file=None, data_dir=tmp_path / "idx", embed_backend="torch",
                            embed_precision="fp32"))
    with pytest.raises(IndexMismatchError, match="ingest --rebuild"):
        torch.search("agents")


def test_fp32_index_refuses_int8_but_accepts_either_fp32_backend(tmp_path):
    import pytest

    from rag.errors import IndexMismatchError

    _fake_index(tmp_path, "all-MiniLM-L6-v2")
    int8 = Engine(Settings(_env_file=None, data_dir=tmp_path / "idx", embed_backend="onnx",
                           embed_precision="int8"))
    with pytest.raises(IndexMismatchError, match="int8 vectors differ"):
        int8.index.check_model(int8.embed_name)
    # int8 is the default: an fp32 index asks for a re-ingest, in one line that
    # says why and how to keep it instead.
    default = Engine(Settings(_env_file=None, data_dir=tmp_path / "idx"))
    with pytest.raises(IndexMismatchError, match=r"the default.*ingest --rebuild.*"
                                                 r"AQA_EMBED_PRECISION=fp32"):
        default.index.check_model(default.embed_name)
    for backend in ("onnx", "torch"):  # same vectors: same name, no re-ingest
        e = Engine(Settings(_env_file=None, data_dir=tmp_path / "idx", embed_backend=backend,
                            embed_precision="fp32"))
        e.index.check_model(e.embed_name)


@pytest.mark.slow
def test_onnx_export_is_cached_hash_checked_and_matches_torch(tmp_path, caplog):
    from rag import embed_onnx
    from rag.embed import make_embed_model

    cache = tmp_path / "cache"
    n0 = embed_onnx.export_count()
    a = embed_onnx.OnnxMiniLM(cache, "fp32", threads=2, workers=1)
    assert embed_onnx.export_count() == n0 + 1
    embed_onnx.OnnxMiniLM(cache, "fp32", threads=1, workers=1)  # second load: cached file
    assert embed_onnx.export_count() == n0 + 1

    texts = [p for p in bench_texts()]
    torch_model = make_embed_model(Settings(_env_file=None, embed_backend="torch",
                                            embed_precision="fp32"))
    ref = np.asarray(torch_model.get_text_embedding_batch(texts))
    got = a.encode(texts)
    assert (got * ref).sum(axis=1).min() > 0.999
    q = "guardrail agent enforcing safety policies"
    assert float(np.dot(a.encode([q])[0], torch_model.get_query_embedding(q))) > 0.999
    # Another batch size gives the same vectors (up to float noise).
    small = embed_onnx.OnnxMiniLM(cache, "fp32", threads=1, embed_batch_size=3)
    assert np.allclose(small.encode(texts), got, atol=1e-5)

    # A damaged cached file fails its hash check and is exported again.
    f = embed_onnx.onnx_model_file(cache, "fp32")
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF
    f.write_bytes(bytes(data))
    embed_onnx.OnnxMiniLM(cache, "fp32", threads=1)
    assert embed_onnx.export_count() == n0 + 2

    # int8: close to fp32, and a text's vector never depends on its batch mates
    # (two single-thread workers side by side).
    caplog.clear()
    q8 = embed_onnx.OnnxMiniLM(cache, "int8", threads=2, workers=2)
    # The first run's quantization logs no hint at the user (issue #29, item 10).
    assert not [r for r in caplog.records if "pre-processing" in r.getMessage()]
    # An engine given the model itself files its vectors under the int8 name.
    assert (q8.model_name, a.model_name) == ("all-MiniLM-L6-v2+onnx-int8", "all-MiniLM-L6-v2")
    v8 = q8.encode(texts)
    assert (v8 * ref).sum(axis=1).mean() > 0.98
    assert np.array_equal(q8.encode(texts[1:2]), v8[1:2])
    # ... nor on which worker took it: one worker alone gives the same vectors.
    one = embed_onnx.OnnxMiniLM(cache, "int8", threads=1, workers=1)
    assert np.array_equal(one.encode(texts), v8)


def bench_texts() -> list[str]:
    from eval.bench import bundled_abstracts

    return bundled_abstracts()[:6] + ["a short one", "CNN"]
