"""Corpus file formats, one module per format, each behind the ``Reader``
protocol (``rag.readers.base``): seed ``.txt`` (``seed``), JSON Lines
(``jsonl``), a JSON array (``json_array``), CSV (``csv_table``) and PMLR
Jekyll posts (``pmlr``). A new format is a module with a reader class and
one line in ``READERS``."""

from __future__ import annotations

from rag.readers.base import (
    MIN_ABSTRACT_CHARS,
    Reader,
    RecordBuilder,
    clean_markup,
    provenance_id,
)
from rag.readers.csv_table import CsvReader
from rag.readers.json_array import JsonArrayReader
from rag.readers.jsonl import JsonlReader
from rag.readers.pmlr import PmlrPostReader
from rag.readers.seed import SeedReader

READERS: tuple[Reader, ...] = (
    SeedReader(),
    JsonlReader(),
    JsonArrayReader(),
    CsvReader(),
    PmlrPostReader(),
)
_BY_EXTENSION: dict[str, Reader] = {ext: r for r in READERS for ext in r.extensions}
SUPPORTED_EXTENSIONS: tuple[str, ...] = tuple(_BY_EXTENSION)


def reader_for(suffix: str) -> Reader | None:
    """The reader of a file extension (``".jsonl"``, any case), or None."""
    return _BY_EXTENSION.get(suffix.lower())


__all__ = [
    "MIN_ABSTRACT_CHARS",
    "READERS",
    "Reader",
    "RecordBuilder",
    "SUPPORTED_EXTENSIONS",
    "clean_markup",
    "provenance_id",
    "reader_for",
]
