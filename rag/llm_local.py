"""The local LLM backend (``LocalLLM``, re-exported by ``rag.llm``): a GGUF run
in process by llama-cpp-python with the GGUF's own chat template, one stream
owning the llama.cpp context at a time, and llama.cpp's failures mapped to one
``LLMError`` line. Cancellation and error helpers come from ``rag.llm``.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

from rag.config import Settings
from rag.errors import LLMCancelled, LLMError
from rag.llm import Messages, _check_cancel, _overflow_reason

log = logging.getLogger(__name__)


class LocalLLM:
    """A GGUF model run in-process by llama.cpp, using the GGUF's chat template.

    One llama.cpp context is not re-entrant, so one stream owns it at a time,
    handed over in the order streams asked for it.
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
        self._waiting: collections.deque[object] = collections.deque()  # arrival order
        self._formatter: Any = None  # the GGUF's chat template, for option_probabilities

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
                        n_ctx=self._settings.llm.llm_context,
                        n_threads=self._settings.llm.llm_threads,
                        verbose=False,
                    )
                except Exception as e:
                    raise LLMError(f"Could not load local model {self.path}: {e}") from e
                cache_mb = self._settings.llm.llm_prompt_cache_mb
                if cache_mb > 0:
                    # The evidence check is a short prompt of its own between the
                    # evidence choice and the synthesis; the cache restores the
                    # choice's long prefix so the synthesis does not re-read it.
                    self._llm.set_cache(_prompt_cache(cache_mb << 20))
            return self._llm

    # --- ownership of the one llama.cpp context ---
    def _acquire(self, me: object, cancel: threading.Event | None) -> None:
        """Take the context, first come first served: each answer is several
        model calls, and without a queue whoever wakes first wins each
        release, so one of several concurrent sessions could wait past
        ``give_up`` while the others took turns."""
        s = self._settings
        stale_after = s.llm.llm_timeout
        give_up = time.monotonic() + max(s.llm.llm_timeout, s.ui.ui_timeout)
        with self._cond:
            self._waiting.append(me)
            try:
                while self._owner is not None or self._waiting[0] is not me:
                    parked = self._suspended_since
                    if (self._owner is not None and parked is not None
                            and time.monotonic() - parked > stale_after):
                        log.warning("reclaiming the local model from a stream abandoned "
                                    "for %.0f s", time.monotonic() - parked)
                        self._owner = None
                        continue
                    if time.monotonic() > give_up:
                        raise self._fail("it is busy with another request; try again shortly")
                    _check_cancel(cancel)
                    self._cond.wait(0.1)
                self._owner, self._suspended_since = me, None
            finally:
                self._waiting.remove(me)
                self._cond.notify_all()

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

    def option_probabilities(self, messages: Messages, prefix: str,
                             options: tuple[str, ...]) -> dict[str, float] | None:
        """The model's probability of each option as the next token after the
        reply has begun with ``prefix`` (e.g. ``{"answer": "``), normalised over
        the options: a graded yes/no instead of a sampled one. None when an
        option is not a single token in this vocabulary."""
        import numpy as np
        from llama_cpp import llama_chat_format

        llm = self.load()
        ids = [llm.tokenize(o.encode(), add_bos=False, special=False) for o in options]
        if any(len(t) != 1 for t in ids):
            return None
        if self._formatter is None:
            eos = llm.detokenize([llm.token_eos()]).decode(errors="ignore")
            self._formatter = llama_chat_format.Jinja2ChatFormatter(
                template=llm.metadata["tokenizer.chat_template"], eos_token=eos, bos_token="")
        prompt = self._formatter(messages=messages).prompt + prefix
        tokens = llm.tokenize(prompt.encode(), add_bos=False, special=True)
        me = object()
        self._acquire(me, None)
        try:
            # A plain forward pass: llama.cpp keeps the last position's logits,
            # which is all this needs (completion logprobs would need logits_all).
            llm.reset()
            llm.eval(tokens)
            logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))
            picked = np.array([logits[t[0]] for t in ids], dtype=np.float64)
        except (RuntimeError, ValueError) as e:
            raise self._fail(_overflow_reason(str(e)) or str(e)) from e
        finally:
            self._release(me)
        p = np.exp(picked - picked.max())
        return dict(zip(options, (p / p.sum()).tolist(), strict=True))


def _prompt_cache(capacity_bytes: int) -> Any:
    """llama.cpp's RAM prompt cache, sized by what a saved state really holds.

    ``LlamaRAMCache`` counts only the KV part of a state (~10 MB for a 300-token
    prompt) but each state also copies the prompt's logits (~0.6 MB per token
    with Qwen's 152k vocabulary): counted its way, 512 MB held 13 GB."""
    from llama_cpp import LlamaRAMCache

    class PromptCache(LlamaRAMCache):
        @property
        def cache_size(self) -> int:
            return sum(st.llama_state_size + st.scores.nbytes for st in self.cache_state.values())

    return PromptCache(capacity_bytes=capacity_bytes)
