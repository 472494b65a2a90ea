"""Errors the engine raises on purpose. Each carries a one-line, actionable
message; the CLI and UI show ``str(err)`` and never a traceback."""

from __future__ import annotations


class AqaError(Exception):
    """Base class for all expected abstracts-qa errors."""


class CorpusError(AqaError):
    """A corpus file or record that cannot be loaded; names file and line."""

    def __init__(self, path: str, line: int | None, message: str) -> None:
        self.path, self.line, self.message = path, line, message
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {message}")


class IndexMismatchError(AqaError):
    """The index was built with another embedding model."""


class EmptyIndexError(AqaError):
    """No papers are indexed yet."""


class LLMError(AqaError):
    """The LLM could not be reached, refused the request or failed mid-reply.

    ``where`` names the model (server URL or local file) and ``reason`` says
    what went wrong, when known; ``str(err)`` is always the one-line message.
    """

    def __init__(self, message: str, *, where: str | None = None,
                 reason: str | None = None) -> None:
        super().__init__(message)
        self.where, self.reason = where, reason


class LLMCancelled(LLMError):
    """The caller stopped waiting (closed the stream, hit its deadline, or the
    app is shutting down); generation stopped at the next token."""


class PaperNotFoundError(AqaError):
    """A paper reference (id, label or title) matched nothing."""


class IndexDamagedError(AqaError):
    """A part of the index (the catalog, the vector store) is damaged or
    missing; the message names the file and the fix (``aqa ingest --rebuild``)."""


class IndexReadOnlyError(AqaError):
    """A write (ingest, rebuild) to an index that is read-only here."""


class DiskFullError(AqaError):
    """The disk filled up during a write; re-running resumes."""
