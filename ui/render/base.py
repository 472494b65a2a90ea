"""Shared pieces of the UI's rendering (re-exported by ``ui.render``): escaping
of untrusted text for HTML and Markdown, safe links, word highlighting, and
the paper heading and abstract details that chat, compare and papers share.
Nothing here calls the engine; it only formats rag.types.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from urllib.parse import urlparse

from rag import text as T
from rag.types import Paper

# Markdown metacharacters that can change rendering (emphasis, links, code,
# headings, lists, tables, LaTeX). ``<>&"'`` are left to html.escape, which
# runs after this so an entity such as ``&#x27;`` is never backslash-broken.
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~$=])")
_WORD = re.compile(r"(\w+)")


def esc(text: object) -> str:
    """HTML-escape any value (quotes too, so it is safe inside attributes)."""
    return html.escape("" if text is None else str(text), quote=True)


def md_escape(text: str) -> str:
    """Make untrusted text render literally inside Markdown (and HTML)."""
    return html.escape(_MD_SPECIAL.sub(r"\\\1", text or ""), quote=True)


# Model output keeps its inline Markdown (emphasis, bold, code): only the
# syntax that could add links, images, tables, headings, strikethrough (the
# UI's own withdrawn marker) or LaTeX is made literal, and HTML is escaped.
_MD_MODEL_SPECIAL = re.compile(r"([\\{}\[\]()#+\-.!|~$=])")
_CODE_SPAN = re.compile(r"(`+)([^`].*?)\1", re.DOTALL)
_HTML_BOLD = re.compile(r"\*\*(\S(?:.*?\S)?)\*\*")


def _md_model_piece(text: str) -> str:
    return html.escape(_MD_MODEL_SPECIAL.sub(r"\\\1", text), quote=True)


def md_model_text(text: str) -> str:
    """Model output for Markdown: ``*emphasis*``, ``**bold**`` and ```code```
    render; links, images, raw HTML and block syntax stay literal. A code
    span is kept verbatim: Markdown shows its inside as text (HTML escaped),
    where a backslash or an entity would show literally."""
    out: list[str] = []
    last = 0
    for m in _CODE_SPAN.finditer(text or ""):
        out.append(_md_model_piece(text[last:m.start()]))
        out.append(m.group(0))
        last = m.end()
    out.append(_md_model_piece((text or "")[last:]))
    return "".join(out)


def html_model_text(text: str) -> str:
    """Model output for HTML: escaped, with ``**bold**`` as <strong>."""
    return _HTML_BOLD.sub(r"<strong>\1</strong>", esc(text))


def safe_url(url: str | None) -> str | None:
    """Only http(s) links are rendered; ``javascript:`` and friends are dropped."""
    if not url:
        return None
    parsed = urlparse(url.strip())
    if parsed.scheme in ("http", "https") and parsed.netloc:
        return url.strip()
    return None


def paper_link(paper: Paper) -> str | None:
    """Best link for a paper: its URL, else the first http(s) entry of ``links``."""
    for cand in [paper.url, *paper.links.values()]:
        if url := safe_url(cand):
            return url
    return None


def content_words(text: str) -> set[str]:
    """Lower-cased words worth highlighting (no stop words, no 1–2 letter words
    unless numeric, no citation numbers)."""
    text = T.MARKER.sub(" ", text or "")
    return {
        w.lower()
        for w in _WORD.findall(text)
        if w.lower() not in T.STOP and (len(w) > 2 or w.isdigit() and len(w) > 1)
    }


def highlight(passage: str, sentences: Iterable[str]) -> str:
    """Escaped ``passage`` with the words it shares with ``sentences`` in <mark>."""
    targets: set[str] = set()
    for s in sentences:
        targets |= content_words(s)
    out: list[str] = []
    for i, tok in enumerate(_WORD.split(passage or "")):
        # re.split with one capture group: odd indexes are the words.
        if i % 2 and tok.lower() in targets:
            out.append(f"<mark>{esc(tok)}</mark>")
        else:
            out.append(esc(tok))
    return "".join(out)


def strip_markers(text: str) -> str:
    """Text without its ``[n]`` markers (``rag.text.strip_markers``, the engine's reading)."""
    return T.strip_markers(text or "")[0]


def _authors(paper: Paper, limit: int = 6) -> str:
    if not paper.authors:
        return ""
    names = paper.authors[:limit]
    more = len(paper.authors) - len(names)
    return ", ".join(names) + (f" + {more} more" if more > 0 else "")


def _abstract_details(paper: Paper, summary: str = "Full abstract") -> str:
    prov = ", ".join(esc(p.key) for p in paper.provenance) or "unknown"
    meta = [f"<b>id</b> <code>{esc(paper.paper_id)}</code>"]
    if paper.source:
        meta.append(f"<b>source</b> {esc(paper.source)}")
    if paper.venue:
        meta.append(f"<b>venue</b> {esc(paper.venue)}")
    if paper.year:
        meta.append(f"<b>year</b> {esc(paper.year)}")
    meta.append(f"<b>provenance</b> {prov}")
    return (
        f'<details class="aqa-abstract"><summary>{esc(summary)}</summary>'
        f'<p class="aqa-abstract-text">{esc(paper.abstract)}</p>'
        f'<div class="aqa-meta">{" · ".join(meta)}</div></details>'
    )


def paper_heading(paper: Paper) -> str:
    title = esc(paper.title)
    if paper.title_derived:
        title += ' <span class="aqa-derived">(derived label)</span>'
    link = paper_link(paper)
    if link:
        title = f'<a href="{esc(link)}" target="_blank" rel="noopener noreferrer">{title}</a>'
    return title
