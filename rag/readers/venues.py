"""Venue and year heuristics: a seed file's heading ("ICML 2025 accepted
papers") and a PMLR post's container title name the venue. The venue names
are data (``venues.json``), not code."""

from __future__ import annotations

import json
import re
from importlib.resources import files
from typing import Any

_DATA = json.loads(files(__package__).joinpath("venues.json").read_text(encoding="utf-8"))
KNOWN_VENUES: dict[str, str] = {v.lower(): v for v in _DATA["known"]} | _DATA["aliases"]
HEADING_WORDS_NOT_VENUE = frozenset(_DATA["heading_words_not_venue"])
CONTAINER_VENUES: tuple[tuple[str, str], ...] = tuple(
    (key, venue) for key, venue in _DATA["container_titles"]
)  # PMLR container-title / booktitle phrase -> venue

_YEAR = re.compile(r"(?<!\d)((?:19|20)\d{2})(?!\d)")


def to_year(value: Any) -> int | None:
    """The first plausible year (19xx/20xx) in ``value``, or None."""
    if value is None or isinstance(value, bool):
        return None
    m = _YEAR.search(str(value))
    return int(m.group(1)) if m else None


def venue_year_from_heading(heading: str) -> tuple[str | None, int | None]:
    """A known venue (else the first acronym-like word) and the year of a heading line."""
    year_m = _YEAR.search(heading)
    year = int(year_m.group(1)) if year_m else None
    venue = None
    for tok in re.findall(r"[A-Za-z][A-Za-z0-9]*[A-Za-z]", heading):
        tok = re.sub(r"\d+$", "", tok)
        if tok.lower() in KNOWN_VENUES:
            venue = KNOWN_VENUES[tok.lower()]
            break
        caps = sum(c.isupper() for c in tok)
        if (
            venue is None
            and len(tok) >= 3
            and caps >= 2
            and tok[0].isupper()
            and tok.upper() not in HEADING_WORDS_NOT_VENUE
        ):
            venue = tok  # first acronym-like word, kept as the fallback
    return venue, year


def container_venue(container: str) -> str | None:
    """The venue a (lower-cased) PMLR container title / booktitle names, if known."""
    return next((v for key, v in CONTAINER_VENUES if key in container), None)
