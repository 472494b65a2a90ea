"""abstracts-qa engine: grounded, cited question answering over paper abstracts.

Import ``rag.Engine``; it is the one API the CLI, the UI and the evals call.

Importing ``rag`` has no side effects and loads no model library: the entry
points (``aqa``, the UI's ``serve``, ``python -m eval.cli``) call
``rag.config.setup_offline_env()`` before anything heavy is imported; code
that embeds the engine should do the same.
"""

from rag.config import Settings, get_settings
from rag.errors import AqaError, CorpusError, LLMError
from rag.types import (
    Answer,
    Citation,
    CompareCell,
    Comparison,
    CorpusStatus,
    Filters,
    IngestReport,
    Paper,
    Passage,
    Provenance,
    SearchHit,
    SentenceSupport,
    StreamEvent,
    Timings,
)


def __getattr__(name: str):
    """``rag.Engine`` is imported on first use: the engine pulls in the model
    libraries (seconds), and the CLI must be able to say "loading…" first."""
    if name == "Engine":
        from rag.engine import Engine

        return Engine
    raise AttributeError(f"module 'rag' has no attribute {name!r}")


__all__ = [
    "AqaError", "Answer", "Citation", "Comparison", "CompareCell", "CorpusError",
    "CorpusStatus", "Engine", "Filters", "IngestReport", "LLMError", "Paper", "Passage",
    "Provenance", "SearchHit", "SentenceSupport", "Settings", "StreamEvent", "Timings",
    "get_settings",
]
