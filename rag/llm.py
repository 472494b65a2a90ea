"""LLM backends behind one small protocol: a local GGUF through llama-cpp-python
(the offline default) or any OpenAI-compatible endpoint through ``openai``.

Why not LlamaIndex's LlamaCPP/OpenAI wrappers: the LlamaCPP wrapper formats
prompts itself instead of using the chat template inside the GGUF, and we need
each OpenAI failure mode mapped to a one-line actionable ``LLMError``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Protocol

from rag.config import Settings
from rag.errors import LLMError

Messages = list[dict[str, str]]


class LLM(Protocol):
    name: str

    def stream_chat(
        self, messages: Messages, *, max_tokens: int, temperature: float
    ) -> Iterator[str]:
        """Yield the reply's text pieces as they are generated."""
        ...


class LocalLLM:
    """A GGUF model run in-process by llama.cpp, using the GGUF's chat template."""

    def __init__(self, settings: Settings) -> None:
        from rag.models import local_model_file

        self.path = local_model_file(settings)
        self.name = f"local:{self.path.name}"
        self._settings = settings
        self._llm = None
        # One llama.cpp context is not re-entrant; serialise concurrent users.
        self._lock = threading.Lock()

    def _load(self):
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

    def stream_chat(
        self, messages: Messages, *, max_tokens: int, temperature: float
    ) -> Iterator[str]:
        with self._lock:
            llm = self._load()
            stream = llm.create_chat_completion(
                messages=messages, max_tokens=max_tokens, temperature=temperature, stream=True
            )
            for chunk in stream:
                piece = chunk["choices"][0].get("delta", {}).get("content")
                if piece:
                    yield piece


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
        self._client = openai.OpenAI(
            # Local servers accept any key; the client insists on one.
            api_key=settings.openai_api_key or "not-needed",
            base_url=settings.openai_base_url,
            timeout=settings.llm_timeout,
            max_retries=settings.llm_retries,  # the client backs off exponentially
        )

    def stream_chat(
        self, messages: Messages, *, max_tokens: int, temperature: float
    ) -> Iterator[str]:
        import openai

        s = self._settings
        try:
            stream = self._client.chat.completions.create(
                model=s.openai_model,
                messages=messages,  # type: ignore[arg-type]
                max_tokens=max_tokens,
                temperature=temperature,
                stream=True,
            )
            for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    yield chunk.choices[0].delta.content
        except openai.AuthenticationError as e:
            raise LLMError(
                f"The LLM server at {self._where} rejected the API key (401): check OPENAI_API_KEY."
            ) from e
        except openai.RateLimitError as e:
            raise LLMError(
                f"Rate limited by {self._where} after {s.llm_retries} retries: wait and try "
                "again, or raise AQA_LLM_RETRIES."
            ) from e
        except openai.APITimeoutError as e:
            raise LLMError(
                f"The LLM at {self._where} did not answer within {s.llm_timeout:g} s: "
                "raise AQA_LLM_TIMEOUT or use a smaller model."
            ) from e
        except openai.APIConnectionError as e:
            raise LLMError(
                f"Cannot reach the LLM server at {self._where}: is it running and is "
                "OPENAI_BASE_URL right?"
            ) from e
        except openai.NotFoundError as e:
            raise LLMError(
                f"Model '{s.openai_model}' not found at {self._where}: check AQA_OPENAI_MODEL."
            ) from e
        except openai.APIStatusError as e:
            raise LLMError(f"The LLM at {self._where} failed with HTTP {e.status_code}: {e.message}") from e


class FakeLLM:
    """Deterministic stand-in for unit tests: replies with a scripted text, or a
    function of the messages."""

    def __init__(self, reply: str | None = None, fn=None, name: str = "fake") -> None:
        self.reply, self.fn, self.name = reply, fn, name
        self.calls: list[Messages] = []

    def stream_chat(
        self, messages: Messages, *, max_tokens: int, temperature: float
    ) -> Iterator[str]:
        self.calls.append(messages)
        text = self.fn(messages) if self.fn else (self.reply or "")
        for i in range(0, len(text), 7):
            yield text[i : i + 7]


def make_llm(settings: Settings) -> LLM:
    if settings.resolved_llm_provider == "openai":
        return OpenAILLM(settings)
    return LocalLLM(settings)
