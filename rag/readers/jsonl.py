"""JSON Lines: one JSON object per line (``abstract`` required; ``title``,
``authors``, ``url``, ``id``, ``venue``, ``year`` and link fields optional)."""

from __future__ import annotations

import json

from rag.readers.base import RecordBuilder, record_fields
from rag.textio import split_lines


class JsonlReader:
    extensions = (".jsonl",)

    def read(self, text: str, out: RecordBuilder) -> None:
        ordinal = 0
        for lineno, raw in enumerate(split_lines(text), start=1):
            if not raw.strip():
                continue
            ordinal += 1
            try:
                rec = json.loads(raw)
            except json.JSONDecodeError as e:
                out.error(lineno, f"malformed JSON: {e.msg} (column {e.colno})")
                continue
            if not isinstance(rec, dict):
                out.error(lineno, f"expected a JSON object, got {type(rec).__name__}")
                continue
            out.add(ordinal=ordinal, line=lineno, **record_fields(rec))
