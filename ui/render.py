"""Safe rendering of engine results for the Gradio UI.

This module owns every string of HTML or Markdown that the UI shows. Abstract
text, titles, authors and model output are untrusted: each piece is escaped
here (``html.escape``, plus Markdown escaping for chat messages) before any
markup is added, so ``<script>`` or ``<img onerror=...>`` inside an abstract
shows as text. Nothing here calls the engine; it only formats rag.types.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from urllib.parse import urlparse

from rag.types import (
    ASPECT_LABELS,
    ASPECTS,
    Answer,
    Citation,
    Comparison,
    CorpusStatus,
    Paper,
    SearchHit,
    SentenceSupport,
)

# Markdown metacharacters that can change rendering (emphasis, links, code,
# headings, lists, tables, LaTeX). ``<>&"'`` are left to html.escape, which
# runs after this so an entity such as ``&#x27;`` is never backslash-broken.
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~$=])")
_MARKER = re.compile(r"\s*\[(\d+(?:\s*,\s*\d+)*)\]")
_WORD = re.compile(r"(\w+)")
_STOPWORDS = frozenset(
    """a an and are as at be been but by can do does for from has have how in into is it
    its of on or our over such than that the their them then there these they this those
    to under up was we were what when where which while who why will with within without
    would you your not also both each more most other some only very via using use used
    based show shows propose proposes paper papers work""".split()
)


def esc(text: object) -> str:
    """HTML-escape any value (quotes too, so it is safe inside attributes)."""
    return html.escape("" if text is None else str(text), quote=True)


def md_escape(text: str) -> str:
    """Make untrusted text render literally inside Markdown (and HTML)."""
    return html.escape(_MD_SPECIAL.sub(r"\\\1", text or ""), quote=True)


_MD_BOLD = re.compile(r"\\\*\\\*(\S(?:.*?\S)?)\\\*\\\*")
_HTML_BOLD = re.compile(r"\*\*(\S(?:.*?\S)?)\*\*")


def md_model_text(text: str) -> str:
    """Model output for Markdown: literal like ``md_escape``, except that its
    ``**bold**`` stays bold (harmless: the inside is already escaped)."""
    return _MD_BOLD.sub(r"**\1**", md_escape(text))


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
    text = _MARKER.sub(" ", text or "")
    return {
        w.lower()
        for w in _WORD.findall(text)
        if w.lower() not in _STOPWORDS and (len(w) > 2 or w.isdigit() and len(w) > 1)
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
    return _MARKER.sub("", text or "").strip()


def _markers(nums: Sequence[int]) -> str:
    return "".join(f" \\[{n}\\]" for n in nums)


def _authors(paper: Paper, limit: int = 6) -> str:
    if not paper.authors:
        return ""
    names = paper.authors[:limit]
    more = len(paper.authors) - len(names)
    return ", ".join(names) + (f" + {more} more" if more > 0 else "")


# --------------------------------------------------------------------- chat


def stream_markdown(partial: str) -> str:
    """Chat content while tokens stream in: the raw text, made literal."""
    return md_escape(partial) + " ▌"


def sentence_markdown(s: SentenceSupport) -> str:
    body = md_model_text(strip_markers(s.text)) + _markers(s.citations)
    if s.supported:
        return body
    return f"⚠️ *{body}* *(unsupported)*"


def answer_markdown(answer: Answer) -> str:
    """Final chat message for an answer: sentences with [n] markers, unsupported
    ones flagged, a short source list; or a plain decline with nearest papers."""
    if answer.declined:
        lines = ["**The loaded collection does not cover this question.**"]
        if answer.decline_reason:
            lines.append(md_escape(answer.decline_reason))
        if answer.nearest:
            lines.append("")
            lines.append("Nearest papers in the collection:")
            for hit in answer.nearest:
                lines.append(f"- {md_escape(hit.paper.display_title)} (score {hit.score:.2f})")
        return "\n".join(lines)
    if answer.sentences:
        body = " ".join(sentence_markdown(s) for s in answer.sentences)
    else:
        body = md_model_text(answer.text)
    parts = [body]
    standalone = (answer.standalone_question or "").strip()
    if standalone and standalone.lower() != answer.question.strip().lower():
        # A follow-up rewritten against the conversation: show what was searched.
        parts.insert(0, f"_Follow-up understood as: {md_escape(standalone)}_")
    unsupported = sum(1 for s in answer.sentences if not s.supported)
    if unsupported:
        parts.append(
            f"⚠️ {unsupported} of {len(answer.sentences)} sentence(s) could not be matched "
            "to a retrieved abstract."
        )
    if answer.citations:
        srcs = [f"\\[{c.number}\\] {md_escape(c.paper.display_title)}" for c in answer.citations]
        parts.append("**Sources:** " + " · ".join(srcs))
    return "\n\n".join(parts)


def error_markdown(message: str) -> str:
    return f"⚠️ **Could not answer:** {md_escape(message)}"


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


def citation_card(c: Citation, sentences: Sequence[SentenceSupport]) -> str:
    cited = [s.text for s in sentences if c.number in s.citations]
    authors = _authors(c.paper)
    return (
        f'<div class="aqa-card" data-cite="{c.number}">'
        f'<div class="aqa-card-head"><span class="aqa-num">[{c.number}]</span> '
        f"{paper_heading(c.paper)}</div>"
        + (f'<div class="aqa-authors">{esc(authors)}</div>' if authors else "")
        + f'<blockquote class="aqa-passage">{highlight(c.snippet, cited)}</blockquote>'
        f'<div class="aqa-score">support score {c.score:.2f}</div>'
        f"{_abstract_details(c.paper)}</div>"
    )


def hit_card(hit: SearchHit) -> str:
    authors = _authors(hit.paper)
    return (
        f'<div class="aqa-card"><div class="aqa-card-head">{paper_heading(hit.paper)}</div>'
        + (f'<div class="aqa-authors">{esc(authors)}</div>' if authors else "")
        + f'<div class="aqa-score">retrieval score {hit.score:.2f}</div>'
        f"{_abstract_details(hit.paper)}</div>"
    )


def citations_panel(answer: Answer | None) -> str:
    """Side panel for the latest answer: cited papers, or the nearest ones."""
    if answer is None:
        return '<div class="aqa-empty">Cited papers appear here after an answer.</div>'
    if answer.declined:
        if not answer.nearest:
            return '<div class="aqa-empty">No paper in the collection is close to this question.</div>'
        cards = "".join(hit_card(h) for h in answer.nearest)
        return f'<div class="aqa-panel"><h4>Nearest papers (not an answer)</h4>{cards}</div>'
    if not answer.citations:
        return '<div class="aqa-empty">The answer cites no paper.</div>'
    cards = "".join(citation_card(c, answer.sentences) for c in answer.citations)
    return f'<div class="aqa-panel"><h4>Cited papers</h4>{cards}</div>'


def error_panel(message: str) -> str:
    return f'<div class="aqa-error">⚠️ {esc(message)}</div>'


# ------------------------------------------------------------------ compare


def _synthesis_html(cmp: Comparison) -> str:
    if cmp.synthesis_sentences:
        parts = []
        for s in cmp.synthesis_sentences:
            body = html_model_text(strip_markers(s.text)) + "".join(
                f' <span class="aqa-num">[{n}]</span>' for n in s.citations
            )
            if not s.supported:
                body = f'<span class="aqa-unsupported" title="not supported by the abstracts">⚠️ {body}</span>'
            parts.append(body)
        return " ".join(parts)
    return html_model_text(cmp.synthesis)


def comparison_html(cmp: Comparison) -> str:
    """The comparison table: one column per paper, one row per aspect; each
    cell's verbatim quote on hover (title) and on click (<details>)."""
    head = "".join(
        f'<th><span class="aqa-num">[{i}]</span> {paper_heading(p)}'
        + (f'<div class="aqa-authors">{esc(_authors(p, 3))}</div>' if p.authors else "")
        + "</th>"
        for i, p in enumerate(cmp.papers, 1)
    )
    rows = []
    for aspect in ASPECTS:
        cells = []
        for p in cmp.papers:
            cell = cmp.cells.get(p.paper_id, {}).get(aspect)
            if cell is None or not cell.stated:
                text = cell.text if cell and cell.text else "Not stated"
                cells.append(f'<td class="aqa-not-stated">{esc(text)}</td>')
                continue
            cells.append(
                f'<td title="{esc(cell.quote)}">{esc(cell.text)}'
                f'<details class="aqa-quote"><summary>quote</summary>'
                f"<q>{esc(cell.quote)}</q></details></td>"
            )
        rows.append(f'<tr><th scope="row">{esc(ASPECT_LABELS[aspect])}</th>{"".join(cells)}</tr>')
    abstracts = "".join(f"<td>{_abstract_details(p)}</td>" for p in cmp.papers)
    rows.append(f'<tr><th scope="row">Abstract</th>{abstracts}</tr>')
    return (
        '<div class="aqa-compare">'
        f'<table><thead><tr><th>Aspect</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
        f'<div class="aqa-synthesis"><h4>Synthesis</h4><p>{_synthesis_html(cmp)}</p></div>'
        f'<div class="aqa-meta">model {esc(cmp.model)} · {cmp.timings.total_ms / 1000:.1f} s</div>'
        "</div>"
    )


