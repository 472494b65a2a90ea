"""LLM backends behind one small protocol: a local GGUF through llama-cpp-python
(the offline default) or any OpenAI-compatible endpoint through ``openai``.

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
``cancel_scope``) is set, or after ``cancel_all()`` at shutdown.
"""

from __future__ import annotations

import contextvars
import json
import logging
import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from rag.config import Settings
from rag.errors import LLMCancelled, LLMError

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
    """Stop every running and future generation of this process (shutdown)."""
    _shutdown.set()


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


class LocalLLM:
    """A GGUF model run in-process by llama.cpp, using the GGUF's chat template.

    One llama.cpp context is not re-entrant, so one stream owns it at a time.
    Ownership is released when the stream finishes, fails or is closed (also
    by the garbage collector). A stream left suspended at a token for longer
    than ``AQA_LLM_TIMEOUT`` counts as abandoned: the next user reclaims the
    model, and the abandoned stream ends with ``LLMCancelled`` if resumed.
    """

    def __init__(self, settings: Settings) -> None:
        from rag.models import local_model_file

        self.path = local_model_file(settings)
        self.name = f"local:{self.path.name}"
        self._settings = settings
        self._llm: Any = None
        self._load_lock = threading.Lock()
        self._cond = threading.Condition()
        self._owner: object | None = None
        self._suspended_since: float | None = None  # owner is parked at a yield

    def _fail(self, reason: str) -> LLMError:
        return LLMError(f"The local model {self.path.name} failed: {reason}",
                        where=str(self.path), reason=reason)

    def load(self) -> Any:
        """Load the GGUF now (once; ``Engine.warm``), instead of at the first question."""
        with self._load_lock:
            if self._llm is None:
                try:
                    from llama_cpp import Llama
                except ImportError as e:  # pragma: no cover - install problem
                    raise LLMError(f"llama-cpp-python is not installed ({e}); run ./setup.sh") from e
                try:
                    self._llm = Llama(
                        model_path=str(self.path),
                        n_ctx=self._settings.llm_context,
                        n_threads=self._settings.llm_threads,
                        verbose=False,
                    )
                except Exception as e:
                    raise LLMError(f"Could not load local model {self.path}: {e}") from e
            return self._llm

    # --- ownership of the one llama.cpp context ---
    def _acquire(self, me: object, cancel: threading.Event | None) -> None:
        s = self._settings
        stale_after = s.llm_timeout
        give_up = time.monotonic() + max(s.llm_timeout, s.ui_timeout)
        with self._cond:
            while self._owner is not None:
                parked = self._suspended_since
                if parked is not None and time.monotonic() - parked > stale_after:
                    log.warning("reclaiming the local model from a stream abandoned for %.0f s",
                                time.monotonic() - parked)
                    self._owner = None
                    break
                if time.monotonic() > give_up:
                    raise self._fail("it is busy with another request; try again shortly")
                _check_cancel(cancel)
                self._cond.wait(0.1)
            self._owner, self._suspended_since = me, None

    def _release(self, me: object) -> None:
        with self._cond:
            if self._owner is me:
                self._owner, self._suspended_since = None, None
                self._cond.notify_all()

    def _park(self, me: object, parked: bool) -> None:
        with self._cond:
            if self._owner is not me:
                raise LLMCancelled("The local model was reclaimed from this abandoned stream.")
            self._suspended_since = time.monotonic() if parked else None

    def stream_chat(
        self, messages: Messages, *, max_tokens: int, temperature: float,
        json_schema: dict | None = None, cancel: threading.Event | None = None,
    ) -> Iterator[str]:
        _check_cancel(cancel)
        llm = self.load()  # outside the ownership: loading never blocks a running stream
        me = object()
        self._acquire(me, cancel)
        stream: Any = None
        try:
            kwargs: dict[str, Any] = {}
            if json_schema is not None:
                kwargs["response_format"] = {"type": "json_object", "schema": json_schema}
            try:
                stream = llm.create_chat_completion(
                    messages=messages, max_tokens=max_tokens, temperature=temperature,
                    stream=True, **kwargs,
                )
            except ValueError as e:
                raise self._fail(_overflow_reason(str(e)) or str(e)) from e
            while True:
                _check_cancel(cancel)
                try:
                    chunk = next(stream)
                except StopIteration:
                    break
                except ValueError as e:  # "Requested tokens (N) exceed context window of M"
                    raise self._fail(_overflow_reason(str(e)) or str(e)) from e
                except RuntimeError as e:  # llama_decode failures
                    raise self._fail(str(e)) from e
                piece = chunk["choices"][0].get("delta", {}).get("content")
                if piece:
                    self._park(me, True)
                    yield piece
                    self._park(me, False)
        finally:
            if stream is not None and self._owner is me:
                try:
                    stream.close()  # stops llama.cpp at this token
                except Exception:  # noqa: BLE001 - best effort
                    log.debug("closing the llama.cpp stream failed", exc_info=True)
            self._release(me)


