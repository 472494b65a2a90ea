"""Settings: the one settings object (pydantic-settings), read from the
environment and ``.env``, plus the offline-safe process environment.

Settings come in sections, one model each (``rag.config_sections``):
``settings.retrieval.top_k``. One env name per setting: ``AQA_`` + its field name
(``AQA_TOP_K``), in the environment, ``.env`` and presets alike; the OpenAI ones
also under the standard ``OPENAI_API_KEY``/``OPENAI_BASE_URL``. In code,
``Settings(top_k=3)`` and ``settings.updated(top_k=3)`` (a validated copy) take
the same flat names, or whole sections (``Settings(retrieval={"top_k": 3})``).
``python -m rag.config --env-example [--write]`` writes ``.env.example`` from
the fields' descriptions.

Presets (``rag/presets/NAME.env``, chosen by ``AQA_PRESET`` or ``aqa --preset
NAME``) are named sets of a few settings. Precedence: arguments to
``Settings(...)`` > environment variables > ``.env`` > preset > defaults.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel, Field, create_model, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from rag import config_sections as cs
from rag.errors import AqaError

# Where the rest of the code finds them; defined with the sections, whose defaults need them.
BUNDLED_CORPUS, PROMPTS_DIR, REPO_ROOT = cs.BUNDLED_CORPUS, cs.PROMPTS_DIR, cs.REPO_ROOT
SECTIONS, SECTION_OF = cs.SECTIONS, cs.SECTION_OF


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
        raise AqaError(f"Unknown preset '{name}' (--preset / AQA_PRESET): choose one of "
                       f"{', '.join(preset_names())}.")
    return path


# What both the real settings and _EnvNames read: AQA_<NAME>, names in .env that are
# no setting ignored (dotenv_filtering), so .env may hold other tools' variables.
_ENV_CONFIG = SettingsConfigDict(env_prefix="AQA_", extra="ignore", env_file_encoding="utf-8",
                                 dotenv_filtering="only_existing")

class _EnvBase(BaseSettings):
    model_config = _ENV_CONFIG


# Every setting at top level, so that pydantic-settings' own sources read the flat env
# names (and aliases: OPENAI_API_KEY) with its own parsing (JSON for lists). Only read
# by sources, never instantiated: types and aliases are all it needs.
_EnvNames: type[BaseSettings] = create_model(
    "_EnvNames", __base__=_EnvBase, preset=(str | None, None),
    **{name: (info.annotation, Field(None, validation_alias=info.validation_alias))
       for model in SECTIONS.values() for name, info in model.model_fields.items()},
)


def _nest(values: dict[str, Any]) -> dict[str, Any]:
    """``{"top_k": 3}`` -> ``{"retrieval": {"top_k": 3}}``: flat names moved into
    their sections. A value given under the section's own name wins."""
    out = {k: v for k, v in values.items() if k not in SECTION_OF}
    for name, value in values.items():
        if (section := SECTION_OF.get(name)) is not None:
            given = out.get(section)
            if isinstance(given, BaseModel):
                given = given.model_dump(exclude_unset=True)
            out[section] = {name: value, **(given if isinstance(given, dict) else {})}
    return out


