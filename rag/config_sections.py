"""The sections of ``rag.config.Settings``, one model each, in ``.env.example``'s
order. A setting keeps its flat env name inside its section: ``AQA_TOP_K`` is
``settings.retrieval.top_k``. Each field is documented in ``.env.example``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


def _bundled_corpus() -> list[Path]:
    from rag.config import BUNDLED_CORPUS  # rag.config imports this module

    return [BUNDLED_CORPUS]


# The canonical names of the bundled local models; old names still accepted.
LOCAL_MODEL_ALIASES = {"qwen2.5-1.5b": "qwen2.5-coder-1.5b"}


class Section(BaseModel):
    """A settings section. An unknown name in it (``AQA_RETRIEVAL__TOPK``) is an error."""

    model_config = ConfigDict(extra="forbid")


class StorageSettings(Section):
    """Where the index lives."""

    data_dir: Path = Path(".aqa")
    collection: str = "abstracts"
    chroma_host: str | None = None
    chroma_port: int = 8000


class CorpusSettings(Section):
    """What is ingested and how it is chunked."""

    corpus_paths: list[Path] = Field(default_factory=_bundled_corpus)
    chunk_tokens: int = 128
    chunk_overlap: int = 24
    dedup_threshold: float = 0.6
    max_abstract_chars: int = Field(
        20_000, gt=0,
        description="A record whose abstract is longer is skipped with one warning naming its "
                    "file and line (a full text or a broken export, not an abstract).")
    topic_map_iterations: int = 400  # t-SNE iterations of the topic map (250 are early exaggeration)
    topic_map_angle: float = 0.8  # its Barnes-Hut angle: higher is faster and coarser


class EmbeddingSettings(Section):
    """The embedding model."""

    # minilm, wordllama, openai, or another name registered in rag.providers
    embed_provider: str = "minilm"
    embed_model: str = "text-embedding-3-small"  # only for embed_provider=openai
    embed_batch_size: int = 32
    embed_backend: Literal["onnx", "torch"] = "onnx"  # minilm: ONNX Runtime or sentence-transformers
    # onnx only. int8 (default): about 2x faster ingest than fp32 on 2 cores, held-out hit@5
    # unchanged; its vectors differ from fp32 ones, so switching needs a re-ingest.
    embed_precision: Literal["fp32", "int8"] = "int8"
    embed_workers: int = 2  # onnx int8: single-thread sessions side by side while ingesting

    @field_validator("embed_provider")
    @classmethod
    def _known_embed_provider(cls, v: str) -> str:
        from rag.providers import EMBED_PROVIDERS

        if v not in EMBED_PROVIDERS:
            raise ValueError(f"unknown embedding provider {v!r}: choose one of "
                             f"{', '.join(EMBED_PROVIDERS.names())}")
        return v


class RetrievalSettings(Section):
    """Hybrid search and the relevance floor."""

    top_k: int = 5
    candidate_k: int = 30
    retriever: Literal["hybrid", "dense", "bm25"] = "hybrid"
    centroid_weight: float = 0.5
    bm25_weight: float = 0.5
    relevance_floor: float = 0.25
    passages_per_paper: int = 2


class EvidenceSettings(Section):
    """The sentences offered to the model as evidence (rag/evidence.py, rag/rules.py)."""

    evidence_papers: int = 4
    evidence_sentences: int = 11
    evidence_per_paper: int = 2
    evidence_top_paper: int = 6
    evidence_lexical_weight: float = 0.2  # favours candidate sentences sharing the question's rarer words
    evidence_value_boost: float = 0.1
    evidence_count_boost: float = 0.15  # added for a sentence stating a count of what "how many X" asks
    pinned_sentences: int = 12
    evidence_max_chosen: int = 4
    evidence_floor: float = 0.3
    evidence_spread: float = 0.25
    detail_floor: float = 0.5
    generic_name_papers: int = 3
    coverage_max_added: int = 2  # sentences question_part_uncovered may add to the evidence
    coverage_common_share: float = 0.1  # a term in more of the indexed chunks is too common to count
    evidence_check: bool = True  # ask the model afresh whether its evidence answers (a decision signal)
    # A paper the synthesis names but the model passed over when choosing evidence
    # must get a leaning "yes" from the check, not an undecided one, to join the answer.
    unchosen_paper_threshold: float = 0.45


class LLMSettings(Section):
    """The answering model: the bundled local one or an OpenAI-compatible server."""

    # auto, local, openai, or another name registered in rag.providers
    llm_provider: str = "auto"
    local_model: Literal["qwen2.5-coder-1.5b", "smollm2-135m"] = "qwen2.5-coder-1.5b"
    local_model_path: Path | None = None
    model_cache_dir: Path = Path.home() / ".cache" / "abstracts-qa"
    llm_context: int = 4096
    llm_threads: int = 2
    llm_prompt_cache_mb: int = 1024  # local model: RAM for saved prompt states (0: off)
    max_tokens: int = 320
    temperature: float = 0.0
    openai_api_key: str | None = None  # env: OPENAI_API_KEY (or AQA_OPENAI_API_KEY)
    openai_base_url: str | None = None  # env: OPENAI_BASE_URL (or AQA_OPENAI_BASE_URL)
    openai_model: str = "gpt-4o-mini"
    llm_timeout: float = 60.0
    llm_retries: int = 2
    max_question_chars: int = 2000  # longer questions are cut to this, with a note

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

    @property
    def resolved_provider(self) -> str:
        """``llm_provider``, with ``auto`` resolved: openai when a key or base URL is set."""
        if self.llm_provider != "auto":
            return self.llm_provider
        return "openai" if (self.openai_api_key or self.openai_base_url) else "local"


class AnswerSettings(Section):
    """Checking and synthesising the answer."""

    support_threshold: float = 0.45
    synthesis_max_tokens: int = 160
    extend_max_sentences: int = 3
    decision_answer_at: float = Field(
        0.6, description="Answer when the calibrated decision's P(answered) reaches this "
        "(rag/decision.py; the operating point chosen from the risk-coverage curve in "
        "docs/evaluation.md)")
    decision_decline_below: float = Field(
        0.3, description="Below this P(answered) the question is declined outright; between "
        "it and decision_answer_at the closest passages are shown as 'not confirmed'")
    decision_file: Path | None = Field(
        None, description="Decision coefficients to use instead of the bundled rag/decision.json "
        "(written by `aqa eval fit-decision`)")


class UISettings(Section):
    """The Gradio app."""

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


# The sections, in .env.example's order: attribute of Settings -> model.
SECTIONS: dict[str, type[Section]] = {
    "storage": StorageSettings,
    "corpus": CorpusSettings,
    "embeddings": EmbeddingSettings,
    "retrieval": RetrievalSettings,
    "evidence": EvidenceSettings,
    "llm": LLMSettings,
    "answer": AnswerSettings,
    "ui": UISettings,
}

# Flat name (the AQA_ env name, lower-cased, without its prefix) -> its section.
# A setting keeps its flat name inside its section: AQA_TOP_K is retrieval.top_k.
SECTION_OF: dict[str, str] = {
    name: section for section, model in SECTIONS.items() for name in model.model_fields
}
