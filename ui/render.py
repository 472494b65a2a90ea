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

from rag.compare import clean_latex
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


def _authors(paper: Paper, limit: int = 6) -> str:
    if not paper.authors:
        return ""
    names = paper.authors[:limit]
    more = len(paper.authors) - len(names)
    return ", ".join(names) + (f" + {more} more" if more > 0 else "")


# --------------------------------------------------------------------- chat

_URL = re.compile(r"https?://[^\s<>\"'`\[\]{}|\\^]+", re.IGNORECASE)


def md_with_links(text: str, *, model: bool = False) -> str:
    """Untrusted text for Markdown whose http(s) URLs become clean links (no
    stray backslashes: a bare URL would be auto-linked with its escapes)."""
    esc_fn = md_model_text if model else md_escape
    out: list[str] = []
    last = 0
    for m in _URL.finditer(text or ""):
        url = m.group(0).rstrip(".,;:!?)")
        url = url.replace("\\", "")
        if not safe_url(url):
            continue
        out.append(esc_fn(text[last:m.start()]))
        target = url.replace("(", "%28").replace(")", "%29").replace(" ", "%20")
        label = re.sub(r"([\\`*_\[\]])", r"\\\1", url)
        out.append(f"[{html.escape(label, quote=True)}]({html.escape(target, quote=True)})")
        last = m.start() + len(m.group(0).rstrip(".,;:!?)"))
    out.append(esc_fn(text[last:]))
    return "".join(out)


def cite_link(n: int) -> str:
    """A clickable [n]: the page script scrolls to and highlights card n."""
    return f"[\\[{n}\\]](#aqa-cite-{n})"


def _cite_links(nums: Sequence[int]) -> str:
    return "".join(" " + cite_link(n) for n in nums)


def stream_markdown(partial: str) -> str:
    """Chat content while tokens stream in: the raw text, made literal."""
    return md_escape(partial) + " ▌"


def sentence_markdown(s: SentenceSupport) -> str:
    body = md_with_links(strip_markers(s.text), model=True)
    if getattr(s, "withdrawn", False):
        reason = getattr(s, "withdrawn_reason", None) or "it failed a check after it was shown"
        return f"~~{body}~~ *(withdrawn: {md_escape(reason)})*"
    body += _cite_links(s.citations)
    if s.supported:
        return body
    return f"⚠️ *{body}* *(unsupported)*"


def match_words(value: float, strong: float, partial: float) -> str:
    if value >= strong:
        return "strong"
    return "partial" if value >= partial else "weak"


def relevance_words(c: Citation) -> str:
    """Does this paper answer the question? In words, with the number."""
    words = getattr(c, "relevance_words", None)
    if not isinstance(words, str):
        words = f"{match_words(c.relevance, 0.5, 0.35)} match"
    return f"{words} to the question ({c.relevance:.2f})"


def support_words(score: float) -> str:
    """Does the quote back the answer's sentence? In words, with the number."""
    return f"{match_words(score, 0.6, 0.45)} ({score:.2f})"


def _quotes(c: Citation, answer: Answer) -> list[str]:
    quotes = list(getattr(c, "quotes", None) or [])
    if not quotes:
        quotes = [e.text for e in getattr(answer, "evidence", []) if e.number == c.number]
    return quotes or ([c.snippet] if c.snippet else [])


def _decline_markdown(answer: Answer) -> str:
    kind = getattr(answer, "decline_kind", None)
    if kind == "missing_detail":
        lines = ["**The paper is in the collection, but its abstract does not state this.**"]
    elif kind == "absent":
        lines = ["**Nothing in the loaded collection is about this.**"]
    else:
        lines = ["**The loaded collection does not answer this question.**"]
    if answer.decline_reason:
        lines.append(md_with_links(answer.decline_reason))
    if kind == "missing_detail" and answer.evidence:
        ev = answer.evidence[0]
        title = next((c.paper.display_title for c in answer.citations if c.number == ev.number),
                     None) or next((h.paper.display_title for h in answer.retrieved
                                    if h.paper.paper_id == ev.paper_id), ev.paper_id)
        lines += ["", f"Closest sentence, from **{md_escape(title)}**:",
                  f"> {md_with_links(ev.text)}"]
    elif answer.nearest:
        lines += ["", "Nearest papers in the collection (none answers it):"]
        for hit in answer.nearest:
            lines.append(f"- {md_escape(hit.paper.display_title)} (score {hit.score:.2f})")
    return "\n".join(lines)


