"""Warm-up at start-up (issue 29, item 9): ``aqa serve`` loads the embedding
model and the LLM, and builds the retriever's snapshot (BM25), on a
background thread right after launch, so the first question is not the
slowest. While it runs the page shows ``MESSAGE`` (``ui.app`` polls
``pending`` with a timer) and a question asked meanwhile waits for it
(``ui.session.AqaUI``)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

log = logging.getLogger(__name__)

MESSAGE = "⏳ Loading the models… (first start)"


class Warmup:
    """One warm-up of one engine: ``start`` runs it on a daemon thread;
    ``pending`` until it has finished (or failed: a failure is logged and the
    first question then loads what it needs, reporting any error itself)."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self.error: str | None = None
        self.seconds: float | None = None

    @property
    def pending(self) -> bool:
        return not self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """True once the warm-up has finished (within ``timeout`` seconds)."""
        return self._done.wait(timeout)

    def run(self, engine: Any) -> None:
        """Load the models (the engine's optional ``warm()``: ``rag.Engine``
        has it, the ``EngineAPI`` protocol does not require it) and run one
        tiny search (the retriever's snapshot and BM25 index)."""
        t0 = time.perf_counter()
        try:
            warm = getattr(engine, "warm", None)
            if callable(warm):
                warm()
            engine.search("warm up", k=1)
        except Exception as e:  # noqa: BLE001 - the first question reports it properly
            self.error = str(e) or type(e).__name__
            log.warning("warm-up failed; the first question loads the models", exc_info=True)
        finally:
            self.seconds = round(time.perf_counter() - t0, 2)
            self._done.set()
            log.info("warm-up finished in %.1f s", self.seconds)

    def start(self, engine: Any) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(engine,), name="aqa-warmup",
                                  daemon=True)
        thread.start()
        return thread
