"""What every reader shares: the ``Reader`` protocol, the ``RecordBuilder``
that turns raw records into ``Paper``s and ``CorpusError``s with one set of
conventions, and the field helpers (authors, plain strings, markup).

Conventions: ``Provenance.path`` is the file's provenance path (given by the
caller); ``ordinal`` is the 1-based record index within its file; ``paper_id``
is the record's own id when it has one, else ``provenance_id(prov)``
(``"<file stem>-<ordinal>"``).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from rag.errors import CorpusError
from rag.labels import derive_label
from rag.readers.venues import to_year
from rag.textio import MARKUP_TAG, normalise_unicode
from rag.types import Paper, Provenance

MIN_ABSTRACT_CHARS = 20
# Real abstracts are under ~3,000 characters; a record far beyond that is a full
# text or a broken export, and one such record must not sink a whole ingest.
# (The setting ``corpus.max_abstract_chars`` overrides it.)
MAX_ABSTRACT_CHARS = 20_000

WS = re.compile(r"\s+")


class Reader(Protocol):
    """One corpus file format. ``read`` gets the decoded file text and adds
    every record (or error) to ``out``; it never raises for bad input."""

    extensions: tuple[str, ...]  # lower-case, with the dot

    def read(self, text: str, out: RecordBuilder) -> None: ...


def provenance_id(prov: Provenance) -> str:
    """Fallback paper id for a record without its own id: ``"<file stem>-<ordinal>"``."""
    return f"{Path(prov.path).stem}-{prov.ordinal}"


def clean_markup(text: str) -> str:
    """PMLR abstract/title -> plain text: no HTML tags or entities, no ``$`` math
    delimiters (the LaTeX itself stays), single spaces."""
    text = html.unescape(MARKUP_TAG.sub(" ", text))
    text = text.replace("\\$", "\x00").replace("$", "").replace("\x00", "$")
    return WS.sub(" ", text).strip()


def split_authors(value: Any) -> list[str]:
    """Authors from a list (of names or {given, family}/{name} dicts) or a string
    separated by ";", " and " (incl. BibTeX "Last, First and ...") or ","."""
    if value is None:
        return []
    if isinstance(value, list):
        out = []
        for a in value:
            if isinstance(a, dict):
                name = a.get("name") or " ".join(
                    str(a[k]).strip() for k in ("given", "family") if a.get(k)
                )
            else:
                name = str(a)
            name = WS.sub(" ", str(name)).strip()
            if name:
                out.append(name)
        return out
    s = WS.sub(" ", str(value)).strip()
    if not s:
        return []
    if ";" in s:
        parts = s.split(";")
    elif " and " in s:
        parts = re.split(r"\s+and\s+", s)
        if all(p.count(",") == 1 for p in parts):  # BibTeX "Last, First and Last, First"
            parts = [" ".join(reversed([x.strip() for x in p.split(",")])) for p in parts]
        else:
            parts = [x for p in parts for x in p.split(",")]
    else:
        parts = s.split(",")
    return [p.strip() for p in parts if p.strip()]


def str_field(rec: dict[str, Any], key: str) -> str | None:
    """A scalar field as single-spaced text; None when missing, empty or structured."""
    value = rec.get(key)
    if value is None or isinstance(value, (dict, list)):
        return None
    value = WS.sub(" ", str(value)).strip()
    return value or None


def record_fields(rec: dict[str, Any]) -> dict[str, Any]:
    """``RecordBuilder.add`` keywords from a flat record (JSONL, JSON, CSV)."""
    links = {
        k: str(rec[k]).strip()
        for k in ("pdf", "openreview", "software", "code")
        if isinstance(rec.get(k), (str, int)) and str(rec[k]).strip()
    }
    return {
        "abstract": rec.get("abstract"),
        "title": str_field(rec, "title"),
        "authors": rec.get("authors", rec.get("author")),
        "url": str_field(rec, "url"),
        "own_id": str_field(rec, "id"),
        "venue": str_field(rec, "venue"),
        "year": rec.get("year"),
        "links": links,
    }


class RecordBuilder:
    """Turns raw records of one file into Papers + errors with shared conventions."""

    def __init__(self, rel: str, source: str,
                 label: Callable[[str], str] | None = None,
                 max_chars: int = MAX_ABSTRACT_CHARS) -> None:
        """``label``: derives an untitled record's label from its abstract
        (``rag.labels.derive_label``, or a memo of it); ``max_chars``: a longer
        abstract is rejected with one error naming its line."""
        self.rel, self.source = rel, source
        self.max_chars = max_chars
        self.label = label or derive_label
        self.papers: list[Paper] = []
        self.errors: list[CorpusError] = []

    def error(self, line: int | None, message: str) -> None:
        self.errors.append(CorpusError(self.rel, line, message))

    def add(
        self,
        *,
        ordinal: int,
        line: int,
        abstract: Any,
        title: Any = None,
        authors: Any = None,
        url: Any = None,
        own_id: Any = None,
        venue: Any = None,
        year: Any = None,
        links: dict[str, str] | None = None,
        clean: Callable[[str], str] | None = None,
        pages: Any = None,
    ) -> None:
        if abstract is None or (isinstance(abstract, str) and not abstract.strip()):
            self.error(line, "record has no 'abstract'")
            return
        if not isinstance(abstract, str):
            self.error(line, f"'abstract' must be text, got {type(abstract).__name__}")
            return
        # plain-text abstracts stay verbatim (markup included: the UI escapes it);
        # only whitespace runs (e.g. a multi-line CSV cell) are collapsed
        abstract = normalise_unicode(abstract)
        abstract = clean(abstract) if clean else WS.sub(" ", abstract).strip()
        if len(abstract) < MIN_ABSTRACT_CHARS:
            self.error(
                line,
                f"abstract too short ({len(abstract)} chars, need "
                f"{MIN_ABSTRACT_CHARS}): {abstract!r}",
            )
            return
        if len(abstract) > self.max_chars:
            self.error(
                line,
                f"abstract is {len(abstract):,} characters, over the limit of "
                f"{self.max_chars:,} (AQA_MAX_ABSTRACT_CHARS): record skipped; is it a full text?",
            )
            return
        prov = Provenance(path=self.rel, ordinal=ordinal, line=line)
        title_s = (WS.sub(" ", normalise_unicode(str(title))).strip()
                   if title not in (None, "") else "")
        if title_s and clean:
            title_s = clean(title_s)
        own = WS.sub(" ", str(own_id)).strip() if own_id not in (None, "") else ""
        url_s = str(url).strip() if url not in (None, "") else None
        self.papers.append(
            Paper(
                paper_id=own or provenance_id(prov),
                abstract=abstract,
                title=title_s or self.label(abstract),
                title_derived=not title_s,
                authors=split_authors(authors),
                url=url_s,
                links=dict(links or {}),
                venue=WS.sub(" ", str(venue)).strip() if venue not in (None, "") else None,
                year=to_year(year),
                pages=WS.sub("", str(pages)).replace("--", "-") if pages not in (None, "") else None,
                source=self.source,
                provenance=[prov],
            )
        )
