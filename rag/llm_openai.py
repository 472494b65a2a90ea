"""The OpenAI-compatible LLM backend (``OpenAILLM``, re-exported by
``rag.llm``): OpenAI or any compatible server (vLLM, Ollama, llama.cpp server)
through the ``openai`` client, with a cap on concurrent streams, retries before
the first token, a fallback when structured output is refused, and every HTTP,
stream and event fault mapped to one ``LLMError`` line.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

from rag.config import Settings
from rag.errors import LLMCancelled, LLMError
from rag.llm import (
    Messages,
    _check_cancel,
    _overflow_reason,
    _short,
    _wait_cancellable,
    backoff_seconds,
)

log = logging.getLogger(__name__)


# Forms of structured output, in the order they are tried: OpenAI's (also vLLM,
# Ollama, llama.cpp's llama-server), then the json_object-with-schema form that
# llama-cpp-python's server (and Anyscale, Together) take instead.
_SCHEMA_FORMS = ("json_schema", "json_object")


def _response_format(form: str, schema: dict) -> dict[str, Any]:
    if form == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
    return {"type": "json_object", "schema": schema}


def _said(e: Any) -> str:
    """The server's own error message of an ``openai.APIStatusError``."""
    body = e.body if isinstance(e.body, dict) else {}
    err = body.get("error", body)
    said = err.get("message") if isinstance(err, dict) else None
    return said if isinstance(said, str) and said else str(e.message)


def _rejects_response_format(e: Any) -> bool:
    """Whether a refused request was refused for its ``response_format``: any
    400/422 but a context overflow, or a 5xx whose message names the field
    (llama-cpp-python's server answers a ``json_schema`` request with a 500)."""
    said = _short(_said(e), limit=2000)
    if _overflow_reason(said):
        return False
    if e.status_code in (400, 422):
        return True
    return e.status_code >= 500 and "response_format" in said


class OpenAILLM:
    """OpenAI or any OpenAI-compatible server (vLLM, Ollama, llama.cpp server)."""

    def __init__(self, settings: Settings) -> None:
        import openai

        if not settings.llm.openai_api_key and not settings.llm.openai_base_url:
            raise LLMError(
                "No OpenAI API key: set OPENAI_API_KEY in .env, or OPENAI_BASE_URL for a local "
                "server, or AQA_LLM_PROVIDER=local for the bundled model."
            )
        self._settings = settings
        self.name = f"openai:{settings.llm.openai_model}"
        self._where = settings.llm.openai_base_url or "api.openai.com"
        # The structured-output form this server takes (_SCHEMA_FORMS), narrowed
        # once it rejects one; None: it takes none and the reply is parsed as is.
        self._schema_form: str | None = _SCHEMA_FORMS[0]
        # At most llm_concurrency streams at once from this process, whichever
        # UI event or CLI thread asks (AQA_UI_CONCURRENCY / _SERVER_LLM_CONCURRENCY).
        self._slots = threading.BoundedSemaphore(max(1, settings.llm_concurrency))
        self._client = openai.OpenAI(
            # Local servers accept any key; the client insists on one.
            api_key=settings.llm.openai_api_key or "not-needed",
            base_url=settings.llm.openai_base_url,
            timeout=settings.llm.llm_timeout,
            max_retries=settings.llm.llm_retries,  # the client backs off exponentially
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
            return LLMError(f"Rate limited by {self._where} after {s.llm.llm_retries} retries: "
                            "wait and try again, or raise AQA_LLM_RETRIES.",
                            where=self._where, reason="HTTP 429")
        if isinstance(e, openai.APITimeoutError):
            return self._fail(f"it did not answer within {s.llm.llm_timeout:g} s: raise "
                              "AQA_LLM_TIMEOUT or use a smaller model")
        if isinstance(e, openai.APIConnectionError):
            cause = e.__cause__ or e.__context__
            detail = f" ({_short(cause)})" if cause is not None else ""
            return self._fail(f"Cannot reach the LLM server{detail}: is it running, and is "
                              "OPENAI_BASE_URL right?")
        if isinstance(e, openai.NotFoundError):
            return LLMError(f"Model '{s.llm.openai_model}' not found at {self._where}: check "
                            "AQA_OPENAI_MODEL.", where=self._where, reason="HTTP 404")
        if isinstance(e, openai.APIStatusError):
            message = _short(_said(e))
            overflow = _overflow_reason(message) if e.status_code in (400, 413) else None
            return self._fail(overflow or f"HTTP {e.status_code}: {message}")
        return self._fail(_short(e))

    def _stream_error(self, e: Exception) -> LLMError:
        """Map an error raised while reading the event stream."""
        import httpx
        import openai

        s = self._settings
        if isinstance(e, httpx.TimeoutException):
            return self._fail(f"the reply stalled: no data for {s.llm.llm_timeout:g} s "
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
        form = self._schema_form if json_schema is not None else None
        # The messages (and response_format) travel in ``extra_body``, which the
        # client sends as given: passed as arguments, the client re-walks them
        # against its typed-dict schema on every request (cProfile: 16% of the
        # engine's CPU an answer, docs/benchmarks.md), for the same bytes on the
        # wire. They are plain JSON already.
        body: dict[str, Any] = {"messages": messages}
        if form is not None and json_schema is not None:
            body["response_format"] = _response_format(form, json_schema)
        try:
            return self._client.chat.completions.create(
                model=s.llm.openai_model,
                messages=[],
                max_tokens=max_tokens,
                temperature=temperature,
                stream=True,
                extra_body=body,
            )
        except openai.APIStatusError as e:
            if form is None or not _rejects_response_format(e):
                raise
            # The server does not take this form of structured output: ask again
            # in the next form it may take (its error names json_object, as
            # llama-cpp-python's server does), else without it.
            said = _short(_said(e))
            later = _SCHEMA_FORMS[_SCHEMA_FORMS.index(form) + 1:]
            self._schema_form = later[0] if later and later[0] in said else None
            log.warning("%s rejected response_format %s (HTTP %s: %s); continuing %s",
                        self._where, form, e.status_code, said,
                        f"with {self._schema_form}" if self._schema_form else "without it")
            return self._open(messages, max_tokens, temperature, json_schema)

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
        give_up = time.monotonic() + max(s.llm.llm_timeout, s.ui.ui_timeout)
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

        attempts = max(0, self._settings.llm.llm_retries) + 1
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
