"""Settings: the one settings object (pydantic-settings), read from the
environment and ``.env``, plus the offline-safe process environment.

Settings come in sections, one model each (``rag.config_sections``):
``storage``, ``corpus``, ``embeddings``, ``retrieval``, ``evidence``, ``llm``,
``answer`` and ``ui`` (``settings.retrieval.top_k``). Every setting is
documented in ``.env.example``, grouped by section.

A setting keeps its flat name inside its section, and both name forms work
everywhere (environment, ``.env``, presets):

- the flat env name, the documented one: ``AQA_`` + the upper-case name
  (``AQA_TOP_K``), and the standard ``OPENAI_API_KEY``/``OPENAI_BASE_URL``;
- the nested env name: ``AQA_<SECTION>__<NAME>`` (``AQA_RETRIEVAL__TOP_K``),
  which wins when both are set in one place.

In code, ``Settings(top_k=3, data_dir=p)`` takes flat names too (or whole
sections: ``Settings(retrieval={"top_k": 3})``), and ``settings.updated(top_k=3)``
is a validated copy with some settings changed by flat name.

Presets (``rag/presets/NAME.env``, chosen by ``AQA_PRESET`` or ``aqa --preset
NAME``) are named sets of a few settings. Precedence: arguments to
``Settings(...)`` > environment variables > ``.env`` > preset > defaults.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel, Field, create_model, model_validator
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from rag.config_sections import (
    SECTION_OF,
    SECTIONS,
    AnswerSettings,
    CorpusSettings,
    EmbeddingSettings,
    EvidenceSettings,
    LLMSettings,
    RetrievalSettings,
    Section,
    StorageSettings,
    UISettings,
)

REPO_ROOT = Path(__file__).resolve().parent.parent


def _package_data(name: str, repo_dir: Path) -> Path:
    """A folder installed as package data (``rag/<name>``: pyproject maps the
    repo's ``prompts/`` and ``data/`` there), found with ``importlib.resources``;
    in a source checkout or an editable install, the repo folder itself."""
    from importlib.resources import files

    installed = files("rag").joinpath(name)
    if isinstance(installed, Path) and installed.is_dir():
        return installed
    return repo_dir


PROMPTS_DIR = _package_data("_prompts", REPO_ROOT / "prompts")
BUNDLED_CORPUS = _package_data("_corpus", REPO_ROOT / "data") / "icml2025"


def presets_dir() -> Path:
    """``rag/presets``: package data, so a non-editable install has it too."""
    from importlib.resources import files

    return Path(str(files("rag").joinpath("presets")))


def preset_names() -> list[str]:
    return sorted(p.stem for p in presets_dir().glob("*.env"))


def preset_file(name: str) -> Path:
    """The file of preset ``name``; an unknown name is an ``AqaError`` naming the known ones."""
    path = presets_dir() / f"{name}.env"
    if not name or "/" in name or "\\" in name or not path.is_file():
        from rag.errors import AqaError

        raise AqaError(f"Unknown preset '{name}' (--preset / AQA_PRESET): choose one of "
                       f"{', '.join(preset_names())}.")
    return path


# Env names besides AQA_<NAME> (the standard OpenAI ones come first).
_ENV_ALIASES = {
    "openai_api_key": AliasChoices("OPENAI_API_KEY", "AQA_OPENAI_API_KEY"),
    "openai_base_url": AliasChoices("OPENAI_BASE_URL", "AQA_OPENAI_BASE_URL"),
}

_ALIAS_OF = {env.lower(): name for name, alias in _ENV_ALIASES.items()
             for env in alias.choices if isinstance(env, str)}


def _nest(values: dict[str, Any]) -> dict[str, Any]:
    """``{"top_k": 3}`` -> ``{"retrieval": {"top_k": 3}}``: flat names moved into
    their sections. A value given under the section's own name wins."""
    if not any(k in SECTION_OF for k in values):
        return values
    out: dict[str, Any] = {k: v for k, v in values.items() if k not in SECTION_OF}
    for name, value in values.items():
        section = SECTION_OF.get(name)
        if section is None:
            continue
        given = out.get(section)
        if isinstance(given, BaseModel):
            given = given.model_dump(exclude_unset=True)
        given = dict(given) if isinstance(given, dict) else {}
        given.setdefault(name, value)
        out[section] = given
    return out


class _FlatBase(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AQA_", extra="ignore", env_file=None)


# Every setting under its flat name, only to read the flat env names (AQA_TOP_K,
# OPENAI_API_KEY) with pydantic-settings' own parsing; never instantiated.
_FlatNames: type[BaseSettings] = create_model(
    "_FlatNames", __base__=_FlatBase,
    **{name: (info.annotation, Field(default=None, validation_alias=_ENV_ALIASES.get(name)))
       for model in SECTIONS.values() for name, info in model.model_fields.items()},
)


class _Nested(PydanticBaseSettingsSource):
    """A source (init arguments, environment, a .env file) with its flat names
    nested into sections; ``flat`` reads the flat env names of the same place."""

    def __init__(self, settings_cls: type[BaseSettings], inner: PydanticBaseSettingsSource,
                 flat: PydanticBaseSettingsSource | None = None) -> None:
        super().__init__(settings_cls)
        self.inner, self.flat = inner, flat

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads everything

    def __call__(self) -> dict[str, Any]:
        values = _nest(self.inner())
        if self.flat is None:
            return values
        out = _nest({_ALIAS_OF.get(k.lower(), k): v for k, v in self.flat().items()})
        for key, value in values.items():  # the name under its section wins
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                value = {**out[key], **value}
            out[key] = value
        return out


def _dotenv(settings_cls: type[BaseSettings], env_file: Any,
            like: DotEnvSettingsSource | None = None) -> _Nested:
    """A .env-style file (``.env``, a preset) read under both name forms."""
    opts: dict[str, Any] = {"env_file": env_file}
    if like is not None:
        opts.update(env_file_encoding=like.env_file_encoding, case_sensitive=like.case_sensitive,
                    env_prefix=like.env_prefix)
    return _Nested(settings_cls, DotEnvSettingsSource(settings_cls, **opts),
                   DotEnvSettingsSource(_FlatNames, **opts))


class _PresetSource(PydanticBaseSettingsSource):
    """The settings of the chosen preset, read like a ``.env`` file. Asked for
    after the environment and ``.env``, so those win over a preset."""

    def __init__(self, settings_cls: type[BaseSettings],
                 *named_by: PydanticBaseSettingsSource) -> None:
        super().__init__(settings_cls)
        self._named_by = named_by  # init arguments, environment, .env: the first naming one

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads the whole file

    def __call__(self) -> dict[str, Any]:
        name = next((found for source in self._named_by if (found := source().get("preset"))),
                    None)
        if not name:
            return {}
        values = _dotenv(self.settings_cls, preset_file(str(name)))()
        values.pop("preset", None)
        return values


class Settings(BaseSettings):
    """All settings, in sections (``settings.retrieval.top_k``), as in ``.env.example``."""

    model_config = SettingsConfigDict(
        env_prefix="AQA_", env_file=".env", env_file_encoding="utf-8", extra="ignore",
        env_nested_delimiter="__",
    )

    # rag/presets/NAME.env: a few settings under a name
    preset: str | None = None

    storage: StorageSettings = Field(default_factory=StorageSettings)
    corpus: CorpusSettings = Field(default_factory=CorpusSettings)
    embeddings: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    evidence: EvidenceSettings = Field(default_factory=EvidenceSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    answer: AnswerSettings = Field(default_factory=AnswerSettings)
    ui: UISettings = Field(default_factory=UISettings)

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        init = _Nested(settings_cls, init_settings)
        env = _Nested(settings_cls, env_settings, EnvSettingsSource(
            _FlatNames, case_sensitive=getattr(env_settings, "case_sensitive", None),
            env_prefix=getattr(env_settings, "env_prefix", None)))
        assert isinstance(dotenv_settings, DotEnvSettingsSource)
        dotenv = _dotenv(settings_cls, dotenv_settings.env_file, dotenv_settings)
        preset = _PresetSource(settings_cls, init, env, dotenv)
        return init, env, dotenv, file_secret_settings, preset

    @model_validator(mode="before")
    @classmethod
    def _flat_names(cls, data: Any) -> Any:
        """Flat names given to ``model_validate`` go to their sections too."""
        return _nest(data) if isinstance(data, dict) else data

    @property
    def llm_concurrency(self) -> int:
        """Answers/comparisons the UI runs at once: 1 for the in-process model."""
        if self.ui.ui_concurrency:
            return max(1, self.ui.ui_concurrency)
        if self.llm.resolved_provider == "local":
            return 1
        return max(1, self.ui.server_llm_concurrency)

    def updated(self, **changes: Any) -> Settings:
        """A copy with ``changes`` by flat name (``updated(top_k=3, data_dir=p)``),
        each validated by its section; a section name takes a whole section."""
        unknown = sorted(set(changes) - set(SECTION_OF) - set(type(self).model_fields))
        if unknown:
            raise TypeError(f"unknown setting(s): {', '.join(unknown)}")
        update: dict[str, Any] = {}
        for section, values in _nest(changes).items():
            current = getattr(self, section)
            if isinstance(current, Section) and isinstance(values, dict):
                values = type(current).model_validate({**current.model_dump(), **values})
            update[section] = values
        return self.model_copy(update=update)

    def flat(self) -> dict[str, Any]:
        """Every setting by its flat name (``{"top_k": 5, ...}``), e.g. for a report."""
        return {name: getattr(getattr(self, section), name)
                for name, section in SECTION_OF.items()}


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


def load_settings(preset: str | None = None) -> Settings:
    """``get_settings()``, or with ``preset`` (e.g. ``--preset``) chosen over ``AQA_PRESET``."""
    return Settings(preset=preset) if preset else get_settings()


def setup_offline_env() -> None:
    """Make every library we import offline-safe before it is imported.

    tiktoken would download its BPE files; point it at the copy bundled in
    llama-index-core. HF hub and Chroma telemetry must never phone home, and
    numpy/torch threads would fight over 2 cores.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    os.environ.setdefault("CHROMA_TELEMETRY", "False")
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # Idle OpenMP threads of torch otherwise spin and starve llama.cpp's
    # threads: measured TTFT 12.7 s -> 3.8 s on 2 cores.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if "TIKTOKEN_CACHE_DIR" not in os.environ:
        import importlib.util

        spec = importlib.util.find_spec("llama_index.core")
        if spec and spec.origin:
            cache = Path(spec.origin).parent / "_static" / "tiktoken_cache"
            if cache.is_dir():
                os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