def answer_markdown(answer: Answer) -> str:
    """Final chat message. Quote-first: the synthesis (clickable [n], withdrawn
    sentences struck through with the reason), then each cited paper by
    title with its verbatim evidence quote(s). A decline says which kind."""
    parts: list[str] = []
    interpreted = getattr(answer, "interpreted", None)
    if interpreted:
        parts.append(f"_Interpreted as: {md_escape(interpreted)}_")
    if answer.declined:
        parts.append(_decline_markdown(answer))
        return "\n\n".join(parts)
    if answer.sentences:
        body = " ".join(sentence_markdown(s) for s in answer.sentences)
    else:
        body = md_with_links(strip_markers(answer.text), model=True)
    parts.append(body)
    unsupported = sum(1 for s in answer.sentences
                      if not s.supported and not getattr(s, "withdrawn", False))
    if unsupported:
        parts.append(
            f"⚠️ {unsupported} of {len(answer.sentences)} sentence(s) could not be matched "
            "to a retrieved abstract."
        )
    if answer.citations:
        lines = ["**Evidence, quoted from the abstracts:**"]
        for c in answer.citations:
            quotes = " ".join(f"“{md_with_links(q)}”" for q in _quotes(c, answer)[:2])
            lines.append(f"- {cite_link(c.number).strip()} **{md_escape(c.paper.display_title)}**"
                         f" — {quotes}")
        parts.append("\n".join(lines))
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


