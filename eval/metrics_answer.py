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


# --- fabrication audit -------------------------------------------------------
# Deliberately not rag.text's extraction: the audit must not share the blind
# spots of the engine's own synthesis check.
_AUDIT_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*%?(?![\w])")
# A name: an inner capital (ShieldAgent), two or more capitals (MELON, GPT-4),
# or letters with digits (WikiText-2, Llama3), hyphenated parts included.
_AUDIT_NAME = re.compile(
    r"(?<![\w-])(?:[A-Za-z]*[a-z][A-Z][\w-]*|[A-Z][A-Z0-9]+(?:-[\w]+)*|"
    r"[A-Za-z]+-?\d[\w-]*|[A-Z][a-z]+(?:-[A-Z0-9][\w]*)+)(?![\w])")


def claimed_specifics(sentence: str) -> set[str]:
    """Names and numbers a synthesis sentence asserts: every number but a bare
    single digit (a list position, "two"), and every name-like token."""
    text = re.sub(r"\[\d+(?:\s*[,;]\s*\d+)*\]", " ", sentence)  # [n] markers
    nums = {m.group(0) for m in _AUDIT_NUMBER.finditer(text) if len(m.group(0).rstrip("%")) > 1}
    names = {m.group(0).rstrip("-") for m in _AUDIT_NAME.finditer(text)}
    return nums | names


# LaTeX as a reader sees it: a command's name off (its argument stays), braces
# and sub-/superscript marks off, so "$\mathcal{W}_2$-convergence" reads
# "W2-convergence", the way an answer writes it.
_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+\s*")
_LATEX_MARKS = re.compile(r"[{}_^]")


_BROKEN_HYPHEN = re.compile(r"(\w)- +(?=\w)")


def _evidence_text(text: str) -> str:
    """Evidence as plain text for matching: LaTeX percent and math marks off;
    the text as typeset and as read (commands, braces, scripts off) both count."""
    plain = text.replace("\\%", "%").replace("$", "")
    read = _LATEX_MARKS.sub("", _LATEX_COMMAND.sub("", plain))
    # A word hyphenated across a line break keeps a space ("CoA- weights"):
    # an answer writing "CoA-weights" states the abstract's name.
    read = _BROKEN_HYPHEN.sub(r"\1-", read)
    return normalize_text(plain if read == plain else f"{plain} \n {read}")


def fabricated_sentences(answer: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Shown synthesis sentences of an answered question that state a name or
    number their cited evidence (the quoted sentences and the cited papers'
    titles) does not contain; each with what was missing."""
    if answer.get("declined"):
        return []
    evidence: dict[int, list[str]] = {}
    for e in answer.get("evidence") or []:
        evidence.setdefault(int(e["number"]), []).append(e["text"])
    for c in answer.get("citations") or []:
        evidence.setdefault(int(c["number"]), []).append(c["paper"].get("title") or "")
    out = []
    for s in answer.get("sentences") or []:
        if s.get("withdrawn") or s.get("contentless"):
            continue
        nums = s.get("citations") or list(evidence)  # uncited: against all evidence
        pool = _evidence_text(" ".join(t for n in nums for t in evidence.get(n, [])))
        missing = sorted(x for x in claimed_specifics(s["text"])
                         if normalize_text(x) not in pool)
        if missing:
            out.append({"text": s["text"], "missing": missing})
    return out


def fabrication_rate(answer: Mapping[str, Any]) -> float | None:
    """Share of shown synthesis sentences with a name or number absent from
    their cited evidence; None for a decline or an answer with no sentences."""
    if answer.get("declined"):
        return None
    shown = [s for s in answer.get("sentences") or []
             if not s.get("withdrawn") and not s.get("contentless")]
    if not shown:
        return None
    return len(fabricated_sentences(answer)) / len(shown)
