"""Named presets (rag/presets/NAME.env), chosen by ``--preset`` or ``AQA_PRESET``.
Precedence: explicit arguments > environment > .env > preset > defaults."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from dotenv import dotenv_values

from rag.cli import build_parser, main, settings_for
from rag.config import SECTION_OF, Settings, preset_file, preset_names, presets_dir
from rag.errors import AqaError

REPO = Path(__file__).resolve().parent.parent


def test_bundled_presets_exist_and_name_real_settings():
    assert {"fast-ingest", "openai", "quality"} <= set(preset_names())
    for name in preset_names():
        text = preset_file(name).read_text(encoding="utf-8")
        assert text.startswith(f"# Preset {name}:"), name  # each file says what it is for
        keys = dotenv_values(preset_file(name))
        assert keys, name
        for key in keys:
            assert key.startswith("AQA_") and key[4:].lower() in SECTION_OF, (name, key)
            assert key != "AQA_PRESET" and "KEY" not in key, (name, key)
        Settings(_env_file=None, preset=name)  # every value is valid


def test_a_preset_applies():
    s = Settings(_env_file=None, preset="fast-ingest")
    assert s.embeddings.embed_provider == "wordllama"
    s = Settings(_env_file=None, preset="openai")
    assert (s.llm.llm_provider, s.llm.openai_model) == ("openai", "gpt-4o-mini")
    assert s.embeddings.embed_provider == "minilm" and s.retrieval.top_k == 5  # the rest: defaults


def test_env_and_dotenv_beat_the_preset(monkeypatch, tmp_path):
    monkeypatch.setenv("AQA_PRESET", "openai")
    assert Settings(_env_file=None).llm.llm_provider == "openai"  # AQA_PRESET chooses it
    monkeypatch.setenv("AQA_LLM_PROVIDER", "local")
    s = Settings(_env_file=None)
    assert (s.llm.llm_provider, s.llm.openai_model) == ("local", "gpt-4o-mini")
    monkeypatch.delenv("AQA_LLM_PROVIDER")
    env = tmp_path / ".env"
    env.write_text("AQA_OPENAI_MODEL=from-dotenv\n", encoding="utf-8")
    s = Settings(_env_file=env)
    assert (s.llm.llm_provider, s.llm.openai_model) == ("openai", "from-dotenv")
    assert Settings(_env_file=None, openai_model="explicit").llm.openai_model == "explicit"


def test_the_preset_can_be_chosen_in_dotenv(tmp_path):
    env = tmp_path / ".env"
    env.write_text("AQA_PRESET=fast-ingest\n", encoding="utf-8")
    assert Settings(_env_file=env).embeddings.embed_provider == "wordllama"


def test_unknown_preset_is_a_clear_error(monkeypatch, capsys):
    with pytest.raises(AqaError, match="Unknown preset 'nope'.*fast-ingest, openai, quality"):
        Settings(_env_file=None, preset="nope")
    monkeypatch.setenv("AQA_PRESET", "../etc/passwd")
    with pytest.raises(AqaError, match="Unknown preset"):
        Settings(_env_file=None)
    monkeypatch.delenv("AQA_PRESET")
    assert main(["status", "--preset", "nope"], registrars=()) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: Unknown preset 'nope'") and "quality" in err


def test_cli_preset_option(monkeypatch, tmp_path):
    args = build_parser(()).parse_args(["ask", "q?", "--preset", "fast-ingest"])
    assert settings_for(args).embeddings.embed_provider == "wordllama"
    monkeypatch.setenv("AQA_PRESET", "fast-ingest")
    args = build_parser(()).parse_args(["status", "--preset", "openai"])
    s = settings_for(args)  # the flag chooses over AQA_PRESET
    assert (s.llm.llm_provider, s.embeddings.embed_provider) == ("openai", "minilm")
    args = build_parser(()).parse_args(["status", "--data-dir", str(tmp_path)])
    assert settings_for(args).embeddings.embed_provider == "wordllama"


def test_old_local_model_name_is_an_alias(monkeypatch):
    assert Settings(_env_file=None).llm.local_model == "qwen2.5-coder-1.5b"
    s = Settings(_env_file=None, local_model="qwen2.5-1.5b")
    assert s.llm.local_model == "qwen2.5-coder-1.5b"
    monkeypatch.setenv("AQA_LOCAL_MODEL", "qwen2.5-1.5b")
    assert Settings(_env_file=None).llm.local_model == "qwen2.5-coder-1.5b"


def test_presets_are_package_data():
    assert presets_dir().is_dir()
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    setuptools = cfg["tool"]["setuptools"]
    assert "rag.presets" in setuptools["packages"]
    assert "*.env" in setuptools["package-data"]["rag.presets"]


def test_env_example_documents_presets():
    text = (REPO / ".env.example").read_text(encoding="utf-8")
    assert "\n# AQA_PRESET=" in text or "\nAQA_PRESET=" in text