def _sentences_of(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of ``text``."""
    spans, start = [], 0
    for m in re.finditer(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])", text):
        spans.append((start, m.start()))
        start = m.end()
    if start < len(text):
        spans.append((start, len(text)))
    return spans


def mark_spans(passage: str, quotes: Iterable[str], claims: Iterable[str] = ()) -> str:
    """Escaped ``passage`` with the matched evidence span(s) in <mark>: each
    quote found in it verbatim; failing that, the one sentence sharing the
    most content words with the claims. Never every shared word."""
    passage = passage or ""
    low = passage.lower()
    spans: list[tuple[int, int]] = []
    for q in quotes:
        q = (q or "").strip()
        i = low.find(q.lower()) if q else -1
        if i >= 0:
            spans.append((i, i + len(q)))
    if not spans:
        targets: set[str] = set()
        for c in claims:
            targets |= content_words(c)
        best, best_n = None, 0
        for a, b in _sentences_of(passage):
            n = len(content_words(passage[a:b]) & targets)
            if n > best_n:
                best, best_n = (a, b), n
        if best and best_n >= 2:
            spans.append(best)
    spans.sort()
    out, last = [], 0
    for a, b in spans:
        if a < last:
            continue
        out.append(esc(passage[last:a]))
        out.append(f'<mark class="aqa-span">{esc(passage[a:b])}</mark>')
        last = b
    out.append(esc(passage[last:]))
    return "".join(out)


def citation_card(c: Citation, sentences: Sequence[SentenceSupport],
                  quotes: Sequence[str] | None = None) -> str:
    """One cited paper: title, authors, its verbatim evidence quote(s) with the
    matched span marked, and two plain-words scores: does the paper answer
    the question (relevance), does the quote back the claim (support)."""
    cited = [s.text for s in sentences if c.number in s.citations]
    quotes = list(quotes if quotes is not None else (getattr(c, "quotes", None) or []))
    authors = _authors(c.paper)
    if quotes:
        body = "".join(f'<blockquote class="aqa-passage">{mark_spans(q, [q])}</blockquote>'
                       for q in quotes[:3])
    else:
        body = f'<blockquote class="aqa-passage">{mark_spans(c.snippet, [], cited)}</blockquote>'
    scores = [f'<span class="aqa-relevance">Answers the question: {esc(relevance_words(c))}'
              "</span>"]
    if cited:
        scores.append(f'<span class="aqa-support">Quote backs the claim: '
                      f"{esc(support_words(c.score))}</span>")
    return (
        f'<div class="aqa-card" id="aqa-cite-{c.number}" data-cite="{c.number}">'
        f'<div class="aqa-card-head"><span class="aqa-num">[{c.number}]</span> '
        f"{paper_heading(c.paper)}</div>"
        + (f'<div class="aqa-authors">{esc(authors)}</div>' if authors else "")
        + body
        + f'<div class="aqa-score">{" · ".join(scores)}</div>'
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


def citations_panel(answer: Answer | None, *, preliminary: bool = False) -> str:
    """Side panel for the latest answer: cited papers with their quotes (also
    while the synthesis is still being written), or the nearest ones."""
    if answer is None:
        return '<div class="aqa-empty">Cited papers appear here after an answer.</div>'
    if answer.declined:
        kind = getattr(answer, "decline_kind", None)
        if kind == "missing_detail" and answer.citations:
            cards = "".join(citation_card(c, [], _quotes(c, answer)) for c in answer.citations)
            return ('<div class="aqa-panel"><h4>The paper asked about (its abstract does not '
                    f"state the detail)</h4>{cards}</div>")
        if not answer.nearest:
            return '<div class="aqa-empty">No paper in the collection is close to this question.</div>'
        cards = "".join(hit_card(h) for h in answer.nearest)
        return f'<div class="aqa-panel"><h4>Nearest papers (not an answer)</h4>{cards}</div>'
    if not answer.citations:
        return '<div class="aqa-empty">The answer cites no paper.</div>'
    cards = "".join(citation_card(c, answer.sentences, _quotes(c, answer))
                    for c in answer.citations)
    head = "Cited papers (the answer is being written…)" if preliminary else "Cited papers"
    return f'<div class="aqa-panel"><h4>{head}</h4>{cards}</div>'


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
            if getattr(s, "withdrawn", False):
                reason = esc(getattr(s, "withdrawn_reason", None) or "failed a check")
                body = f'<s>{body}</s> <em class="aqa-withdrawn">(withdrawn: {reason})</em>'
            elif not s.supported:
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
    # Narrow screens stack the table: each cell then shows its paper's name.
    names = {p.paper_id: f"[{i}] {p.title}" for i, p in enumerate(cmp.papers, 1)}
    rows = []
    for aspect in ASPECTS:
        cells = []
        for p in cmp.papers:
            cell = cmp.cells.get(p.paper_id, {}).get(aspect)
            if cell is None or not cell.stated:
                text = cell.text if cell and cell.text else "Not stated"
                cells.append(f'<td class="aqa-not-stated" data-paper="{esc(names[p.paper_id])}">'
                             f"{esc(text)}</td>")
                continue
            quote = clean_latex(cell.quote or "")
            cells.append(
                f'<td title="{esc(quote)}" data-paper="{esc(names[p.paper_id])}">'
                f"{esc(clean_latex(cell.text))}"
                f'<details class="aqa-quote"><summary>full sentence</summary>'
                f"<q>{esc(quote)}</q></details></td>"
            )
        rows.append(f'<tr><th scope="row">{esc(ASPECT_LABELS[aspect])}</th>{"".join(cells)}</tr>')
    abstracts = "".join(f'<td data-paper="{esc(names[p.paper_id])}">{_abstract_details(p)}</td>'
                        for p in cmp.papers)
    rows.append(f'<tr><th scope="row">Abstract</th>{abstracts}</tr>')
    return (
        '<div class="aqa-compare">'
        f'<table><thead><tr><th>Aspect</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
        f'<div class="aqa-synthesis"><h4>Synthesis</h4><p>{_synthesis_html(cmp)}</p></div>'
        f'<div class="aqa-meta">model {esc(cmp.model)} · {cmp.timings.total_ms / 1000:.1f} s</div>'
        "</div>"
    )


# ------------------------------------------------------------------- papers


def score_words(score: float) -> str:
    """A search score in words (hybrid scores: ~0.6+ on topic, ~0.3 loosely)."""
    return f"{match_words(score, 0.6, 0.45)} match {score:.2f}"


def save_button(paper_id: str, saved: bool) -> str:
    label = "★ Saved" if saved else "☆ Save"
    return (f'<button type="button" class="aqa-save{" is-saved" if saved else ""}" '
            f'data-save="{esc(paper_id)}" aria-pressed="{"true" if saved else "false"}" '
            f'title="Add to / remove from the saved list">{label}</button>')


def explorer_card(p: Paper, *, score: float | None, snippet: str, query: str,
                  saved: bool, cluster: str | None = None) -> str:
    """One search result: title, authors, metadata, score in words, the
    best-matching snippet with the query's words marked, and a Save toggle."""
    authors = _authors(p)
    meta = [x for x in (p.venue, str(p.year) if p.year else None, p.source) if x]
    if cluster:
        meta.append(f"topic: {cluster}")
    snip = highlight(clean_latex(snippet), [query]) if query else esc(clean_latex(snippet))
    return (
        f'<div class="aqa-card aqa-result{" is-saved" if saved else ""}" '
        f'data-paper="{esc(p.paper_id)}">'
        f'<div class="aqa-card-head">{save_button(p.paper_id, saved)} {paper_heading(p)}</div>'
        + (f'<div class="aqa-authors">{esc(authors)}</div>' if authors else "")
        + (f'<div class="aqa-meta">{esc(" · ".join(meta))}</div>' if meta else "")
        + (f'<div class="aqa-score">{esc(score_words(score))}</div>' if score is not None else "")
        + f'<blockquote class="aqa-passage aqa-snippet">{snip}</blockquote>'
        + _abstract_details(p, "Abstract, metadata and provenance")
        + "</div>"
    )


def explorer_html(rows: Sequence[tuple[Paper, float | None, str]], *, query: str = "",
                  saved: Iterable[str] = (), clusters: dict[str, str] | None = None) -> str:
    """Result cards; ``rows`` are (paper, score or None, snippet)."""
    if not rows:
        return '<div class="aqa-empty">No papers match.</div>'
    saved_ids = set(saved)
    cards = [explorer_card(p, score=sc, snippet=sn, query=query, saved=p.paper_id in saved_ids,
                           cluster=(clusters or {}).get(p.paper_id)) for p, sc, sn in rows]
    return f'<div class="aqa-panel aqa-results">{"".join(cards)}</div>'


def papers_html(papers: Sequence[Paper], scores: dict[str, float] | None = None) -> str:
    """Plain paper list (title, authors, metadata, provenance, abstract)."""
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


def saved_html(papers: Sequence[Paper]) -> str:
    """The session's saved list, each with a remove toggle."""
    if not papers:
        return ('<div class="aqa-empty">No saved papers yet: use ☆ Save on a result card. '
                "Saved papers can be exported or sent to Compare or Chat.</div>")
    items = "".join(
        f'<li data-paper="{esc(p.paper_id)}">{paper_heading(p)} '
        f'<button type="button" class="aqa-save is-saved" data-save="{esc(p.paper_id)}" '
        f'title="Remove from the saved list">✕</button></li>'
        for p in papers
    )
    return f'<div class="aqa-saved"><b>Saved papers ({len(papers)})</b><ol>{items}</ol></div>'


_PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04",
            "#db2777", "#4b5563", "#65a30d", "#7c3aed", "#0d9488", "#b91c1c", "#1d4ed8",
            "#a16207", "#be185d"]