class OpenAILLM:
    """OpenAI or any OpenAI-compatible server (vLLM, Ollama, llama.cpp server)."""

    def __init__(self, settings: Settings) -> None:
        import openai

        if not settings.openai_api_key and not settings.openai_base_url:
            raise LLMError(
                "No OpenAI API key: set OPENAI_API_KEY in .env, or OPENAI_BASE_URL for a local "
                "server, or AQA_LLM_PROVIDER=local for the bundled model."
            )
        self._settings = settings
        self.name = f"openai:{settings.openai_model}"
        self._where = settings.openai_base_url or "api.openai.com"
        self._schema_ok = True  # False once the server rejected response_format
        # At most llm_concurrency streams at once from this process, whichever
        # UI event or CLI thread asks (AQA_UI_CONCURRENCY / _SERVER_LLM_CONCURRENCY).
        self._slots = threading.BoundedSemaphore(max(1, settings.llm_concurrency))
        self._client = openai.OpenAI(
            # Local servers accept any key; the client insists on one.
            api_key=settings.openai_api_key or "not-needed",
            base_url=settings.openai_base_url,
            timeout=settings.llm_timeout,
            max_retries=settings.llm_retries,  # the client backs off exponentially
        )

    def _fail(self, reason: str) -> LLMError:
        return LLMError(f"The language model at {self._where} failed: {reason}",
                        where=self._where, reason=reason)

    def _request_error(self, e: Exception) -> LLMError:
        """Map an error raised while opening the stream (after the client's own retries)."""
        import openai

        s = self._settings
        if isinstance(e, openai.AuthenticationError):
            return LLMError(f"The LLM server at {self._where} rejected the API key (401): "
                            "check OPENAI_API_KEY.", where=self._where, reason="HTTP 401")
        if isinstance(e, openai.RateLimitError):
            return LLMError(f"Rate limited by {self._where} after {s.llm_retries} retries: wait "
                            "and try again, or raise AQA_LLM_RETRIES.",
                            where=self._where, reason="HTTP 429")
        if isinstance(e, openai.APITimeoutError):
            return self._fail(f"it did not answer within {s.llm_timeout:g} s: raise "
                              "AQA_LLM_TIMEOUT or use a smaller model")
        if isinstance(e, openai.APIConnectionError):
            cause = e.__cause__ or e.__context__
            detail = f" ({_short(cause)})" if cause is not None else ""
            return self._fail(f"Cannot reach the LLM server{detail}: is it running, and is "
                              "OPENAI_BASE_URL right?")
        if isinstance(e, openai.NotFoundError):
            return LLMError(f"Model '{s.openai_model}' not found at {self._where}: check "
                            "AQA_OPENAI_MODEL.", where=self._where, reason="HTTP 404")
        if isinstance(e, openai.APIStatusError):
            body = e.body if isinstance(e.body, dict) else {}
            err = body.get("error", body)
            said = err.get("message") if isinstance(err, dict) else None
            message = _short(said if isinstance(said, str) and said else e.message)
            overflow = _overflow_reason(message) if e.status_code in (400, 413) else None
            return self._fail(overflow or f"HTTP {e.status_code}: {message}")
        return self._fail(_short(e))

    def _stream_error(self, e: Exception) -> LLMError:
        """Map an error raised while reading the event stream."""
        import httpx
        import openai

        s = self._settings
        if isinstance(e, httpx.TimeoutException):
            return self._fail(f"the reply stalled: no data for {s.llm_timeout:g} s "
                              "(AQA_LLM_TIMEOUT)")
        if isinstance(e, httpx.RemoteProtocolError):
            return self._fail(f"the reply was cut off mid-stream ({_short(e)})")
        if isinstance(e, httpx.TransportError):
            return self._fail(f"the connection broke mid-reply ({_short(e)})")
        if isinstance(e, json.JSONDecodeError):
            return self._fail(f"it sent a malformed event (not JSON: {_short(e)})")
        if isinstance(e, openai.APIError):  # an {"error": ...} event inside the stream
            return self._fail(f"it reported an error mid-stream: {_short(e.message)}")
        if isinstance(e, (AttributeError, KeyError, IndexError, TypeError, ValueError)):
            return self._fail(f"it sent an event that is not a chat-completion chunk ({_short(e)})")
        return self._fail(_short(e))

    def _open(self, messages: Messages, max_tokens: int, temperature: float,
              json_schema: dict | None) -> Any:
        import openai

        s = self._settings
        kwargs: dict[str, Any] = {}
        if json_schema is not None and self._schema_ok:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": json_schema},
            }
        try:
            return self._client.chat.completions.create(
                model=s.openai_model,
                messages=messages,  # type: ignore[arg-type]
                max_tokens=max_tokens,
                temperature=temperature,
                stream=True,
                **kwargs,
            )
        except openai.BadRequestError as e:
            if not kwargs or _overflow_reason(_short(e.message)):
                raise
            # The server does not do structured output: ask again without it.
            log.warning("%s rejected response_format (%s); continuing without it",
                        self._where, _short(e.message))
            self._schema_ok = False
            return self._open(messages, max_tokens, temperature, None)

    def stream_chat(
        self, messages: Messages, *, max_tokens: int, temperature: float,
        json_schema: dict | None = None, cancel: threading.Event | None = None,
    ) -> Iterator[str]:
        self._take_slot(cancel)
        try:
            yield from self._stream(messages, max_tokens, temperature, json_schema, cancel)
        finally:
            self._slots.release()

    def _take_slot(self, cancel: threading.Event | None) -> None:
        s = self._settings
        give_up = time.monotonic() + max(s.llm_timeout, s.ui_timeout)
        while not self._slots.acquire(timeout=0.1):
            _check_cancel(cancel)
            if time.monotonic() > give_up:
                raise self._fail(f"{s.llm_concurrency} requests were already running for too "
                                 "long (AQA_UI_CONCURRENCY); try again shortly")
        try:
            _check_cancel(cancel)
        except LLMCancelled:
            self._slots.release()
            raise

    def _stream(self, messages: Messages, max_tokens: int, temperature: float,
                json_schema: dict | None, cancel: threading.Event | None) -> Iterator[str]:
        import openai

        attempts = max(0, self._settings.llm_retries) + 1
        for attempt in range(attempts):
            _check_cancel(cancel)
            try:
                stream = self._open(messages, max_tokens, temperature, json_schema)
            except openai.APIError as e:  # the client has already retried what it could
                raise self._request_error(e) from e
            yielded = False
            try:
                error = None
                try:
                    for piece, finished in self._pieces(stream, cancel):
                        if piece:
                            yielded = True
                            yield piece
                        if finished:
                            return
                    error = self._fail(self._no_finish_reason(stream, yielded))
                except LLMCancelled:
                    raise
                except Exception as e:  # noqa: BLE001 - mapped to one line below
                    error = self._stream_error(e)
                    error.__cause__ = e
                if yielded or attempt + 1 >= attempts:
                    raise error
                log.warning("%s; retrying (%d of %d)", error, attempt + 1, attempts - 1)
            finally:
                stream.close()  # on close/cancel too: the server sees the disconnect
            _wait_cancellable(backoff_seconds(attempt), cancel)

    @staticmethod
    def _pieces(stream: Any, cancel: threading.Event | None) -> Iterator[tuple[str, bool]]:
        """(text, finished) per chunk; ``finished`` once a finish_reason arrives."""
        for chunk in stream:
            _check_cancel(cancel)
            if getattr(chunk, "choices", None) is None:
                raise ValueError("no 'choices' in the event")
            if not chunk.choices:  # e.g. a usage-only chunk
                continue
            choice = chunk.choices[0]
            delta = choice.delta
            text = (delta.content if delta is not None else None) or ""
            yield text, bool(choice.finish_reason)

    @staticmethod
    def _no_finish_reason(stream: Any, yielded: bool) -> str:
        if yielded:
            return "the reply stopped before it was finished (no finish_reason)"
        ctype = ""
        response = getattr(stream, "response", None)
        if response is not None:
            ctype = response.headers.get("content-type", "")
        if ctype and "text/event-stream" not in ctype:
            return (f"the reply is not an OpenAI-compatible event stream (Content-Type {ctype}); "
                    "is OPENAI_BASE_URL an OpenAI-compatible /v1 endpoint?")
        return "the reply contained no completion (an empty event stream)"


def _short(e: object, limit: int = 200) -> str:
    """One line of at most ``limit`` characters describing ``e``."""
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def make_llm(settings: Settings) -> LLM:
    """The LLM registered under ``settings.resolved_llm_provider`` (``rag.providers``:
    ``local`` and ``openai`` built in)."""
    from rag.providers import LLM_PROVIDERS

    return LLM_PROVIDERS.create(settings.resolved_llm_provider, settings)
