"""Seed ``.txt`` files: a heading line ("ICML 2025 accepted papers"), then one
abstract per non-empty line."""

from __future__ import annotations

from rag.readers.base import RecordBuilder
from rag.readers.venues import venue_year_from_heading
from rag.textio import split_lines

HEADING_MAX_CHARS = 150


class SeedReader:
    extensions = (".txt",)

    def read(self, text: str, out: RecordBuilder) -> None:
        venue = year = None
        ordinal = 0
        heading_seen = False
        for lineno, raw in enumerate(split_lines(text), start=1):
            line = raw.strip()
            if not line:
                continue
            if not heading_seen:
                heading_seen = True
                # a heading is short; a long first line means the file has none
                if len(line) <= HEADING_MAX_CHARS and len(line.split()) <= 15:
                    venue, year = venue_year_from_heading(line)
                    continue
            ordinal += 1
            out.add(ordinal=ordinal, line=lineno, abstract=line, venue=venue, year=year)
        if ordinal == 0:
            out.error(
                None, "seed file has a heading but no abstracts (expected one abstract per line)"
            )
