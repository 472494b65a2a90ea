"""A ``.json`` file: one JSON array of objects (the JSONL record fields)."""

from __future__ import annotations

import json
import re

from rag.readers.base import RecordBuilder, record_fields

_WS = re.compile(r"\s*")


class JsonArrayReader:
    extensions = (".json",)

    def read(self, text: str, out: RecordBuilder) -> None:
        """Decoded element by element, so every record keeps its line number and
        a syntax error still leaves the records before it."""
        dec = json.JSONDecoder()
        ws = _WS
        pos = ws.match(text, 0).end()  # type: ignore[union-attr]
        line, counted = 1, 0

        def line_at(p: int) -> int:
            nonlocal line, counted
            line += text.count("\n", counted, p)
            counted = p
            return line

        if not text.startswith("[", pos):
            out.error(line_at(pos), "expected a JSON array of objects")
            return
        pos = ws.match(text, pos + 1).end()  # type: ignore[union-attr]
        ordinal = 0
        while pos < len(text) and text[pos] != "]":
            try:
                rec, end = dec.raw_decode(text, pos)
            except json.JSONDecodeError as e:
                out.error(
                    e.lineno, f"malformed JSON: {e.msg} (column {e.colno}); rest of file skipped"
                )
                return
            ordinal += 1
            rec_line = line_at(pos)
            if isinstance(rec, dict):
                out.add(ordinal=ordinal, line=rec_line, **record_fields(rec))
            else:
                out.error(rec_line, f"expected a JSON object, got {type(rec).__name__}")
            pos = ws.match(text, end).end()  # type: ignore[union-attr]
            if text.startswith(",", pos):
                pos = ws.match(text, pos + 1).end()  # type: ignore[union-attr]
            elif not text.startswith("]", pos):
                out.error(line_at(pos), "malformed JSON: expected ',' or ']'; rest of file skipped")
                return
        if ordinal == 0:
            out.error(None, "JSON array has no records")
