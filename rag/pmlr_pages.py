"""Parsing the two PMLR page kinds, and the post a paper becomes.

What this module owns:

- the volume index ``/v<N>/`` (one ``<div class="paper">`` per paper: title,
  authors, ``[abs]``/PDF/OpenReview/Software links) -> ``VolumeIndex``;
- a paper's abs page ``/v<N>/<key>.html`` (the abstract in
  ``<div id="abstract">``, authors and dates in ``<meta name="citation_*">``)
  -> ``AbsPage``; abstracts are only on the abs pages;
- the front matter of a paper's PMLR Jekyll post (``post_fields``,
  ``render_post``): the format of ``mlresearch/v<N>/_posts`` that
  ``rag.readers.pmlr`` reads.

Pure functions over page text: no HTTP, no files.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import yaml

_HEADING = re.compile(r"<h([12])[^>]*>(.*?)</h\1>", re.DOTALL | re.IGNORECASE)
_PAPER_START = re.compile(r'<div\s+class="paper"\s*>', re.IGNORECASE)
_TITLE = re.compile(r'<p\s+class="title"[^>]*>(.*?)</p>', re.DOTALL | re.IGNORECASE)
_AUTHORS = re.compile(r'<span\s+class="authors"[^>]*>(.*?)</span>', re.DOTALL | re.IGNORECASE)
_LINK = re.compile(r"<a\s([^>]*)>(.*?)</a>", re.DOTALL | re.IGNORECASE)
_ATTR = re.compile(r'([A-Za-z_:][-\w:.]*)\s*=\s*(?:"([^"]*)"|\'([^\']*)\')')
_META = re.compile(r"<meta\s[^>]*>", re.IGNORECASE)
_ABSTRACT = re.compile(r'<div\s+id="abstract"[^>]*>(.*?)</div>', re.DOTALL | re.IGNORECASE)
_KEY = re.compile(r"/([^/]+)\.html$")
_TAG = re.compile(r"<[^>]+>")
_WS = re.compile(r"\s+")
_YEAR = re.compile(r"(?<!\d)((?:19|20)\d{2})(?!\d)")

# link text on PMLR pages -> post field (the names rag.readers.pmlr reads)
LINK_FIELDS = {
    "download pdf": "pdf",
    "pdf": "pdf",
    "openreview": "openreview",
    "software": "software",
    "code": "software",
    "supplementary pdf": "supplementary",
    "supplementary material": "supplementary",
    "supplementary": "supplementary",
    "video": "video",
}
_NOT_LINKS = frozenset({"abs", "edit", "bib", "citeproc"})


def _text(fragment: str) -> str:
    """HTML fragment -> plain single-spaced text."""
    return _WS.sub(" ", html.unescape(_TAG.sub(" ", fragment))).strip()


def _attrs(tag: str) -> dict[str, str]:
    return {m.group(1).lower(): html.unescape(m.group(2) if m.group(2) is not None
                                              else m.group(3))
            for m in _ATTR.finditer(tag)}


@dataclass
class IndexEntry:
    """One paper as the volume index lists it."""

    key: str  # the PMLR key, e.g. "chen25ae" (abs page /v267/chen25ae.html)
    title: str  # plain text
    authors: list[str]  # display names, "Given Family"
    links: dict[str, str] = field(default_factory=dict)  # post field -> URL
    extras: list[dict[str, str]] = field(default_factory=list)  # other links: label, link


@dataclass
class VolumeIndex:
    volume: str  # "267"
    title: str  # the heading, e.g. "Volume 267: International Conference on ..."
    url: str
    papers: list[IndexEntry]


def _links(fragment: str) -> tuple[str | None, dict[str, str], list[dict[str, str]]]:
    """(abs href, known links by post field, other links) of a page fragment."""
    abs_href, links, extras = None, {}, []
    for m in _LINK.finditer(fragment):
        href = _attrs(m.group(1)).get("href", "").strip()
        label = _text(m.group(2))
        if not href or not label:
            continue
        low = label.lower()
        if low == "abs":
            abs_href = href
        elif low in LINK_FIELDS:
            links.setdefault(LINK_FIELDS[low], href)
        elif low not in _NOT_LINKS:
            extras.append({"label": label, "link": href})
    return abs_href, links, extras


def parse_index(page: str, volume: str, url: str) -> VolumeIndex:
    """The papers of a volume index page, in page order. Entries without an
    ``[abs]`` link (nothing to fetch) are left out."""
    heading = _HEADING.search(page)
    title = _text(heading.group(2)) if heading else f"Volume {volume}"
    starts = [m.end() for m in _PAPER_START.finditer(page)]
    papers: list[IndexEntry] = []
    seen: set[str] = set()
    for i, start in enumerate(starts):
        chunk = page[start: (starts[i + 1] if i + 1 < len(starts) else len(page))]
        abs_href, links, extras = _links(chunk)
        key_m = _KEY.search(urlsplit(abs_href).path) if abs_href else None
        if not key_m or key_m.group(1) in seen:
            continue
        seen.add(key_m.group(1))
        t = _TITLE.search(chunk)
        a = _AUTHORS.search(chunk)
        authors = ([n for n in (_text(x) for x in a.group(1).split(",")) if n] if a else [])
        papers.append(IndexEntry(key=key_m.group(1), title=_text(t.group(1)) if t else "",
                                 authors=authors, links=links, extras=extras))
    return VolumeIndex(volume=volume, title=title, url=url, papers=papers)


@dataclass
class AbsPage:
    """What a paper's abs page adds to its index entry."""

    abstract: str | None  # inner HTML, whitespace collapsed (the reader cleans markup)
    meta: dict[str, list[str]]  # citation_* name -> values, in page order
    links: dict[str, str]
    extras: list[dict[str, str]]


