"""Providers behind one interface: the engine asks ``rag.providers`` for an
LLM or an embedding model by name; tests register fakes (tests/conftest.py)
instead of patching private attributes."""

from __future__ import annotations

import shutil
import threading

import pytest
from pydantic import ValidationError

from rag.config import Settings
from rag.errors import AqaError
from rag.providers import EMBED_PROVIDERS, LLM_PROVIDERS, Registry
from rag.types import Filters


def test_builtin_providers_are_registered_by_name():
    assert {"local", "openai"} <= set(LLM_PROVIDERS.names())
    assert {"minilm", "wordllama", "openai"} <= set(EMBED_PROVIDERS.names())


def test_builtins_are_imported_only_when_made():
    """Registered by dotted path: the registry resolves them on demand."""
    from rag.llm import LocalLLM, OpenAILLM

    assert LLM_PROVIDERS.factory("local") is LocalLLM
    assert LLM_PROVIDERS.factory("openai") is OpenAILLM


def test_make_llm_builds_the_named_provider(tmp_path):
    from rag.llm import LocalLLM, OpenAILLM, make_llm

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"")  # LocalLLM only loads it on first use
    local = make_llm(Settings(_env_file=None, llm_provider="local", local_model_path=gguf))
    assert isinstance(local, LocalLLM) and local.name == "local:m.gguf"
    remote = make_llm(Settings(_env_file=None, openai_base_url="http://127.0.0.1:9/v1"))
    assert isinstance(remote, OpenAILLM)  # auto: a base URL means the OpenAI client


def test_a_registered_fake_is_chosen_by_name(fake_llm_provider):
    from rag.llm import make_llm

    assert make_llm(Settings(_env_file=None, llm_provider="fake")) is fake_llm_provider


def test_unknown_provider_names_the_known_ones():
    with pytest.raises(ValidationError, match="auto, fake, local, openai"):
        Settings(_env_file=None, llm_provider="nope")
    with pytest.raises(ValidationError, match="fake, minilm, openai, wordllama"):
        Settings(_env_file=None, embed_provider="nope")
    with pytest.raises(AqaError, match="Unknown LLM provider 'nope'.*local, openai"):
        LLM_PROVIDERS.create("nope", Settings(_env_file=None))


def test_registry_refuses_a_silent_overwrite():
    reg: Registry[str] = Registry("test", "AQA_TEST")
    reg.register("a", lambda s: "one")
    with pytest.raises(ValueError, match="already registered"):
        reg.register("a", lambda s: "two")
    reg.register("a", lambda s: "two", replace=True)
    assert reg.create("a", Settings(_env_file=None)) == "two"
    reg.unregister("a")
    assert "a" not in reg


def test_embedding_providers_by_name():
    from rag.embed import embed_model_name, make_embed_model

    s = Settings(_env_file=None, embed_provider="fake")
    assert make_embed_model(s).model_name == "fake"
    assert embed_model_name(s) == "fake"  # a registered provider is recorded by its name
    with pytest.raises(AqaError, match="int8 needs AQA_EMBED_BACKEND=onnx"):
        make_embed_model(Settings(_env_file=None, embed_precision="int8", embed_backend="torch"))


def test_engine_on_fake_providers_by_name(fake_index_dir, tmp_path, fake_llm_provider):
    """No private attribute patched: the settings name the fakes."""
    from rag.engine import Engine

    d = tmp_path / "idx"
    shutil.copytree(fake_index_dir, d)
    eng = Engine(Settings(_env_file=None, data_dir=d, llm_provider="fake",
                          embed_provider="fake", relevance_floor=0.0))
    fake_llm_provider.reply = "They differ [1][2]."
    c = eng.compare(query="prompt injection attacks on LLM agents")
    assert c.model == "fake" and fake_llm_provider.calls
    assert eng.search("prompt injection", k=3)
    assert eng.status().llm_model == "fake"


def test_warm_loads_the_llm_through_its_public_load(fake_engine):
    class Loadable:
        name = "loadable"

        def __init__(self) -> None:
            self.loaded = threading.Event()

        def load(self) -> None:
            self.loaded.set()

        def stream_chat(self, messages, **kw):
            yield ""

    llm = Loadable()
    fake_engine(llm=llm).warm()
    assert llm.loaded.is_set()


def test_papers_filters_through_the_public_paper_ok(fake_engine):
    from rag.retrieve import HybridRetriever

    eng = fake_engine()
    every = eng.papers()
    one = every[0]
    assert eng.papers(filters=Filters(paper_ids=[one.paper_id])) == [one]
    assert all(HybridRetriever.paper_ok(p, None) for p in every)
    assert not hasattr(eng, "sources")  # dead code removed (status() has the counts)


def test_search_and_papers_apply_the_min_score_cut_off(fake_engine):
    """The explorer's cut-off is the engine's: matches scoring below
    ``min_score`` are left out, and counted."""
    eng = fake_engine()
    q = "guardrail agent safety policies"
    every = eng.search(q, k=10)
    assert every.below_min_score == 0 and len(every) == 10
    cut = (every[0].score + every[-1].score) / 2
    kept = eng.search(q, k=10, min_score=cut)
    assert kept == [h for h in every if h.score >= cut] and 0 < len(kept) < 10
    assert kept.below_min_score == 10 - len(kept)
    assert eng.papers(q, limit=10, min_score=cut) == [h.paper for h in kept]
    assert eng.papers(q, limit=10) == [h.paper for h in every]
    assert len(eng.papers(min_score=0.99)) == len(eng.papers())  # no query: no cut-off
