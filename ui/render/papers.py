"""Papers rendering (re-exported by ``ui.render``): the explorer's cards and
Save buttons, the papers and saved lists, the topic-map SVG, the corpus status
and the paper dropdown labels.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rag.text import clean_latex
from rag.types import (
    CorpusStatus,
    Paper,
)
from ui.render.base import _abstract_details, _authors, esc, highlight, md_escape, paper_heading
from ui.render.chat import match_words


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
    clickable label per cluster (``data-cluster``); the selected one is bold.
    The same topics follow as chips (buttons), which narrow screens show
    instead of the labels: there the scaled-down SVG text would be ~4 px."""
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
    chips = "".join(
        f'<button type="button" class="aqa-chip{" is-selected" if selected == c.cluster else ""}" '
        f'data-cluster="{c.cluster}" aria-pressed="{"true" if selected == c.cluster else "false"}"'
        f' style="border-color:{_PALETTE[c.cluster % len(_PALETTE)]}">{esc(c.label)} '
        f"({c.size})</button>"
        for c in clusters
    )
    method = esc(getattr(tmap, "method", ""))
    return (
        f'<div class="aqa-map"><svg viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="Topic map of {len(points)} papers">{"".join(dots)}{"".join(labels)}</svg>'
        f'<div class="aqa-topic-chips" role="group" aria-label="Topics">{chips}</div>'
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