def parse_abs_page(page: str) -> AbsPage:
    meta: dict[str, list[str]] = {}
    for tag in _META.findall(page):
        a = _attrs(tag)
        name = a.get("name", "").lower()
        if name.startswith("citation_") and "content" in a:
            meta.setdefault(name, []).append(_WS.sub(" ", a["content"]).strip())
    m = _ABSTRACT.search(page)
    abstract = _WS.sub(" ", m.group(1)).strip() if m else None
    _, links, extras = _links(page)
    return AbsPage(abstract=abstract or None, meta=meta, links=links, extras=extras)


def _author(name: str) -> dict[str, str]:
    """A ``citation_author`` ("Family, Given") as the post's ``given``/``family``."""
    family, sep, given = name.partition(",")
    if sep and family.strip() and given.strip() and "," not in given:
        return {"given": given.strip(), "family": family.strip()}
    return {"name": name.strip()}


def post_fields(entry: IndexEntry, page: AbsPage, index: VolumeIndex,
                abs_url: str) -> dict[str, Any]:
    """The front matter of a paper's post (fields ``rag.readers.pmlr`` reads,
    plus page numbers, kept as PMLR has them)."""
    meta = {k: v[0] for k, v in page.meta.items() if v}
    authors = ([_author(a) for a in page.meta.get("citation_author", []) if a.strip()]
               or [{"name": a} for a in entry.authors])
    date = meta.get("citation_publication_date", "").replace("/", "-") or None
    year_m = _YEAR.search(date or "") or _YEAR.search(index.title)
    container = (meta.get("citation_conference_title") or meta.get("citation_journal_title")
                 or re.sub(r"^Volume \d+:\s*", "", index.title))
    links = {**page.links, **entry.links}  # the index's links win, the abs page fills gaps
    if meta.get("citation_pdf_url"):
        links.setdefault("pdf", meta["citation_pdf_url"])
    extras = list(entry.extras)
    extras += [x for x in page.extras if x["link"] not in {e["link"] for e in extras}]
    fields: dict[str, Any] = {
        "title": entry.title or _text(meta.get("citation_title", "")),
        "abstract": page.abstract,
        "id": entry.key,
        "volume": index.volume,
        "author": authors,
        "container-title": container,
        "date": date,
        "year": year_m.group(1) if year_m else None,
        "url": abs_url,
        **{k: links[k] for k in ("pdf", "openreview", "software", "supplementary", "video")
           if links.get(k)},
        "firstpage": meta.get("citation_firstpage"),
        "lastpage": meta.get("citation_lastpage"),
        "extras": extras,
        "layout": "inproceedings",
        "publisher": "PMLR",
    }
    return {k: v for k, v in fields.items() if v not in (None, "")}


def render_post(fields: dict[str, Any]) -> str:
    front = yaml.safe_dump(fields, sort_keys=False, allow_unicode=True, width=100)
    return f"---\n{front}---\n"
