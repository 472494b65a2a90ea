"""LLM work off the event thread: ``run_with_deadline`` runs an engine call in
a worker thread under a deadline (``settings.ui.ui_timeout``) so a slow or
unreachable model ends in a clear message, never a frozen spinner;
``error_text`` turns any failure into the one line the UI shows."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from rag.errors import AqaError
from rag.llm import cancel_scope

log = logging.getLogger(__name__)


class UITimeout(AqaError):
    """An answer or comparison took longer than ``settings.ui.ui_timeout``."""


def run_with_deadline(make_iter: Callable[[], Iterable[Any]], timeout: float,
                      what: str = "The answer") -> Iterator[Any]:
    """Iterate ``make_iter()`` in a worker thread, re-yielding its items here.

    Raises the worker's exception, or ``UITimeout`` once ``timeout`` seconds
    have passed. On timeout or early close the worker stops at its next item
    and closes the engine generator, and any LLM stream inside the call (also
    one inside a single call such as ``engine.compare``) stops at its next
    token (``rag.llm.cancel_scope``), which releases the LLM for other users.
    """
    q: queue.Queue[tuple[str, Any]] = queue.Queue()
    cancel = threading.Event()

    def work() -> None:
        it = None
        try:
            with cancel_scope(cancel):
                it = iter(make_iter())
                for item in it:
                    if cancel.is_set():
                        break
                    q.put(("item", item))
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            q.put(("error", e))
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # noqa: BLE001 - best effort cleanup
                    log.debug("closing engine iterator failed", exc_info=True)
            q.put(("done", None))

    threading.Thread(target=work, name="aqa-ui-worker", daemon=True).start()
    deadline = time.monotonic() + timeout
    try:
        while True:
            remaining = deadline - time.monotonic()
            try:
                if remaining <= 0:
                    raise queue.Empty
                kind, value = q.get(timeout=remaining)
            except queue.Empty:
                raise UITimeout(
                    f"{what} took longer than {timeout:g} s (AQA_UI_TIMEOUT). The language "
                    "model may be slow or unreachable; try again or raise the timeout."
                ) from None
            if kind == "item":
                yield value
            elif kind == "error":
                raise value
            else:
                return
    finally:
        cancel.set()


def error_text(err: BaseException) -> str:
    """The one line shown for a failure: an ``AqaError``'s own message, else
    the exception's type and text (logged with its traceback)."""
    if isinstance(err, AqaError):
        return str(err) or type(err).__name__
    log.error("unexpected error in the UI", exc_info=err)
    return f"Unexpected error ({type(err).__name__}): {err}. See the server log."
