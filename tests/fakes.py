"""Test doubles shared by the unit tests (kept out of production code)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

Messages = list[dict[str, str]]


class FakeLLM:
    """Deterministic stand-in for ``rag.llm.LLM``: replies with a scripted
    text, or a function of the messages, in 7-character pieces. Records each
    call's messages (``calls``) and keyword arguments (``kwargs``)."""

    def __init__(self, reply: str | None = None, fn: Callable[[Messages], str] | None = None,
                 name: str = "fake") -> None:
        self.reply, self.fn, self.name = reply, fn, name
        self.calls: list[Messages] = []
        self.kwargs: list[dict] = []

    def stream_chat(
        self, messages: Messages, *, max_tokens: int, temperature: float,
        json_schema: dict | None = None, cancel: threading.Event | None = None,
    ) -> Iterator[str]:
        self.calls.append(messages)
        self.kwargs.append({"max_tokens": max_tokens, "temperature": temperature,
                            "json_schema": json_schema})
        text = self.fn(messages) if self.fn else (self.reply or "")
        for i in range(0, len(text), 7):
            if cancel is not None and cancel.is_set():
                return
            yield text[i : i + 7]
