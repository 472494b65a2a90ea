"""The sections of ``rag.config.Settings``, one model each, in ``.env.example``'s
order. A field's name is its env name without ``AQA_`` (``AQA_TOP_K`` is
``settings.retrieval.top_k``), hence unique across sections; its description is
its documentation, from which ``python -m rag.config --env-example`` writes
``.env.example``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from platformdirs import user_data_path
from pydantic import AfterValidator, AliasChoices, BaseModel, ConfigDict, Field, field_validator

from rag.providers import EMBED_PROVIDERS, LLM_PROVIDERS, Registry  # imports no rag.config*

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


def prompt_pair_problem(name: str) -> str:
    """Why prompts/NAME_system.txt and NAME_user.txt are not a usable pair, or ""."""
    missing = [f"{name}_{part}.txt" for part in ("system", "user")
               if not (PROMPTS_DIR / f"{name}_{part}.txt").is_file()]
    return f"no prompt {', '.join(missing)} in {PROMPTS_DIR}" if missing else ""


BUNDLED_CORPUS = _package_data("_corpus", REPO_ROOT / "data") / "icml2025"

# The canonical names of the bundled local models; old names still accepted.
LOCAL_MODEL_ALIASES = {"qwen2.5-1.5b": "qwen2.5-coder-1.5b"}

TUNED = "Tuned: "  # starts the description of a constant tuned on the eval set


def _doc(default: Any, description: str, **kw: Any) -> Any:
    return Field(default, description=description, **kw)


def _tuned(default: Any, description: str, **kw: Any) -> Any:
    """A constant of the answer core tuned on the eval set: its description says so."""
    return Field(default, description=TUNED + description, **kw)


def _openai_env(name: str) -> AliasChoices:
    """Env names ``OPENAI_<NAME>`` (the standard one) and ``AQA_OPENAI_<NAME>``. Env
    names match case-insensitively, so the field name itself reads ``OPENAI_<NAME>``;
    being first, it is also the key every settings source reports the value under."""
    return AliasChoices(name, f"aqa_{name}")


def _registered(registry: Registry[Any], *more: str) -> AfterValidator:
    """A provider name must be registered (looked up at validation, so a provider
    registered later, e.g. a test fake, counts): else one line naming the setting."""
    def check(v: str) -> str:
        if v not in more and v not in registry:
            raise ValueError(f"unknown {registry.kind} provider {v!r} ({registry.setting}): "
                             f"choose one of {', '.join([*more, *registry.names()])}")
        return v
    return AfterValidator(check)


APP_NAME = "abstracts-qa"


class Section(BaseModel):
    """A settings section; an unknown name in it (``retrieval={"topk": 3}``) is an error."""

    model_config = ConfigDict(extra="forbid")


class StorageSettings(Section):
    """Where the index lives."""

    data_dir: Path = Field(
        default_factory=lambda: user_data_path(APP_NAME) / "index",
        description="Where the index (Chroma + catalog + embedding cache) lives; one folder per "
                    "corpus. Default: a per-user folder (platformdirs), the same from any "
                    "working directory.",
        examples=["~/.local/share/abstracts-qa/index"])
    collection: str = _doc("abstracts", "Chroma collection name inside the data dir or server.")
    chroma_host: str | None = _doc(None, "Set to use a Chroma server (`chroma run --port 8000`) "
                                   "instead of the embedded store.", examples=["127.0.0.1"])
    chroma_port: int = _doc(8000, "Port of that Chroma server.")

    @field_validator("data_dir")
    @classmethod
    def _expand_user(cls, v: Path) -> Path:
        return Path(v).expanduser()  # AQA_DATA_DIR=~/papers-index works as written


class CorpusSettings(Section):
    """What is ingested and how it is chunked."""

    corpus_paths: list[Path] = Field(
        default_factory=lambda: [BUNDLED_CORPUS], examples=['["data/icml2025"]'],
        description="What `aqa ingest` and `aqa serve` load by default (JSON list of "
                    "files/folders; default: the bundled ICML 2025 abstracts).")
    chunk_tokens: int = _doc(128, "Max tiktoken tokens per chunk (MiniLM truncates at 256 "
                             "word pieces).")
    chunk_overlap: int = _doc(24, "Token overlap between neighbouring chunks.")
    dedup_threshold: float = _doc(0.6, "Word-shingle similarity at which two records are the "
                                  "same paper.")
    max_abstract_chars: int = _doc(20_000, "A record whose abstract is longer (in characters) "
                                   "is skipped with one warning naming its file and line (a "
                                   "full text or a broken export, not an abstract).", gt=0)
    topic_map_iterations: int = _doc(
        400, "t-SNE iterations of the explorer's topic map, computed at ingest (at least 250, "
        "the early exaggeration; scikit-learn's default 1000 took 4x longer for the same map "
        "quality).")
    topic_map_angle: float = _doc(0.8, "Barnes-Hut angle of that t-SNE (0.5 is scikit-learn's "
                                  "default; higher is faster and coarser).")


class EmbeddingSettings(Section):
    """The embedding model."""

    embed_provider: Annotated[str, _registered(EMBED_PROVIDERS)] = _doc(
        "minilm", "minilm (default, bundled), wordllama (bundled, much faster, weaker), "
        "openai, or another name registered in rag.providers.")
    embed_model: str = _doc("text-embedding-3-small", "OpenAI embedding model, used only when "
                            "AQA_EMBED_PROVIDER=openai.")
    embed_batch_size: int = _doc(32, "Texts per embedding batch.")
    embed_backend: Literal["onnx", "torch"] = _doc(
        "onnx", "MiniLM backend: onnx (ONNX Runtime, same vectors, exported once into "
        "AQA_MODEL_CACHE_DIR) or torch (sentence-transformers).")
    embed_precision: Literal["fp32", "int8"] = _doc(
        "int8", "onnx only: int8 (default; quantized, about 2x faster ingest than fp32 on 2 "
        "cores, same held-out hit@5) or fp32 (the vectors of torch, which needs fp32). Their "
        "vectors differ: switching needs `aqa ingest --rebuild`.")
    embed_workers: int = _doc(2, "onnx int8 only: single-thread sessions run side by side on "
                              "the AQA_LLM_THREADS cores during ingest.")
    embed_query_cache: int = _doc(256, "Query vectors kept in memory (most recent first): "
                                  "one answer embeds its question three times (retrieval, "
                                  "evidence, checks). 0 turns the cache off.")


class RetrievalSettings(Section):
    """Hybrid search and the relevance floor."""

    top_k: int = _doc(5, "Papers passed to the answer / shown by search.")
    candidate_k: int = _doc(30, "Candidate chunks taken from each retriever before fusion (x3).")
    retriever: Literal["hybrid", "dense", "bm25"] = _doc("hybrid", "hybrid (default), dense or "
                                                         "bm25.")
    centroid_weight: float = _doc(0.5, "Weight of the paper-centroid cosine added to the best "
                                  "chunk cosine.")
    bm25_weight: float = _doc(0.5, "Weight of BM25 (as share of the query's IDF matched) in "
                              "hybrid fusion.")
    relevance_floor: float = _tuned(0.25, "below this best dense similarity the engine "
                                    "declines without calling the LLM.")
    passages_per_paper: int = _doc(2, "Passages kept per retrieved paper.")


class EvidenceSettings(Section):
    """The sentences offered to the model as evidence (rag/answer/evidence.py, rag/answer/rules.py)."""

    evidence_papers: int = _tuned(4, "retrieved papers whose sentences are offered as evidence.")
    evidence_sentences: int = _tuned(11, "numbered sentences offered in all (prompt length "
                                     "sets the local model's wait).")
    evidence_per_paper: int = _tuned(2, "at most this many of them from one paper...")
    evidence_top_paper: int = _tuned(6, "...except the top-ranked paper, which most often "
                                     "holds the answer.")
    evidence_best_last: bool = _tuned(
        True, "list the top-ranked paper's sentences last, next to the question, rather "
        "than first (for questions that neither pin nor name papers; measured in "
        "docs/decision.md).")
    evidence_lexical_weight: float = _tuned(
        0.2, "bonus (times the IDF-weighted share of the question's words a sentence holds) "
        "for sentences sharing its rarer words.")
    evidence_value_boost: float = _tuned(0.1, "similarity bonus for sentences stating a number "
                                         "when the question asks for a value.")
    evidence_count_boost: float = _tuned(0.15, "further bonus for sentences stating a count of "
                                         "what a \"how many X\" question counts (\"four "
                                         "recommendations\").")
    pinned_sentences: int = _tuned(12, "sentences offered when the question is pinned to "
                                   "chosen papers (split among them).")
    evidence_max_chosen: int = _tuned(4, "most sentences the model may choose.")
    evidence_chooser: Literal["model", "ranker", "auto"] = _doc(
        "model", "Who chooses the evidence sentences: `model` (the LLM reads every candidate "
        "sentence, the longest prompt of an answer), `ranker` (the best-ranked candidates, no "
        "model call; the synthesis then reads only them) or `auto` (the ranker for questions "
        "pinned to papers, chosen or carried over by a follow-up; the model otherwise). See "
        "docs/benchmarks.md.")
    evidence_ranker_chosen: int = _tuned(2, "sentences the ranker chooses "
                                         "(AQA_EVIDENCE_CHOOSER=ranker).")
    evidence_ranker_pinned: int = _tuned(4, "sentences the ranker chooses for a question pinned "
                                         "to papers (AQA_EVIDENCE_CHOOSER=ranker or auto): each "
                                         "paper's best first, then the best of the rest.")
    evidence_floor: float = _tuned(0.3, "rule off_question_evidence: decline when the best "
                                   "chosen sentence's cosine to the question is below this.")
    evidence_spread: float = _tuned(0.25, "...and drop chosen sentences this far below the "
                                    "best one.")
    detail_floor: float = _tuned(0.5, "a decline names a missing detail of the top paper (not "
                                 "an absent topic) when its cosine is at least this.")
    generic_name_papers: int = _tuned(3, "a name used by more indexed papers than this (LLM, "
                                      "GPU) is a field's term: it names no paper and is no "
                                      "claim.")
    coverage_max_added: int = _tuned(2, "rule question_part_uncovered: most sentences it adds "
                                     "to complete evidence that leaves part of the question "
                                     "unanswered.")
    coverage_common_share: float = _tuned(0.1, "...counting only question terms held by at most "
                                          "this share of the indexed chunks (\"model\", "
                                          "\"method\" are too common).")
    evidence_check: bool = _doc(True, "The evidence check: ask the model afresh, with only the "
                                "chosen sentences in view, whether they answer (its P(no) is a "
                                "signal of the calibrated decision).")
    verdict_prompt: str = _doc("check", "The evidence check's wording, prompts/NAME_system.txt "
                               "and NAME_user.txt (\"check_strict\": whether the sentences state "
                               "the specific thing asked). The decision's coefficients are fit on "
                               "one wording: change it only with an AQA_DECISION_FILE fit on it "
                               "(`aqa eval rescore-check`, `aqa eval fit-decision`).")

    @field_validator("verdict_prompt")
    @classmethod
    def _verdict_prompt_exists(cls, v: str) -> str:
        if problem := prompt_pair_problem(v):
            raise ValueError(problem)
        return v

    unchosen_paper_threshold: float = _tuned(0.45, "a paper the answer names but the model did "
                                             "not choose joins only if P(its sentence does not "
                                             "answer) is below this.")


class LLMSettings(Section):
    """The answering model: the bundled local one or an OpenAI-compatible server."""

    llm_provider: Annotated[str, _registered(LLM_PROVIDERS, "auto")] = _doc(
        "auto", "auto (OpenAI when a key or base URL is set, else local), local, openai, or "
        "another name registered in rag.providers.")
    local_model: Literal["qwen2.5-coder-1.5b", "smollm2-135m"] = _doc(
        "qwen2.5-coder-1.5b", "Bundled local model: qwen2.5-coder-1.5b (default; qwen2.5-1.5b "
        "is an old alias) or smollm2-135m (tiny, for tests).")
    local_model_path: Path | None = _doc(None, "Any other GGUF file to run locally instead.",
                                         examples=["/path/to/model.gguf"])
    model_cache_dir: Path = _doc(Path.home() / ".cache" / "abstracts-qa", "Where the joined "
                                 "local model file is cached.", examples=["~/.cache/abstracts-qa"])
    llm_context: int = _doc(4096, "Context window of the local model, in tokens.")
    llm_threads: int = _doc(2, "CPU threads for the local model.")
    llm_prompt_cache_mb: int = _doc(1024, "Local model: RAM (MB) for saved prompt states (~0.4 "
                                    "GB for an evidence prompt), so the synthesis resumes it "
                                    "after the evidence check (0: off).")
    max_tokens: int = _doc(320, "Longest answer, in tokens.")
    temperature: float = _doc(0.0, "Sampling temperature (0 = deterministic, reproducible "
                              "evals).")
    openai_api_key: str | None = _doc(
        None, "OpenAI key (or AQA_OPENAI_API_KEY); setting it (or OPENAI_BASE_URL) switches to "
        "the OpenAI client.", validation_alias=_openai_env("openai_api_key"), examples=["sk-..."])
    openai_base_url: str | None = _doc(
        None, "An OpenAI-compatible server (or AQA_OPENAI_BASE_URL): vLLM, Ollama "
        "(http://localhost:11434/v1), llama.cpp server.",
        validation_alias=_openai_env("openai_base_url"), examples=["http://localhost:8000/v1"])
    openai_model: str = _doc("gpt-4o-mini", "Model name at OpenAI or at that server.")
    llm_timeout: float = _doc(60.0, "Seconds before an LLM request is abandoned.")
    llm_retries: int = _doc(2, "Retries (with exponential backoff) on rate limits and "
                            "connection errors.")
    max_question_chars: int = _doc(2000, "Longer questions are cut to this many characters, "
                                   "with a visible note.")

    @field_validator("local_model", mode="before")
    @classmethod
    def _local_model_alias(cls, v: Any) -> Any:
        return LOCAL_MODEL_ALIASES.get(v, v) if isinstance(v, str) else v

    @property
    def resolved_provider(self) -> str:
        """``llm_provider``, with ``auto`` resolved: openai when a key or base URL is set."""
        if self.llm_provider != "auto":
            return self.llm_provider
        return "openai" if (self.openai_api_key or self.openai_base_url) else "local"


class AnswerSettings(Section):
    """Checking and synthesising the answer."""

    support_threshold: float = _tuned(0.45, "support score at which an answer sentence counts "
                                      "as supported by its source.")
    synthesis_max_tokens: int = _doc(160, "Longest synthesis written over the chosen evidence, "
                                     "in tokens.")
    misattributed_cover: float = _tuned(
        0.6, "rule claim_of_another_paper: share of a synthesis sentence's content terms "
        "(paper names aside) that one sentence of another paper's evidence holds for the "
        "sentence to restate that paper.")
    misattributed_margin: float = _tuned(
        0.4, "rule claim_of_another_paper: by how much that share must exceed the best share "
        "a sentence of the paper it names holds.")
    extend_max_sentences: int = _tuned(
        3, "rule evidence_extended: most sentences of a cited abstract added to back one "
        "synthesis claim that gathers numbers or names from several sentences (0: off).")
    decision_answer_at: float = _tuned(
        0.625, "answer when the calibrated decision's P(answered) reaches this (rag/answer/decision.py; "
        "the operating point chosen from the risk-coverage curve in docs/evaluation.md).")
    decision_decline_below: float = _tuned(
        0.3, "below this P(answered) a question is declined outright; between it and "
        "AQA_DECISION_ANSWER_AT the closest passages are shown as \"not confirmed\".")
    decision_file: Path | None = _doc(None, "Decision coefficients to use instead of the "
                                      "bundled rag/answer/decision.json (written by `aqa eval "
                                      "fit-decision`).")
    paper_cite_at: float = _tuned(
        0.9, "a retrieved paper is cited when the per-paper model's P(it answers the "
        "question) reaches this (rag/answer/paper_relevance.py; the operating point chosen from the "
        "curve `aqa eval fit-papers` prints, in docs/decision.md).")
    paper_max_cited: int = _doc(4, "Most papers one answer to a \"which papers…\" question "
                                "cites.")
    paper_relevance_file: Path | None = _doc(None, "Per-paper citation coefficients to use "
                                             "instead of the bundled rag/answer/paper_relevance.json "
                                             "(written by `aqa eval fit-papers`).")


class UISettings(Section):
    """The Gradio app."""

    host: str = _doc("127.0.0.1", "Interface to bind; 0.0.0.0 shares the app on your network "
                     "(set auth then).")
    port: int = _doc(7860, "Port of the app.")
    auth_user: str | None = _doc(None, "Optional login for the app: the user name...")
    auth_password: str | None = _doc(None, "...and its password.")
    ui_timeout: float = _doc(300.0, "Seconds one chat answer or comparison may take in the UI "
                             "before it shows a timeout message.")
    ui_concurrency: int | None = _doc(None, "Answers/comparisons the UI runs at once; unset: 1 "
                                      "for the local model, else AQA_SERVER_LLM_CONCURRENCY.",
                                      examples=[1])
    server_llm_concurrency: int = _doc(8, "Answers/comparisons at once against an "
                                       "OpenAI-compatible server when AQA_UI_CONCURRENCY is "
                                       "unset.")
    ui_workers: int = _doc(8, "Search, paper browsing and other requests without the LLM that "
                           "the UI runs at once.")
    ui_queue_size: int = _doc(256, "Requests of any kind that may wait in Gradio's queue; "
                              "chat answers are admitted by AQA_UI_MAX_WAIT instead.")
    ui_max_wait: float = _doc(30.0, "A chat question that would wait longer than this many "
                              "seconds (estimated from recent answers) for an answer slot is "
                              "refused at once with when to retry; at least one may always "
                              "wait.")
    ui_min_score: float = _doc(0.35, "Papers explorer: search matches scoring below this are "
                               "not listed (a slider in the app).")
    ui_search_limit: int = _doc(30, "Papers explorer: papers a search returns before the "
                                "cut-off.")


# The sections, in .env.example's order: attribute of Settings -> model.
SECTIONS: dict[str, type[Section]] = {
    "storage": StorageSettings, "corpus": CorpusSettings, "embeddings": EmbeddingSettings,
    "retrieval": RetrievalSettings, "evidence": EvidenceSettings, "llm": LLMSettings,
    "answer": AnswerSettings, "ui": UISettings,
}

# Field name (= env name without AQA_, lower-cased) -> its section.
SECTION_OF: dict[str, str] = {
    name: section for section, model in SECTIONS.items() for name in model.model_fields
}