# ------------------------------------------------------------------- papers


def papers_html(papers: Sequence[Paper], scores: dict[str, float] | None = None) -> str:
    """Paper browser list: title, authors, metadata, provenance, abstract."""
    if not papers:
        return '<div class="aqa-empty">No papers match.</div>'
    cards = []
    for p in papers:
        authors = _authors(p)
        score = (scores or {}).get(p.paper_id)
        cards.append(
            f'<div class="aqa-card"><div class="aqa-card-head">{paper_heading(p)}</div>'
            + (f'<div class="aqa-authors">{esc(authors)}</div>' if authors else "")
            + (f'<div class="aqa-score">score {score:.2f}</div>' if score is not None else "")
            + _abstract_details(p, "Abstract, metadata and provenance")
            + "</div>"
        )
    return f'<div class="aqa-panel">{"".join(cards)}</div>'


def status_markdown(st: CorpusStatus) -> str:
    sources = ", ".join(f"{md_escape(k)} ({v})" for k, v in sorted(st.sources.items())) or "none"
    return (
        f"**{st.papers} papers**, {st.chunks} chunks · sources: {sources} · "
        f"embeddings: {md_escape(st.embed_model)} · LLM: {md_escape(st.llm_model)} · "
        f"last ingest: {md_escape(st.last_ingest or 'never')}"
    )


