"""Settings: the one settings object (pydantic-settings), read from the
environment and ``.env``, plus the offline-safe process environment.

Every field is documented in ``.env.example``. Env names are the upper-case
field names prefixed ``AQA_`` except the standard OpenAI ones.

Presets (``rag/presets/NAME.env``, chosen by ``AQA_PRESET`` or ``aqa --preset
NAME``) are named sets of a few settings. Precedence: arguments to
``Settings(...)`` > environment variables > ``.env`` > preset > defaults.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
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
        name = None
        for source in self._named_by:
            found = (source.init_kwargs if hasattr(source, "init_kwargs") else source()).get(
                "preset")
            if found:
                name = found
                break
        if not name:
            return {}
        values = DotEnvSettingsSource(self.settings_cls, env_file=preset_file(str(name)))()
        values.pop("preset", None)
        return values


# The canonical names of the bundled local models; old names still accepted.
LOCAL_MODEL_ALIASES = {"qwen2.5-1.5b": "qwen2.5-coder-1.5b"}


class Settings(BaseSettings):
    """One flat model, its fields grouped by section (storage, corpus,
    embeddings, retrieval, evidence, LLM, answer checking, UI) as in
    ``.env.example``."""

    model_config = SettingsConfigDict(
        env_prefix="AQA_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    # --- preset (rag/presets/NAME.env: a few settings under a name) ---
    preset: str | None = None

    # --- storage ---
    data_dir: Path = Path(".aqa")
    collection: str = "abstracts"
    chroma_host: str | None = None
    chroma_port: int = 8000

    # --- corpus / chunking ---
    corpus_paths: list[Path] = Field(default_factory=lambda: [BUNDLED_CORPUS])
    chunk_tokens: int = 128
    chunk_overlap: int = 24
    dedup_threshold: float = 0.6

    # --- embeddings ---
    # minilm, wordllama, openai, or another name registered in rag.providers
    embed_provider: str = "minilm"
    embed_model: str = "text-embedding-3-small"  # only for embed_provider=openai
    embed_batch_size: int = 32
    embed_backend: Literal["onnx", "torch"] = "onnx"  # minilm: ONNX Runtime or sentence-transformers
    embed_precision: Literal["fp32", "int8"] = "fp32"  # onnx only; int8 vectors need a re-ingest
    embed_workers: int = 2  # onnx int8: single-thread sessions side by side while ingesting

    # --- retrieval ---
    top_k: int = 5
    candidate_k: int = 30
    retriever: Literal["hybrid", "dense", "bm25"] = "hybrid"
    centroid_weight: float = 0.5
    bm25_weight: float = 0.5
    relevance_floor: float = 0.25
    passages_per_paper: int = 2

    # --- evidence (see rag/evidence.py and rag/rules.py) ---
    evidence_papers: int = 4
    evidence_sentences: int = 9
    evidence_per_paper: int = 2
    evidence_top_paper: int = 4
    evidence_value_boost: float = 0.1
    pinned_sentences: int = 12
    evidence_max_chosen: int = 4
    evidence_floor: float = 0.3
    evidence_spread: float = 0.25
    detail_floor: float = 0.5
    generic_name_papers: int = 3

    # --- LLM ---
    # auto, local, openai, or another name registered in rag.providers
    llm_provider: str = "auto"
    local_model: Literal["qwen2.5-coder-1.5b", "smollm2-135m"] = "qwen2.5-coder-1.5b"
    local_model_path: Path | None = None
    model_cache_dir: Path = Path.home() / ".cache" / "abstracts-qa"
    llm_context: int = 4096
    llm_threads: int = 2
    max_tokens: int = 320
    temperature: float = 0.0
    openai_api_key: str | None = Field(
        default=None, validation_alias=AliasChoices("OPENAI_API_KEY", "AQA_OPENAI_API_KEY")
    )
    openai_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("OPENAI_BASE_URL", "AQA_OPENAI_BASE_URL")
    )
    openai_model: str = "gpt-4o-mini"
    llm_timeout: float = 60.0
    llm_retries: int = 2
    max_question_chars: int = 2000  # longer questions are cut to this, with a note

    # --- answer checking ---
    support_threshold: float = 0.45
    synthesis_max_tokens: int = 160

    # --- UI ---
    host: str = "127.0.0.1"
    port: int = 7860
    auth_user: str | None = None
    auth_password: str | None = None
    ui_timeout: float = 300.0  # seconds one chat answer or comparison may take in the UI
    ui_concurrency: int | None = None  # answers/comparisons at once; None: 1 local, else below
    server_llm_concurrency: int = 8  # default of ui_concurrency for an OpenAI-compatible server
    ui_workers: int = 8  # search, paper browsing and other non-LLM requests at once
    ui_queue_size: int = 32  # requests waiting in the queue before new ones are refused
    ui_min_score: float = 0.35  # explorer: search matches scoring below are not listed
    ui_search_limit: int = 30  # explorer: papers a search returns before the cut-off

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        preset = _PresetSource(settings_cls, init_settings, env_settings, dotenv_settings)
        return init_settings, env_settings, dotenv_settings, file_secret_settings, preset

    @field_validator("local_model", mode="before")
    @classmethod
    def _local_model_alias(cls, v: Any) -> Any:
        return LOCAL_MODEL_ALIASES.get(v, v) if isinstance(v, str) else v

    @field_validator("llm_provider")
    @classmethod
    def _known_llm_provider(cls, v: str) -> str:
        from rag.providers import LLM_PROVIDERS

        if v != "auto" and v not in LLM_PROVIDERS:
            raise ValueError(f"unknown LLM provider {v!r}: choose one of "
                             f"{', '.join(['auto', *LLM_PROVIDERS.names()])}")
        return v

    @field_validator("embed_provider")
    @classmethod
    def _known_embed_provider(cls, v: str) -> str:
        from rag.providers import EMBED_PROVIDERS

        if v not in EMBED_PROVIDERS:
            raise ValueError(f"unknown embedding provider {v!r}: choose one of "
                             f"{', '.join(EMBED_PROVIDERS.names())}")
        return v

    @property
    def resolved_llm_provider(self) -> str:
        if self.llm_provider != "auto":
            return self.llm_provider
        return "openai" if (self.openai_api_key or self.openai_base_url) else "local"

    @property
    def llm_concurrency(self) -> int:
        """Answers/comparisons the UI runs at once: 1 for the in-process model."""
        if self.ui_concurrency:
            return max(1, self.ui_concurrency)
        return 1 if self.resolved_llm_provider == "local" else max(1, self.server_llm_concurrency)


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
