"""Event handlers of the Papers tab (``Explorer``): hybrid search with a
relevance cut-off, sorting, facet and topic filters, the topic map, and the
saved list with its exports and hand-offs to Compare and Chat. Strings come
from ``ui.render``, downloads from ``ui.export``.

A topic (a map label, chip or the dropdown) narrows the current view: the
query in the box, sorting and facets still apply. A new search (Enter or the
Search button) looks in every topic again and folds the map away, so the
results come first: a topic is a machine-made cluster, picked while
browsing, and a researcher who types a new query means the whole
collection; a filter they no longer see would silently hide matches.
"""

from __future__ import annotations

import logging
from typing import Any

import gradio as gr

from rag.api import EngineAPI
from rag.config import Settings
from rag.errors import AqaError
from rag.text import split_sentences
from rag.types import Filters, Paper
from ui import export, render
from ui.worker import error_text

log = logging.getLogger(__name__)

PAPER_LIST_LIMIT = 60  # papers shown in the explorer before a search or filter narrows them
SORTS = ["Relevance", "Title A–Z", "Newest first"]


def all_papers(engine: EngineAPI) -> list[Paper]:
    """The whole catalogue, or none when the index can't be read."""
    try:
        return list(engine.papers())
    except AqaError:
        return []


def _lead(abstract: str, limit: int = 300) -> str:
    """The abstract's first sentences, whole, up to about ``limit`` characters."""
    out = ""
    for sent in split_sentences(abstract or ""):
        if out and len(out) + len(sent) > limit:
            break
        out = f"{out} {sent}".strip()
    return out


def sort_rows(rows: list[tuple[Paper, float | None, str]],
              sort: str) -> list[tuple[Paper, float | None, str]]:
    if sort == "Title A–Z":
        return sorted(rows, key=lambda r: r[0].title.lower())
    if sort == "Newest first":
        return sorted(rows, key=lambda r: (-(r[0].year or 0), r[0].title.lower()))
    return rows  # relevance: search order (titles when there is no query)