def paper_choice_label(p: Paper) -> str:
    """Dropdown label (Gradio shows it as text, so no escaping needed)."""
    label = p.display_title
    if p.authors:
        label += f" — {p.authors[0]}" + (" et al." if len(p.authors) > 1 else "")
    return label


# Styling for the classes above; passed to launch(css=...).
CSS = """
.aqa-card{border:1px solid var(--border-color-primary);border-radius:8px;padding:8px 10px;margin:6px 0}
.aqa-card-head{font-weight:600}
.aqa-num{color:var(--color-accent);font-weight:700}
.aqa-derived{font-weight:400;font-style:italic;color:var(--body-text-color-subdued)}
.aqa-authors,.aqa-meta,.aqa-score{font-size:.85em;color:var(--body-text-color-subdued)}
.aqa-passage{margin:6px 0;padding-left:8px;border-left:3px solid var(--color-accent);font-size:.92em}
.aqa-passage mark{background:#fde68a;color:inherit;padding:0 1px}
.aqa-abstract summary,.aqa-quote summary{cursor:pointer;font-size:.85em;color:var(--color-accent)}
.aqa-abstract-text{white-space:pre-wrap}
.aqa-empty{color:var(--body-text-color-subdued);font-style:italic}
.aqa-error{color:#b91c1c;font-weight:600}
.aqa-compare table{border-collapse:collapse;width:100%;table-layout:fixed}
.aqa-compare thead th:first-child{width:13%}
.aqa-compare th,.aqa-compare td{border:1px solid var(--border-color-primary);padding:6px;vertical-align:top;text-align:left}
.aqa-not-stated{color:var(--body-text-color-subdued);font-style:italic}
.aqa-unsupported{background:#fee2e2}
"""
