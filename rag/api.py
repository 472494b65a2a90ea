"""``EngineAPI``: the public engine surface that the UI codes against.

``rag.engine.Engine`` implements it, and so do the UI's test fakes
(``tests/conftest_ui.py``, ``tests/test_ui_unit.py``); a unit test compares
their signatures with this protocol, so a fake cannot drift from the engine.
Importing this module loads no model library.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from rag.config import Settings
from rag.types import (
    Answer,
    Comparison,
    CorpusStatus,
    Filters,
    IngestReport,
    Paper,
    SearchResults,
    StreamEvent,
)

if TYPE_CHECKING:
    from rag.topics import TopicMap

History = Sequence[dict]  # [{"role": "user"|"assistant", "content": str}, ...]


@runtime_checkable
class EngineAPI(Protocol):
    settings: Settings

    def ingest(self, paths: Sequence[Path | str] | None = None, *, prune: bool = False,
               rebuild: bool = False, progress: bool = True) -> IngestReport: ...

    def search(self, query: str, *, k: int | None = None, filters: Filters | None = None,
               mode: str | None = None, min_score: float | None = None) -> SearchResults: ...

    def ask(self, question: str, *, history: History = (), k: int | None = None,
            filters: Filters | None = None) -> Answer: ...

    def ask_stream(self, question: str, *, history: History = (), k: int | None = None,
                   filters: Filters | None = None) -> Iterator[StreamEvent]: ...

    def compare(self, papers: Sequence[str] | None = None, *, query: str | None = None,
                progress: Callable[[str], None] | None = None) -> Comparison: ...

    def papers(self, query: str | None = None, *, limit: int | None = None,
               filters: Filters | None = None, min_score: float | None = None) -> list[Paper]: ...

    def get_paper(self, ref: str) -> Paper: ...

    def status(self) -> CorpusStatus: ...

    def example_questions(self, n: int = 4) -> list[str]: ...

    def topic_map(self) -> TopicMap: ...


def api_methods() -> list[str]:
    """The methods of ``EngineAPI`` (the signature test walks them)."""
    return sorted(n for n, v in vars(EngineAPI).items()
                  if callable(v) and not n.startswith("_"))