class _PresetSource(PydanticBaseSettingsSource):
    """The settings of the chosen preset, read like ``.env``. Asked for last, so the
    preset is named by (and loses to) the arguments, the environment and ``.env``."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # abstract; unused: __call__ reads the whole file

    def __call__(self) -> dict[str, Any]:
        name = self.current_state.get("preset")  # as the sources before this one gave it
        return DotEnvSettingsSource(_EnvNames, env_file=preset_file(str(name)))() if name else {}


class Settings(BaseSettings):
    """All settings, in sections (``settings.retrieval.top_k``), as in ``.env.example``."""

    model_config = SettingsConfigDict(**_ENV_CONFIG, env_file=".env")

    preset: str | None = Field(None, description="Named settings from rag/presets/ (fast-ingest, "
                               "openai, quality; or `aqa --preset NAME`); the environment and "
                               ".env win over it.")

    storage: cs.StorageSettings = Field(default_factory=cs.StorageSettings)
    corpus: cs.CorpusSettings = Field(default_factory=cs.CorpusSettings)
    embeddings: cs.EmbeddingSettings = Field(default_factory=cs.EmbeddingSettings)
    retrieval: cs.RetrievalSettings = Field(default_factory=cs.RetrievalSettings)
    evidence: cs.EvidenceSettings = Field(default_factory=cs.EvidenceSettings)
    llm: cs.LLMSettings = Field(default_factory=cs.LLMSettings)
    answer: cs.AnswerSettings = Field(default_factory=cs.AnswerSettings)
    ui: cs.UISettings = Field(default_factory=cs.UISettings)

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The environment and .env read under the flat names; each source gives flat
        # keys, merged in precedence order, then nested by _flat_names below.
        assert isinstance(dotenv_settings, DotEnvSettingsSource)
        dotenv = DotEnvSettingsSource(_EnvNames, env_file=dotenv_settings.env_file)
        return init_settings, EnvSettingsSource(_EnvNames), dotenv, _PresetSource(settings_cls)

    @model_validator(mode="before")
    @classmethod
    def _flat_names(cls, data: Any) -> Any:
        """Flat names (from any source, or ``model_validate``) go to their sections."""
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
            if isinstance(current, cs.Section) and isinstance(values, dict):
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


def env_name(name: str, info: FieldInfo) -> str:
    """The documented env name of a field: its first alias (``OPENAI_API_KEY``) or ``AQA_NAME``."""
    alias = info.validation_alias
    if isinstance(alias, AliasChoices) and isinstance(alias.choices[0], str):
        return alias.choices[0].upper()
    return f"AQA_{name.upper()}"


def settings_error(e: Any) -> str:
    """One line for a pydantic ``ValidationError`` of the settings, naming the
    env variable of the first bad setting, its value and what is wrong."""
    errs = e.errors()
    first = errs[0]
    name = str(first["loc"][-1]) if first.get("loc") else ""
    info = SECTIONS[SECTION_OF[name]].model_fields[name] if name in SECTION_OF else None
    where = env_name(name, info) if info is not None else (f"AQA_{name.upper()}" if name else "settings")
    msg = first["msg"].removeprefix("Value error, ")
    more = f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""
    return f"setting {where}={first.get('input')!r}: {msg}{more}"


def _env_value(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return json.dumps([str(v) for v in value]) if isinstance(value, list) else str(value)


def env_example() -> str:
    """The text of ``.env.example``: every setting, by section, each under its
    description; a setting without a default worth copying is commented out."""
    out = [
        "# abstracts-qa settings. Copy to .env and edit; every line is optional.",
        "# Generated from the settings' descriptions in rag/config_sections.py by",
        "# `python -m rag.config --env-example --write`: edit them there, not here.",
        "# Environment variables override .env, which overrides a preset. Prefix AQA_ except",
        "# the standard OpenAI ones. In code: settings.<section>.<name> (settings.retrieval.top_k).",
        f'# "{cs.TUNED.strip()}" marks a constant of the answer core tuned on the eval set',
        "# (docs/evaluation.md): change it only with an eval run.",
    ]
    groups = [("preset", "A named set of a few settings.", {"preset": Settings.model_fields["preset"]})]
    groups += [(s, m.__doc__ or "", m.model_fields) for s, m in SECTIONS.items()]
    for section, doc, fields in groups:
        out += ["", f"# --- {section}: {doc.strip().splitlines()[0]} ---"]
        for name, info in fields.items():
            out += textwrap.wrap(info.description or "", 97, initial_indent="# ",
                                 subsequent_indent="# ", break_on_hyphens=False)
            default = info.get_default(call_default_factory=True)
            if info.examples or default is None:
                example = info.examples[0] if info.examples else ""
                out.append(f"# {env_name(name, info)}={example}")
            else:
                out.append(f"{env_name(name, info)}={_env_value(default)}")
    return "\n".join(out) + "\n"


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


def _main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rag.config")
    ap.add_argument("--env-example", action="store_true", required=True,
                    help="print .env.example as generated from the settings' descriptions")
    ap.add_argument("--write", action="store_true", help="rewrite .env.example instead")
    text = env_example()
    if ap.parse_args(argv).write:
        (REPO_ROOT / ".env.example").write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(_main())
