"""Metadata sidecars: real titles, authors and links for seed ``.txt`` abstracts.

A seed ``.txt`` file has no titles (heading line, then one abstract per line), so
its papers get derived labels. A ``metadata.jsonl`` file next to the seed files
can supply the real metadata: one JSON object per paper with ``title``,
``authors``, ``url``, ``pdf``, ``openreview``, ``software``, ``venue``, ``year``
and two content keys that say WHICH abstract the entry belongs to:

- ``fingerprint``: ``"sha256:<hex>"`` of the abstract's normalised text
  (:func:`normalise_text`), and/or
- ``match``: a verbatim phrase of the abstract (at least 40 characters).

Entries are matched to abstracts by content only, never by file or line
position: the fingerprint first, else the phrase (normalised containment in
exactly one abstract). An entry that matches nothing (the abstract was edited
or removed) is reported as a ``CorpusError`` naming the sidecar file and line;
the paper then keeps its derived label. Paper ids never change here.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rag.errors import CorpusError
from rag.textio import plain_tokens
from rag.types import Paper

SIDECAR_NAME = "metadata.jsonl"
MIN_MATCH_CHARS = 40
_LINK_KEYS = ("pdf", "openreview", "software", "code", "supplementary", "video")

_WS = re.compile(r"\s+")


def normalise_text(text: str) -> str:
    """Markup-free, lower-cased alphanumeric tokens joined by single spaces, so
    punctuation, HTML, ``$`` math delimiters and whitespace do not matter."""
    return " ".join(plain_tokens(text))


def fingerprint(text: str) -> str:
    """Content fingerprint of an abstract: sha256 of its normalised text."""
    return "sha256:" + hashlib.sha256(normalise_text(text).encode("utf-8")).hexdigest()


def _clean(value: Any) -> str | None:
    if value is None or isinstance(value, (dict, list, bool)):
        return None
    s = _WS.sub(" ", str(value)).strip()
    return s or None


def _authors(value: Any) -> list[str] | None:
    if not isinstance(value, list):
        return None
    out = [_WS.sub(" ", str(a)).strip() for a in value if isinstance(a, str) and a.strip()]
    return out if len(out) == len(value) else None


def read_sidecar(path: Path, rel: str) -> tuple[list[tuple[int, dict[str, Any]]], list[CorpusError]]:
    """Entries of a sidecar as ``(line, entry)`` plus errors for lines that are not
    usable (bad JSON, no title, no content key). Undecodable bytes cost their line."""
    errors: list[CorpusError] = []
    try:
        data = path.read_bytes()
    except OSError as e:
        return [], [CorpusError(rel, None, f"cannot read metadata sidecar: {e.strerror or e}")]
    entries: list[tuple[int, dict[str, Any]]] = []
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        if not raw.strip():
            continue
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            errors.append(CorpusError(rel, lineno, f"metadata entry is not valid UTF-8 "
                                      f"(byte 0x{raw[e.start]:02x}); entry ignored"))
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            errors.append(CorpusError(rel, lineno, f"malformed JSON: {e.msg} (column {e.colno}); "
                                      "entry ignored"))
            continue
        if not isinstance(rec, dict):
            errors.append(CorpusError(rel, lineno, "metadata entry must be a JSON object; ignored"))
            continue
        if not _clean(rec.get("title")):
            errors.append(CorpusError(rel, lineno, "metadata entry has no 'title'; ignored"))
            continue
        match = _clean(rec.get("match"))
        fp = _clean(rec.get("fingerprint"))
        if not fp and not (match and len(match) >= MIN_MATCH_CHARS):
            errors.append(CorpusError(
                rel, lineno, f"metadata entry needs a 'fingerprint' or a 'match' phrase of "
                f"at least {MIN_MATCH_CHARS} characters to find its abstract; ignored"))
            continue
        entries.append((lineno, rec))
    return entries, errors


def _attach(paper: Paper, rec: dict[str, Any]) -> None:
    paper.title = _clean(rec.get("title")) or paper.title
    paper.title_derived = False
    authors = _authors(rec.get("authors"))
    if authors:
        paper.authors = authors
    url = _clean(rec.get("url"))
    if url:
        paper.url = url
    for key in _LINK_KEYS:
        v = _clean(rec.get(key))
        if v:
            if key == "openreview" and not v.startswith("http"):
                v = f"https://openreview.net/forum?id={v}"
            paper.links[key] = v
    venue = _clean(rec.get("venue"))
    if venue:
        paper.venue = venue
    pages = _clean(rec.get("pages") or rec.get("page"))
    if pages:
        paper.pages = pages
    year = rec.get("year")
    if isinstance(year, int) and not isinstance(year, bool) and 1900 < year < 2200:
        paper.year = year
    elif isinstance(year, str) and year.strip().isdigit():
        paper.year = int(year.strip())


def apply_sidecar(
    papers: Sequence[Paper],
    entries: Sequence[tuple[int, dict[str, Any]]],
    rel: str,
    *,
    report_unmatched: bool = True,
) -> tuple[int, list[CorpusError]]:
    """Attach each entry's metadata to the one paper whose abstract it matches by
    content. Returns (number attached, errors for stale/ambiguous entries). With
    ``report_unmatched=False`` (only some seed files of the folder were loaded) an
    entry that matches nothing is skipped silently: its paper may be in a file
    that was not loaded."""
    errors: list[CorpusError] = []
    norms = [normalise_text(p.abstract) for p in papers]
    by_fp: dict[str, list[int]] = {}
    for i, p in enumerate(papers):
        by_fp.setdefault(fingerprint(p.abstract), []).append(i)
    taken: dict[int, int] = {}  # paper index -> sidecar line that claimed it
    attached = 0
    for lineno, rec in entries:
        label = _clean(rec.get("pmlr_id")) or _clean(rec.get("id")) or repr(_clean(rec.get("title")))
        fp = _clean(rec.get("fingerprint"))
        hits = list(by_fp.get(fp, [])) if fp else []
        if not hits:
            phrase = normalise_text(_clean(rec.get("match")) or "")
            if len(phrase) >= MIN_MATCH_CHARS // 2:
                hits = [i for i, n in enumerate(norms) if phrase in n]
        if not hits:
            if not report_unmatched:
                continue
            errors.append(CorpusError(
                rel, lineno, f"metadata entry {label} matches no abstract (neither its "
                "fingerprint nor its 'match' phrase is found); the entry is ignored and "
                "the paper keeps a derived label"))
            continue
        if len(hits) > 1:
            errors.append(CorpusError(
                rel, lineno, f"metadata entry {label} matches {len(hits)} abstracts; "
                "ignored (give a longer 'match' phrase or a fingerprint)"))
            continue
        i = hits[0]
        if i in taken:
            errors.append(CorpusError(
                rel, lineno, f"metadata entry {label} matches the same abstract as the "
                f"entry on line {taken[i]}; ignored"))
            continue
        taken[i] = lineno
        _attach(papers[i], rec)
        attached += 1
    return attached, errors


def load_and_apply(
    directory: Path, rel_dir: str, papers: Sequence[Paper], loaded: set[str]
) -> list[CorpusError]:
    """Apply ``directory/metadata.jsonl`` (if present) to ``papers``, the seed
    papers loaded from that directory's files named in ``loaded``. ``rel_dir`` is
    the directory's provenance prefix ("" for files given directly)."""
    path = directory / SIDECAR_NAME
    if not path.is_file():
        return []
    rel = f"{rel_dir}/{SIDECAR_NAME}" if rel_dir else SIDECAR_NAME
    entries, errors = read_sidecar(path, rel)
    seed_files = {
        f.name
        for f in directory.iterdir()
        if f.suffix.lower() == ".txt" and not f.name.startswith(".") and f.stem.lower() != "readme"
    }
    _, more = apply_sidecar(papers, entries, rel, report_unmatched=seed_files <= loaded)
    return errors + more