class Explorer:
    """The Papers tab's handlers over one engine."""

    def __init__(self, engine: EngineAPI, settings: Settings) -> None:
        self.engine = engine
        self.settings = settings

    def topic_map(self) -> Any:
        try:
            return self.engine.topic_map()
        except Exception:  # noqa: BLE001 - the map is an extra; the list still works
            log.warning("topic map unavailable", exc_info=True)
            return None

    def topic_choices(self, tmap: Any = None) -> list[tuple[str, str]]:
        tmap = tmap if tmap is not None else self.topic_map()
        clusters = getattr(tmap, "clusters", []) if tmap is not None else []
        return [("All topics", "")] + [(f"{c.label} ({c.size})", str(c.cluster))
                                       for c in clusters]

    def topic_map_html(self, topic: str | None = None) -> str:
        tmap = self.topic_map()
        if tmap is None:
            return render.error_panel("The topic map could not be computed; see the server log.")
        titles = {p.paper_id: p.display_title for p in all_papers(self.engine)}
        sel = int(topic) if topic not in (None, "") else None
        return render.topic_map_svg(tmap, titles, selected=sel)

    def search_papers(self, query: str | None, sort: str | None = "Relevance",
                      min_score: float | None = None, sources: list[str] | None = None,
                      venues: list[str] | None = None, years: list[Any] | None = None,
                      topic: str | None = None,
                      saved: list[str] | None = None) -> tuple[str, str]:
        """Explorer: (result cards html, note). Hybrid search with a relevance
        cut-off when there is a query, else the whole (filtered) collection."""
        query = (query or "").strip()
        cutoff = self.settings.ui.ui_min_score if min_score is None else float(min_score)
        filters = Filters.from_lists(sources, venues, years, None)
        tmap = self.topic_map()  # also names each card's topic
        labels: dict[str, str] = {}
        topic_note = ""
        if tmap is not None:
            names = {c.cluster: c.label for c in tmap.clusters}
            labels = {p.paper_id: names.get(p.cluster, "") for p in tmap.points}
            if topic not in (None, ""):
                ids = tmap.paper_ids(int(topic))
                filters = filters or Filters()
                filters.paper_ids = ids
                topic_note = f" in topic “{render.md_escape(names.get(int(topic), str(topic)))}”"
        try:
            if query:
                kept = self.engine.search(query, k=self.settings.ui.ui_search_limit,
                                          filters=filters, min_score=cutoff)
                rows = [(h.paper, h.score, h.snippet) for h in kept]
                hidden = kept.below_min_score
                note = (f"{len(kept)} papers match “{render.md_escape(query)}”{topic_note} "
                        f"(score ≥ {cutoff:.2f}"
                        + (f"; {hidden} weaker matches hidden — lower the cut-off to see them"
                           if hidden else "") + ").")
            else:
                all_p = list(self.engine.papers(filters=filters))
                rows = [(p, None, _lead(p.abstract)) for p in all_p]
                note = f"{len(all_p)} papers{topic_note}" + (
                    f" (first {PAPER_LIST_LIMIT} shown; search or filter to narrow)."
                    if len(all_p) > PAPER_LIST_LIMIT else ".")
        except Exception as e:  # noqa: BLE001
            return render.error_panel(error_text(e)), ""
        if topic_note and not rows:
            note += " Search again (Enter) to look in all topics."
        rows = sort_rows(rows, sort or "Relevance")[:PAPER_LIST_LIMIT]
        return (render.explorer_html(rows, query=query, saved=saved or [], clusters=labels),
                note)

    def new_search(self, query: str | None, sort: str | None, min_score: float | None,
                   sources: list[str] | None, venues: list[str] | None,
                   years: list[Any] | None, topic: str | None,
                   saved: list[str] | None) -> tuple:
        """Enter / Search: every topic is searched (the topic filter is
        cleared) and, for a query, the map folds away so results come first.
        Returns (results, note, topic dropdown, map, map accordion)."""
        results, note = self.search_papers(query, sort, min_score, sources, venues, years,
                                           None, saved)
        had_topic = topic not in (None, "")
        return (results, note, gr.Dropdown(value="") if had_topic else gr.skip(),
                self.topic_map_html(None) if had_topic else gr.skip(),
                gr.Accordion(open=not (query or "").strip()))

    def topic_view(self, topic: str | None, *args: Any) -> tuple[str, str, str]:
        """A topic picked (dropdown or map label): (map, results, note)."""
        results, note = self.search_papers(*args[:6], topic, *args[6:])
        return self.topic_map_html(topic), results, note

    def pick_topic(self, token: str | None, *args: Any) -> tuple:
        """A click on a map label or topic chip reports "cluster|time": select
        that topic and list it. Returns (dropdown, map, results, note)."""
        cluster = (token or "").split("|")[0]
        if not cluster.isdigit():
            return (gr.skip(),) * 4
        return (gr.Dropdown(value=cluster), *self.topic_view(cluster, *args))

    def saved_outputs(self, saved: list[str]) -> tuple:
        """(saved list html, BibTeX, CSV, Markdown downloads, note)."""
        papers = {p.paper_id: p for p in all_papers(self.engine)}
        chosen = [papers[i] for i in saved if i in papers]
        if not chosen:
            off = gr.DownloadButton(value=None, interactive=False)
            return render.saved_html([]), off, off, off, ""
        csv_path = export.write_export(export.saved_csv(chosen), "saved-papers", ".csv")
        md_path = export.write_export(export.saved_markdown(chosen), "saved-papers", ".md")
        citable = [p for p in chosen if not p.title_derived]
        bib = (export.write_export(export.bibtex(chosen), "saved-papers", ".bib")
               if citable else None)
        note = "" if len(citable) == len(chosen) else (
            f"BibTeX needs real titles (paper metadata): {len(chosen) - len(citable)} saved "
            "paper(s) only have a derived label and are left out of it.")
        return (render.saved_html(chosen), gr.DownloadButton(value=bib, interactive=bool(bib)),
                gr.DownloadButton(value=csv_path, interactive=True),
                gr.DownloadButton(value=md_path, interactive=True), note)

    def toggle_saved(self, token: str | None, saved: list[str] | None) -> tuple:
        """A card's Save toggle reports "paper_id|time": add or remove it."""
        pid = (token or "").rsplit("|", 1)[0]
        saved = list(saved or [])
        if pid:
            saved = [i for i in saved if i != pid] if pid in saved else [*saved, pid]
        return (saved, *self.saved_outputs(saved))

    def clear_saved(self) -> tuple:
        return ([], *self.saved_outputs([]))

    @staticmethod
    def send_to_compare(selected: list[str] | None) -> tuple:
        ids = list(selected or [])
        if len(ids) < 2:
            gr.Warning("Save at least 2 papers to compare.")
            return gr.skip(), gr.skip()
        if len(ids) > 4:
            gr.Warning("Compare takes at most 4 papers; using the first 4 saved.")
        return gr.Dropdown(value=ids[:4]), gr.Tabs(selected="compare")

    @staticmethod
    def ask_about(selected: list[str] | None) -> tuple:
        ids = list(selected or [])
        if not ids:
            gr.Warning("Save at least one paper to ask about.")
            return gr.skip(), gr.skip(), gr.skip()
        gr.Info(f"Chat answers now come only from the {len(ids)} saved paper(s); "
                "clear “Only these papers” in Settings to search everything.")
        return gr.Dropdown(value=ids), gr.Accordion(open=True), gr.Tabs(selected="chat")
