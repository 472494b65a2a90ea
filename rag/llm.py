"""LLM backends behind one small protocol: a local GGUF through llama-cpp-python
(the offline default, ``rag.llm_local``) or any OpenAI-compatible endpoint
through ``openai`` (``rag.llm_openai``). This module owns the protocol, the
cancellation scope, the shared error helpers and ``make_llm``; both backends
are importable from here too.

Why not LlamaIndex's LlamaCPP/OpenAI wrappers: the LlamaCPP wrapper formats
prompts itself instead of using the chat template inside the GGUF, and we need
each failure mode mapped to a one-line actionable ``LLMError``.

Failure contract of ``stream_chat`` (issue 8): every fault of the model or
its server (unreachable, HTTP errors, a stream that stalls, breaks off, sends
a malformed event or no event at all, a prompt longer than the context) ends
in one ``LLMError`` whose message reads "The language model at <where>
failed: <reason>", never a traceback and never an empty reply that would look
like a decline. Failures before the first token are retried with exponential
backoff (``AQA_LLM_RETRIES``); after a token was yielded nothing is retried,
since the caller has already shown it.

Cancellation: generation stops at the next token when the consumer closes the
generator, when the ``cancel`` event (or the one installed by
``cancel_scope``) is set, or after ``cancel_all()`` at shutdown (until
``reset_cancel_all()``, which a server starting afresh in the process calls).
"""

from __future__ import annotations

import contextvars
import logging
import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from rag.config import Settings
from rag.errors import LLMCancelled

log = logging.getLogger(__name__)

Messages = list[dict[str, str]]

# ---------------------------------------------------------------- cancelling

_scope: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "aqa_llm_cancel", default=None)
_shutdown = threading.Event()


@contextmanager
def cancel_scope(event: threading.Event) -> Iterator[threading.Event]:
    """Every ``stream_chat`` iterated inside this block (in this thread or
    context) stops at its next token once ``event`` is set. Lets a caller that
    only holds a whole engine call (e.g. ``Engine.compare``) release the LLM."""
    token = _scope.set(event)
    try:
        yield event
    finally:
        _scope.reset(token)


def cancel_all() -> None:
    """Stop every running and future generation of this process (shutdown),
    until ``reset_cancel_all``."""
    _shutdown.set()


def reset_cancel_all() -> None:
    """Undo ``cancel_all``: generations run again, for a server or engine
    started in this process after an earlier one shut down."""
    _shutdown.clear()


def _check_cancel(cancel: threading.Event | None) -> None:
    scoped = _scope.get()
    if _shutdown.is_set():
        raise LLMCancelled("The app is shutting down; the answer was abandoned.")
    if (cancel is not None and cancel.is_set()) or (scoped is not None and scoped.is_set()):
        raise LLMCancelled("The request was cancelled; generation stopped.")


def _wait_cancellable(seconds: float, cancel: threading.Event | None) -> None:
    """Sleep ``seconds`` (a retry backoff), waking early to honour a cancel."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        _check_cancel(cancel)
        time.sleep(min(left, 0.05))
    _check_cancel(cancel)


def backoff_seconds(attempt: int) -> float:
    """The openai client's own schedule: 0.5 s doubling, at most 8 s, with jitter."""
    return min(0.5 * 2**attempt, 8.0) * (1 - 0.25 * random.random())


# ------------------------------------------------------------------ protocol


class LLM(Protocol):
    name: str

    def stream_chat(
        self, messages: Messages, *, max_tokens: int, temperature: float,
        json_schema: dict | None = None, cancel: threading.Event | None = None,
    ) -> Iterator[str]:
        """Yield the reply's text pieces as they are generated. ``json_schema``
        asks for output constrained to that JSON schema, where the backend can."""
        ...


_CONTEXT_HINT = "ask a shorter question, or raise AQA_LLM_CONTEXT"


def _overflow_reason(detail: str) -> str | None:
    """A plain reason when ``detail`` says the prompt exceeds the context."""
    low = detail.lower()
    if any(k in low for k in ("context window", "context length", "maximum context",
                              "too many tokens", "prompt is too long", "exceed")):
        return f"the prompt does not fit its context window ({detail.strip()}): {_CONTEXT_HINT}"
    return None


def _short(e: object, limit: int = 200) -> str:
    """One line of at most ``limit`` characters describing ``e``."""
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def make_llm(settings: Settings) -> LLM:
    """The LLM registered under ``settings.llm.resolved_provider`` (``rag.providers``:
    ``local`` and ``openai`` built in)."""
    from rag.providers import LLM_PROVIDERS

    return LLM_PROVIDERS.create(settings.llm.resolved_provider, settings)


# The backends live in their own modules and import the helpers above, so they
# are loaded on first use (``rag.llm.LocalLLM``, ``from rag.llm import
# OpenAILLM``, the ``rag.llm:LocalLLM`` provider entries): no import cycle.
_BACKENDS = {"LocalLLM": "rag.llm_local", "OpenAILLM": "rag.llm_openai"}


def __getattr__(name: str) -> Any:
    module = _BACKENDS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
