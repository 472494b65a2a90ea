"""Settings in sections (``settings.retrieval.top_k``), read under one env name
each (AQA_TOP_K; OPENAI_API_KEY/OPENAI_BASE_URL for the OpenAI ones) from the
environment, ``.env``, presets and keyword arguments; ``.env.example`` is
generated from the fields' descriptions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from platformdirs import user_data_path
from pydantic import ValidationError

from rag.config import SECTION_OF, SECTIONS, Settings, env_example, env_name
from rag.config_sections import TUNED, RetrievalSettings

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA_DIR = user_data_path("abstracts-qa") / "index"


def test_the_default_index_is_per_user_not_per_working_directory(tmp_path, monkeypatch):
    """Issue #29, item 6: `aqa status` from another folder finds the same index."""
    monkeypatch.chdir(tmp_path)
    d = Settings(_env_file=None).storage.data_dir
    assert d.is_absolute() and d == DEFAULT_DATA_DIR and tmp_path not in d.parents
    monkeypatch.setenv("AQA_DATA_DIR", "~/idx-x")
    assert Settings(_env_file=None).storage.data_dir == Path.home() / "idx-x"


def test_nested_attribute_access():
    s = Settings(_env_file=None)
    assert set(type(s).model_fields) == {"preset", *SECTIONS}
    assert s.retrieval.top_k == 5 and s.storage.data_dir == DEFAULT_DATA_DIR
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
    monkeypatch.setenv("AQA_EVIDENCE_CHECK", "false")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("AQA_OPENAI_BASE_URL", "http://x/v1")
    s = Settings(_env_file=None)
    assert s.retrieval.top_k == 7 and s.storage.data_dir == Path("/tmp/somewhere")
    assert s.corpus.corpus_paths == [Path("a"), Path("b")] and s.evidence.evidence_check is False
    assert (s.llm.openai_api_key, s.llm.openai_base_url) == ("sk-test", "http://x/v1")
    assert s.llm.resolved_provider == "openai"
    assert Settings(_env_file=None, openai_api_key="sk-arg").llm.openai_api_key == "sk-arg"


def test_one_env_name_per_setting(monkeypatch):
    """The nested form (AQA_RETRIEVAL__TOP_K) and a whole section as JSON are not read."""
    monkeypatch.setenv("AQA_RETRIEVAL__TOP_K", "8")
    monkeypatch.setenv("AQA_RETRIEVAL", '{"top_k": 9}')
    assert Settings(_env_file=None).retrieval.top_k == 5
    names = [env_name(n, info) for m in SECTIONS.values() for n, info in m.model_fields.items()]
    assert len(set(names)) == len(names) == len(SECTION_OF)
    assert {"AQA_TOP_K", "OPENAI_API_KEY", "OPENAI_BASE_URL", "AQA_OPENAI_MODEL"} <= set(names)


def test_a_wrong_provider_in_env_fails_at_load_naming_the_setting(monkeypatch):
    monkeypatch.setenv("AQA_LLM_PROVIDER", "nope")
    with pytest.raises(ValidationError, match=r"unknown LLM provider 'nope' \(AQA_LLM_PROVIDER\)"):
        Settings(_env_file=None)
    monkeypatch.setenv("AQA_LLM_PROVIDER", "local")
    monkeypatch.setenv("AQA_EMBED_PROVIDER", "nope")
    with pytest.raises(ValidationError, match=r"'nope' \(AQA_EMBED_PROVIDER\): choose one of"):
        Settings(_env_file=None)


def test_unknown_name_in_a_section_is_an_error():
    with pytest.raises(ValidationError, match=r"retrieval\.topk"):
        Settings(_env_file=None, retrieval={"topk": 3})


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
    env.write_text("AQA_TOP_K=6\nAQA_CANDIDATE_K=12\nOPENAI_BASE_URL=http://d/v1\n"
                   "AQA_UI_MIN_SCORE=0.5\nAQA_NOT_A_SETTING=1\nTOP_K=99\nOTHER_TOOL=x\n",
                   encoding="utf-8")
    s = Settings(_env_file=env)
    assert (s.retrieval.top_k, s.retrieval.candidate_k) == (6, 12)
    assert s.llm.openai_base_url == "http://d/v1" and s.ui.ui_min_score == 0.5
    monkeypatch.setenv("AQA_TOP_K", "2")  # the environment beats .env
    monkeypatch.setenv("OPENAI_BASE_URL", "http://e/v1")
    s = Settings(_env_file=env)
    assert (s.retrieval.top_k, s.retrieval.candidate_k, s.ui.ui_min_score) == (2, 12, 0.5)
    assert s.llm.openai_base_url == "http://e/v1"
    assert Settings(_env_file=env, top_k=1).retrieval.top_k == 1  # an argument beats both


