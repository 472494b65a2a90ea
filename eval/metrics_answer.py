"""Answer metrics (re-exported by ``eval.metrics``): citation precision and
recall over ``CitedPaper`` entries, whether a cited number is supported, text
normalisation for must-include recall, and the sentence support rate. Pure
functions over plain values, following the conventions in ``eval.metrics``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# --- citations ---------------------------------------------------------------


@dataclass(frozen=True)
class CitedPaper:
    """One cited paper of an answer, as far as the metrics care."""

    number: int
    is_gold: bool
    gold_idx: int | None  # which gold entry it matches (for recall)
    supported: bool  # some sentence citing it is supported by this paper


def citation_precision(cited: Sequence[CitedPaper]) -> float | None:
    """Share of cited papers that are gold or support the sentence citing
    them; None when nothing was cited."""
    if not cited:
        return None
    return sum(1 for c in cited if c.is_gold or c.supported) / len(cited)


def citation_recall(cited: Sequence[CitedPaper], n_gold: int) -> float | None:
    """Share of gold papers that the answer cites; None without gold."""
    if n_gold <= 0:
        return None
    hit = {c.gold_idx for c in cited if c.gold_idx is not None}
    return len(hit) / n_gold


def cited_supported(number: int, sentences: Sequence[Mapping[str, Any]]) -> bool:
    """A citation [n] is supported when a sentence carrying [n] is marked
    supported. (The engine keeps a marker on a supported sentence only when
    that paper itself supports the claim, so the sentence flag is per paper.)"""
    return any(
        number in (s.get("citations") or []) and bool(s.get("supported")) for s in sentences
    )


# --- answer content ----------------------------------------------------------

_DASHES = dict.fromkeys(map(ord, "\u2010\u2011\u2012\u2013\u2014\u2212"), "-")


def normalize_text(s: str) -> str:
    """Case-, width- and dash-insensitive text with collapsed whitespace and
    no space before % (so "11.3 %" matches "11.3%")."""
    s = unicodedata.normalize("NFKC", s).translate(_DASHES).casefold()
    s = re.sub(r"\s+", " ", s)
    return re.sub(r"\s+%", "%", s).strip()


def includes(text: str, item: str) -> bool:
    """Whether ``text`` contains ``item``; "a|b" means either alternative."""
    t = normalize_text(text)
    return any(normalize_text(alt) in t for alt in item.split("|") if alt.strip())


def must_include_recall(text: str, must_include: Sequence[str]) -> float | None:
    if not must_include:
        return None
    return sum(includes(text, m) for m in must_include) / len(must_include)


def support_rate(supported: Sequence[bool]) -> float | None:
    """Share of answer sentences marked supported; None for no sentences."""
    if not supported:
        return None
    return sum(1 for s in supported if s) / len(supported)
