"""Settings in sections (``settings.retrieval.top_k``), read under the flat env
names (AQA_TOP_K, the documented ones) and the nested ones (AQA_RETRIEVAL__TOP_K),
from the environment, ``.env``, presets and keyword arguments."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from rag.config import SECTION_OF, SECTIONS, RetrievalSettings, Settings

REPO = Path(__file__).resolve().parent.parent


def test_nested_attribute_access():
    s = Settings(_env_file=None)
    assert set(type(s).model_fields) == {"preset", *SECTIONS}
    assert s.retrieval.top_k == 5 and s.storage.data_dir == Path(".aqa")
    assert s.llm.llm_provider == "auto" and s.llm.resolved_provider == "local"
    assert s.ui.ui_min_score == 0.35 and s.evidence.generic_name_papers == 3
    assert s.llm_concurrency == 1
    for name, section in SECTION_OF.items():  # every setting lives in exactly one section
        assert name in SECTIONS[section].model_fields
    assert s.flat()["top_k"] == 5 and set(s.flat()) == set(SECTION_OF)


def test_flat_env_names(monkeypatch):
    monkeypatch.setenv("AQA_TOP_K", "7")
    monkeypatch.setenv("AQA_DATA_DIR", "/tmp/somewhere")
    monkeypatch.setenv("AQA_CORPUS_PATHS", '["a", "b"]')
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("AQA_OPENAI_BASE_URL", "http://x/v1")
    s = Settings(_env_file=None)
    assert s.retrieval.top_k == 7 and s.storage.data_dir == Path("/tmp/somewhere")
    assert s.corpus.corpus_paths == [Path("a"), Path("b")]
    assert (s.llm.openai_api_key, s.llm.openai_base_url) == ("sk-test", "http://x/v1")
    assert s.llm.resolved_provider == "openai"


def test_nested_env_names(monkeypatch):
    monkeypatch.setenv("AQA_RETRIEVAL__TOP_K", "8")
    monkeypatch.setenv("AQA_LLM__OPENAI_API_KEY", "sk-nested")
    monkeypatch.setenv("AQA_UI__PORT", "9001")
    s = Settings(_env_file=None)
    assert (s.retrieval.top_k, s.llm.openai_api_key, s.ui.port) == (8, "sk-nested", 9001)
    monkeypatch.setenv("AQA_TOP_K", "3")  # both forms: the nested name wins
    monkeypatch.setenv("AQA_CANDIDATE_K", "40")  # ...and they combine in one section
    s = Settings(_env_file=None)
    assert (s.retrieval.top_k, s.retrieval.candidate_k) == (8, 40)
    assert Settings(_env_file=None, top_k=2).retrieval.top_k == 2  # arguments beat both


def test_unknown_nested_name_is_an_error(monkeypatch):
    monkeypatch.setenv("AQA_RETRIEVAL__TOPK", "3")
    with pytest.raises(ValidationError, match=r"retrieval\.topk"):
        Settings(_env_file=None)


def test_flat_and_section_keyword_arguments(tmp_path):
    s = Settings(_env_file=None, top_k=3, data_dir=tmp_path, openai_model="m")
    assert (s.retrieval.top_k, s.storage.data_dir, s.llm.openai_model) == (3, tmp_path, "m")
    s = Settings(_env_file=None, retrieval={"top_k": 4}, candidate_k=9)
    assert (s.retrieval.top_k, s.retrieval.candidate_k) == (4, 9)
    s = Settings(_env_file=None, retrieval=RetrievalSettings(top_k=6))
    assert s.retrieval.top_k == 6 and s.retrieval.candidate_k == 30
    assert Settings.model_validate({"top_k": 11}).retrieval.top_k == 11
    with pytest.raises(ValidationError):
        Settings(_env_file=None, top_k="many")


def test_dotenv_file(monkeypatch, tmp_path):
    env = tmp_path / ".env"
    env.write_text("AQA_TOP_K=6\nAQA_RETRIEVAL__CANDIDATE_K=12\nOPENAI_BASE_URL=http://d/v1\n"
                   "AQA_UI__UI_MIN_SCORE=0.5\nAQA_NOT_A_SETTING=1\n", encoding="utf-8")
    s = Settings(_env_file=env)
    assert (s.retrieval.top_k, s.retrieval.candidate_k) == (6, 12)
    assert s.llm.openai_base_url == "http://d/v1" and s.ui.ui_min_score == 0.5
    monkeypatch.setenv("AQA_TOP_K", "2")  # the environment beats .env
    monkeypatch.setenv("AQA_RETRIEVAL__CANDIDATE_K", "13")
    s = Settings(_env_file=env)
    assert (s.retrieval.top_k, s.retrieval.candidate_k, s.ui.ui_min_score) == (2, 13, 0.5)


def test_preset_precedence(monkeypatch, tmp_path):
    # the preset sets AQA_EMBED_PROVIDER=wordllama (flat name, as every preset does)
    assert Settings(_env_file=None, preset="fast-ingest").embeddings.embed_provider == "wordllama"
    env = tmp_path / ".env"
    env.write_text("AQA_PRESET=fast-ingest\nAQA_EMBEDDINGS__EMBED_PROVIDER=minilm\n",
                   encoding="utf-8")
    assert Settings(_env_file=env).embeddings.embed_provider == "minilm"  # .env beats the preset
    env.write_text("AQA_PRESET=fast-ingest\n", encoding="utf-8")
    monkeypatch.setenv("AQA_EMBEDDINGS__EMBED_PROVIDER", "minilm")  # so does the environment
    assert Settings(_env_file=env).embeddings.embed_provider == "minilm"
    monkeypatch.delenv("AQA_EMBEDDINGS__EMBED_PROVIDER")
    s = Settings(_env_file=env, embed_provider="minilm")  # and an argument
    assert s.embeddings.embed_provider == "minilm" and s.preset == "fast-ingest"
    assert Settings(_env_file=env).embeddings.embed_provider == "wordllama"


def test_updated(tmp_path):
    s = Settings(_env_file=None)
    t = s.updated(top_k="3", data_dir=str(tmp_path), ui_timeout=5)
    assert (t.retrieval.top_k, t.storage.data_dir, t.ui.ui_timeout) == (3, tmp_path, 5.0)
    assert t.retrieval.candidate_k == s.retrieval.candidate_k  # the rest is kept
    assert (s.retrieval.top_k, s.storage.data_dir, s.ui.ui_timeout) == (5, Path(".aqa"), 300.0)
    assert s.updated(retrieval={"top_k": 4}).retrieval.top_k == 4
    with pytest.raises(ValidationError):
        s.updated(top_k="many")
    with pytest.raises(TypeError, match="topk"):
        s.updated(topk=3)


def test_flat_attribute_reads_are_gone():
    """Code reads settings by section (``s.retrieval.top_k``); a flat read is an error."""
    s = Settings(_env_file=None, top_k=4)
    assert s.retrieval.top_k == 4
    with pytest.raises(AttributeError):
        _ = s.top_k
    assert "top_k" not in Settings.model_fields


def test_env_example_documents_every_setting_in_its_section():
    """Each setting appears in .env.example under its section's header, with
    a one-line comment, under its flat (documented) env name."""
    section, seen, comment = None, {}, False
    for line in (REPO / ".env.example").read_text(encoding="utf-8").splitlines():
        header = re.match(r"# --- (\w+)\b.* ---$", line)
        if header:
            section, comment = header.group(1), False
            continue
        setting = re.match(r"#? ?(AQA_|(?=OPENAI_))([A-Z0-9_]+)=", line)
        if setting:
            name = setting.group(2).lower()
            seen[name] = section
            assert comment, f"{line!r} has no comment line above it"
            continue
        comment = line.startswith("# ") and not line.startswith("# ---")
    assert set(SECTIONS) | {"preset"} >= set(seen.values())
    assert seen.pop("preset") == "preset"
    assert seen == SECTION_OF  # every setting, each in its own section, nothing else