def test_preset_precedence(monkeypatch, tmp_path):
    # the preset sets AQA_EMBED_PROVIDER=wordllama
    assert Settings(_env_file=None, preset="fast-ingest").embeddings.embed_provider == "wordllama"
    env = tmp_path / ".env"
    env.write_text("AQA_PRESET=fast-ingest\nAQA_EMBED_PROVIDER=minilm\n", encoding="utf-8")
    assert Settings(_env_file=env).embeddings.embed_provider == "minilm"  # .env beats the preset
    env.write_text("AQA_PRESET=fast-ingest\n", encoding="utf-8")
    monkeypatch.setenv("AQA_EMBED_PROVIDER", "minilm")  # so does the environment
    assert Settings(_env_file=env).embeddings.embed_provider == "minilm"
    monkeypatch.delenv("AQA_EMBED_PROVIDER")
    s = Settings(_env_file=env, embed_provider="minilm")  # and an argument
    assert s.embeddings.embed_provider == "minilm" and s.preset == "fast-ingest"
    assert Settings(_env_file=env).embeddings.embed_provider == "wordllama"


def test_updated(tmp_path):
    s = Settings(_env_file=None)
    t = s.updated(top_k="3", data_dir=str(tmp_path), ui_timeout=5)
    assert (t.retrieval.top_k, t.storage.data_dir, t.ui.ui_timeout) == (3, tmp_path, 5.0)
    assert t.retrieval.candidate_k == s.retrieval.candidate_k  # the rest is kept
    assert (s.retrieval.top_k, s.storage.data_dir, s.ui.ui_timeout) == (5, DEFAULT_DATA_DIR, 300.0)
    assert s.updated(retrieval={"top_k": 4}).retrieval.top_k == 4
    assert s.updated(openai_api_key="sk-u").llm.openai_api_key == "sk-u"
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


def test_every_setting_is_documented():
    for section, model in SECTIONS.items():
        assert (model.__doc__ or "").strip(), section
        for name, info in model.model_fields.items():
            text = (info.description or "").removeprefix(TUNED)
            assert len(text) > 10 and text.rstrip().endswith((".", ")")), (section, name)
    tuned = [n for m in SECTIONS.values() for n, i in m.model_fields.items()
             if (i.description or "").startswith(TUNED)]
    assert {"evidence_floor", "decision_answer_at", "decision_decline_below"} <= set(tuned)


def test_env_example_is_generated_from_the_settings():
    """Drift: .env.example is exactly what ``python -m rag.config --env-example`` prints;
    after changing a setting, run it with ``--write``."""
    text = env_example()
    assert (REPO / ".env.example").read_text(encoding="utf-8") == text, (
        ".env.example is stale: run `python -m rag.config --env-example --write`")
    for name, section in SECTION_OF.items():  # each setting under its section's header
        line = next(ln for ln in text.splitlines()
                    if ln.lstrip("# ").startswith(env_name(name, SECTIONS[section].model_fields[name]) + "="))
        before = text[: text.index(line)]
        assert before.rindex("# --- ") == before.rindex(f"# --- {section}: "), name
    r = subprocess.run([sys.executable, "-m", "rag.config", "--env-example"], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout == text, r.stderr


@pytest.mark.parametrize("env, named", [("AQA_TOP_K=abc", "AQA_TOP_K='abc'"),
                                        ("AQA_VERDICT_PROMPT=nope", "nope_system.txt")])
def test_a_bad_setting_is_one_line_naming_it(monkeypatch, capsys, env, named) -> None:
    from rag.cli import main
    from rag.config import get_settings

    k, v = env.split("=")
    monkeypatch.setenv(k, v)
    get_settings.cache_clear()
    try:
        rc = main(["ask", "What does MELON do?"])
    finally:
        get_settings.cache_clear()
    err = capsys.readouterr().err.strip()
    assert rc == 2 and named in err and k in err and "Traceback" not in err
    # One line for the error (after the status line saying what was being loaded).
    assert [ln for ln in err.splitlines() if ln.startswith("error:")] == [err.splitlines()[-1]]