def topic_map_svg(tmap: object, titles: dict[str, str], *, selected: int | None = None,
                  width: int = 900, height: int = 520) -> str:
    """The topic map as inline SVG: one dot per paper (hover: its title), a
    clickable label per cluster (``data-cluster``); the selected one is bold."""
    points = getattr(tmap, "points", [])
    clusters = getattr(tmap, "clusters", [])
    if not points:
        return '<div class="aqa-empty">The topic map appears once papers are indexed.</div>'
    pad = 24
    r = 4.5 if len(points) <= 200 else 2.2 if len(points) <= 1500 else 1.6

    def xy(x: float, y: float) -> tuple[float, float]:
        return pad + x * (width - 2 * pad), pad + (1 - y) * (height - 2 * pad)

    dots = []
    for pt in points:
        cx, cy = xy(pt.x, pt.y)
        color = _PALETTE[pt.cluster % len(_PALETTE)]
        faded = selected is not None and pt.cluster != selected
        dots.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{r}" fill="{color}" '
            f'data-cluster="{pt.cluster}" class="aqa-dot{" is-faded" if faded else ""}">'
            f"<title>{esc(titles.get(pt.paper_id, pt.paper_id))}</title></circle>"
        )
    labels = []
    for c in clusters:
        cx, cy = xy(c.x, c.y)
        anchor = "start" if cx < width * 0.2 else "end" if cx > width * 0.8 else "middle"
        color = _PALETTE[c.cluster % len(_PALETTE)]
        cls = "aqa-cluster" + (" is-selected" if selected == c.cluster else "")
        labels.append(
            f'<g class="{cls}" data-cluster="{c.cluster}" role="button" tabindex="0">'
            f'<title>{esc(c.label)} — {c.size} papers (click to list them)</title>'
            f'<text x="{cx:.1f}" y="{cy - 8:.1f}" text-anchor="{anchor}" fill="{color}">'
            f"{esc(c.label)} ({c.size})</text></g>"
        )
    method = esc(getattr(tmap, "method", ""))
    return (
        f'<div class="aqa-map"><svg viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="Topic map of {len(points)} papers">{"".join(dots)}{"".join(labels)}</svg>'
        f'<div class="aqa-meta">{len(points)} papers · {len(clusters)} topics · {method} on '
        "the paper embeddings; labels are each cluster's top TF-IDF terms. Click a label "
        "(or pick a topic) to list its papers.</div></div>"
    )


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
.aqa-card{border:1px solid var(--border-color-primary);border-radius:8px;padding:8px 10px;margin:6px 0;scroll-margin:80px}
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
.aqa-compare{overflow-x:auto}
.aqa-compare table{border-collapse:collapse;width:100%;table-layout:fixed}
.aqa-compare thead th:first-child{width:13%}
.aqa-compare th,.aqa-compare td{border:1px solid var(--border-color-primary);padding:6px;vertical-align:top;text-align:left;overflow-wrap:anywhere;hyphens:auto}
.aqa-not-stated{color:var(--body-text-color-subdued);font-style:italic}
.aqa-unsupported{background:#fee2e2}
.aqa-withdrawn{color:#b91c1c;font-size:.9em}
.aqa-card.aqa-flash{animation:aqa-flash 2.4s ease-out;outline:3px solid var(--color-accent)}
@keyframes aqa-flash{0%{background:#fde68a}100%{background:transparent}}
.aqa-save{border:1px solid var(--border-color-primary);border-radius:6px;padding:0 6px;margin-right:4px;font-size:.85em;cursor:pointer;background:var(--background-fill-secondary)}
.aqa-save.is-saved{background:#fde68a;color:#000}
.aqa-result.is-saved{border-color:#ca8a04}
.aqa-saved ol{margin:4px 0 0 18px;padding:0}
.aqa-map svg{width:100%;height:auto;border:1px solid var(--border-color-primary);border-radius:8px;background:var(--background-fill-primary)}
.aqa-map .aqa-cluster{cursor:pointer}
.aqa-map .aqa-cluster text{font-size:13px;font-weight:600;paint-order:stroke;stroke:var(--background-fill-primary);stroke-width:4px}
.aqa-map .aqa-cluster.is-selected text{font-size:16px;text-decoration:underline}
.aqa-map .aqa-dot{opacity:.8}
.aqa-map .aqa-dot.is-faded{opacity:.15}
.aqa-hidden{display:none !important}
@media (max-width:700px){
 .aqa-compare table,.aqa-compare tbody,.aqa-compare tr,.aqa-compare td{display:block;width:auto !important}
 .aqa-compare thead{display:none}
 .aqa-compare tbody th{display:block;width:auto;background:var(--background-fill-secondary)}
 .aqa-compare td::before{content:attr(data-paper);display:block;font-weight:600;font-size:.85em;color:var(--color-accent)}
}
"""

# Page script (passed to launch(head=...)): clickable [n] markers scroll to and
# flash their card; Save toggles and topic-map labels report to hidden
# textboxes; on narrow screens a dropdown closes after a pick.
JS = """
<script>
(() => {
  const report = (id, value) => {
    const el = document.querySelector('#' + id + ' textarea, #' + id + ' input');
    if (!el) return;
    el.value = value;
    el.dispatchEvent(new Event('input', {bubbles: true}));
  };
  document.addEventListener('click', (e) => {
    const t = e.target instanceof Element ? e.target : null;
    if (!t) return;
    const cite = t.closest('a[href*="#aqa-cite-"]');
    if (cite) {
      e.preventDefault(); e.stopPropagation();
      const n = cite.getAttribute('href').split('#aqa-cite-')[1];
      const card = document.getElementById('aqa-cite-' + n);
      if (card) {
        card.scrollIntoView({behavior: 'smooth', block: 'center'});
        card.classList.remove('aqa-flash'); void card.offsetWidth; card.classList.add('aqa-flash');
      }
      return;
    }
    const save = t.closest('[data-save]');
    if (save) {
      e.preventDefault();
      const id = save.getAttribute('data-save');
      const on = !save.classList.contains('is-saved');
      document.querySelectorAll('.aqa-result [data-save]').forEach((b) => {
        if (b.getAttribute('data-save') !== id) return;
        b.classList.toggle('is-saved', on); b.textContent = on ? '★ Saved' : '☆ Save';
      });
      report('aqa-save-toggle', id + '|' + Date.now());
      return;
    }
    const cl = t.closest('#aqa-topic-map [data-cluster]');
    if (cl) { report('aqa-topic-pick', cl.getAttribute('data-cluster') + '|' + Date.now()); return; }
  }, true);
  // Narrow screens: close a dropdown's option list once an option is picked.
  document.addEventListener('mousedown', (e) => {
    const t = e.target instanceof Element ? e.target : null;
    if (!t || !t.closest('ul[role=listbox] li') || window.innerWidth > 700) return;
    setTimeout(() => {
      const a = document.activeElement;
      if (!a || !a.blur) return;
      a.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape', bubbles: true}));
      a.blur();
    }, 120);
  }, true);
})();
</script>
"""
