"""The Gradio app (`aqa serve`): chat with cited papers, side-by-side
comparison and a paper browser, all driven by the ``rag.Engine`` API.

This module owns the layout, the per-session state and the event handlers;
it holds no retrieval or prompting logic. Every string it shows is built by
``ui.render`` (escaped), and every download by ``ui.export``. Engine calls
that involve the LLM run in a worker thread under ``settings.ui.ui_timeout`` so
a slow or unreachable model ends in a clear message, never a frozen spinner.
"""

from __future__ import annotations

import atexit
import csv
import html
import io
import json
import logging
import os
import queue
import re
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag.config import Settings, get_settings, setup_offline_env

setup_offline_env()  # before gradio is imported: analytics off, offline hubs

import gradio as gr  # noqa: E402

from rag.api import EngineAPI  # noqa: E402
from rag.errors import AqaError  # noqa: E402
from rag.llm import cancel_all, cancel_scope  # noqa: E402
from rag.text import split_sentences  # noqa: E402
from rag.types import Answer, Comparison, Filters, Paper  # noqa: E402
from ui import export, render  # noqa: E402

log = logging.getLogger(__name__)

PAPER_LIST_LIMIT = 60  # papers shown in the explorer before a search or filter narrows them
SORTS = ["Relevance", "Title A–Z", "Newest first"]
# Example questions once papers are pinned ("Ask about selected").
PINNED_EXAMPLES_ONE = ["Summarize this paper.", "What are its limitations?",
                       "Which datasets or benchmarks does it use?", "What results does it report?"]
PINNED_EXAMPLES_MANY = ["Summarize these papers.", "How do these papers differ?",
                        "What are their limitations?", "Which datasets or benchmarks do they use?"]


class UITimeout(AqaError):
    """An answer or comparison took longer than ``settings.ui.ui_timeout``."""


@dataclass
class Turn:
    """One chat exchange kept in the session state (``answer`` None = failed)."""

    question: str
    answer: Answer | None


def run_with_deadline(make_iter: Callable[[], Iterable[Any]], timeout: float,
                      what: str = "The answer") -> Iterator[Any]:
    """Iterate ``make_iter()`` in a worker thread, re-yielding its items here.

    Raises the worker's exception, or ``UITimeout`` once ``timeout`` seconds
    have passed. On timeout or early close the worker stops at its next item
    and closes the engine generator, and any LLM stream inside the call (also
    one inside a single call such as ``engine.compare``) stops at its next
    token (``rag.llm.cancel_scope``), which releases the LLM for other users.
    """
    q: queue.Queue[tuple[str, Any]] = queue.Queue()
    cancel = threading.Event()

    def work() -> None:
        it = None
        try:
            with cancel_scope(cancel):
                it = iter(make_iter())
                for item in it:
                    if cancel.is_set():
                        break
                    q.put(("item", item))
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            q.put(("error", e))
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # noqa: BLE001 - best effort cleanup
                    log.debug("closing engine iterator failed", exc_info=True)
            q.put(("done", None))

    threading.Thread(target=work, name="aqa-ui-worker", daemon=True).start()
    deadline = time.monotonic() + timeout
    try:
        while True:
            remaining = deadline - time.monotonic()
            try:
                if remaining <= 0:
                    raise queue.Empty
                kind, value = q.get(timeout=remaining)
            except queue.Empty:
                raise UITimeout(
                    f"{what} took longer than {timeout:g} s (AQA_UI_TIMEOUT). The language "
                    "model may be slow or unreachable; try again or raise the timeout."
                ) from None
            if kind == "item":
                yield value
            elif kind == "error":
                raise value
            else:
                return
    finally:
        cancel.set()


def message_text(content: Any) -> str:
    """Plain text of a chat message's content (str, or Gradio's normalised
    list of ``{"type": "text", "text": ...}`` parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        return str(content.get("text") or content.get("content") or "")
    if isinstance(content, (list, tuple)):
        return " ".join(message_text(c) for c in content if not isinstance(c, (list, tuple)))
    return ""


def _unrender(markdown: str) -> str:
    """Best-effort plain text of a rendered chat message (fallback only)."""
    return re.sub(r"\\(.)", r"\1", html.unescape(markdown)).replace(" ▌", "")


def error_text(err: BaseException) -> str:
    if isinstance(err, AqaError):
        return str(err) or type(err).__name__
    log.error("unexpected error in the UI", exc_info=err)
    return f"Unexpected error ({type(err).__name__}): {err}. See the server log."


def make_filters(sources: list[str] | None, venues: list[str] | None,
                 years: list[Any] | None, paper_ids: list[str] | None) -> Filters | None:
    return Filters.from_lists(sources, venues, years, paper_ids)


_exports: Path | None = None
_exports_lock = threading.Lock()


def exports_root() -> Path:
    """This process's one ``aqa-exports-*`` temp folder, made on first use;
    ``cleanup_exports`` removes it (registered with atexit once, and called
    by ``serve`` on SIGINT/SIGTERM)."""
    global _exports
    with _exports_lock:
        if _exports is None or not _exports.is_dir():
            first = _exports is None
            _exports = Path(tempfile.mkdtemp(prefix="aqa-exports-"))
            if first:
                atexit.register(cleanup_exports)
        return _exports


def cleanup_exports() -> None:
    """Remove the export folder (idempotent; a later export makes a new one)."""
    with _exports_lock:
        root = _exports
    if root is not None:
        shutil.rmtree(root, ignore_errors=True)


class AqaUI:
    """Event handlers, separated from the layout so unit tests can call them."""

    def __init__(self, engine: EngineAPI, settings: Settings | None = None) -> None:
        self.engine = engine
        self.settings = settings or getattr(engine, "settings", None) or get_settings()
        # Export files: one fresh folder per download (no clash between sessions),
        # all under the process's one export root, removed at exit or on a
        # signal (cleanup_exports); Gradio serves copies from its cache.
        self.export_root = exports_root()

    def _write(self, content: str, stem: str, suffix: str) -> str:
        folder = Path(tempfile.mkdtemp(dir=exports_root()))
        return export.write_export(content, stem, suffix, folder)

    # ------------------------------------------------------------ catalogue

    def all_papers(self) -> list[Paper]:
        try:
            return list(self.engine.papers())
        except AqaError:
            return []

    def paper_choices(self, papers: list[Paper] | None = None) -> list[tuple[str, str]]:
        papers = self.all_papers() if papers is None else papers
        return [(render.paper_choice_label(p), p.paper_id) for p in papers]

    def facet_choices(self) -> tuple[list[str], list[str], list[int]]:
        papers = self.all_papers()
        try:
            sources = sorted(self.engine.status().sources)
        except AqaError:
            sources = []
        sources = sources or sorted({p.source for p in papers if p.source})
        venues = sorted({p.venue for p in papers if p.venue})
        years = sorted({p.year for p in papers if p.year})
        return sources, venues, years

    def status_markdown(self) -> str:
        try:
            st = self.engine.status()
        except AqaError as e:
            return render.md_escape(str(e))
        if st.papers == 0:
            return "**No papers are indexed yet.** Run `aqa ingest` (or restart `aqa serve`)."
        return render.status_markdown(st)

    def example_questions(self) -> list[str]:
        try:
            return list(self.engine.example_questions(4))
        except Exception:  # noqa: BLE001 - examples are optional decoration
            log.warning("example questions unavailable", exc_info=True)
            return []

    # ----------------------------------------------------------------- chat

    def engine_history(self, history: list[dict], turns: list[Turn]) -> list[dict]:
        """Conversation for the engine: the plain answer text kept in ``turns``
        (not the rendered Markdown shown in the chat), skipping failed turns.
        Assistant messages carry ``papers``: the cited paper ids in citation
        order, so the engine can resolve "the second one"."""
        out: list[dict] = []
        users = [i for i, m in enumerate(history) if m.get("role") == "user"]
        for n, i in enumerate(users):
            question = message_text(history[i].get("content"))
            turn = turns[n] if n < len(turns) else None
            papers: list[str] = []
            if turn is not None and turn.question == question:
                if turn.answer is None:
                    continue
                reply = turn.answer.text
                cites = sorted(turn.answer.citations, key=lambda c: c.number)
                papers = list(dict.fromkeys(c.paper.paper_id for c in cites))
            else:  # history the session state does not know (e.g. edited)
                nxt = history[i + 1] if i + 1 < len(history) else None
                if nxt is None or nxt.get("role") != "assistant":
                    continue
                reply = _unrender(message_text(nxt.get("content")))
            out += [{"role": "user", "content": question},
                    {"role": "assistant", "content": reply, "papers": papers}]
        return out

    def export_buttons(self, turns: list[Turn]) -> tuple[Any, Any, Any]:
        answers = [t.answer for t in turns if t.answer is not None]
        if not answers:
            return tuple(gr.DownloadButton(value=None, interactive=False) for _ in range(3))
        md = self._write(export.conversation_markdown(answers), "conversation", ".md")
        js = self._write(export.conversation_json(answers), "conversation", ".json")
        cited = export.cited_papers(answers)
        # BibTeX only when some cited paper has a real title (not a derived label).
        bib = (self._write(export.bibtex(cited), "cited-papers", ".bib")
               if any(not p.title_derived for p in cited) else None)
        return (
            gr.DownloadButton(value=md, interactive=True),
            gr.DownloadButton(value=js, interactive=True),
            gr.DownloadButton(value=bib, interactive=bib is not None),
        )

    def respond(self, message: str, history: list[dict], sources: list[str] | None,
                venues: list[str] | None, years: list[Any] | None,
                paper_ids: list[str] | None, k: float | None,
                turns: list[Turn] | None) -> Iterator[tuple]:
        """ChatInterface fn: yields (message, panel, turns, md, json, bib, result);
        ``result`` is the structured answer for API clients (hidden in the page)."""
        skip = gr.skip()
        waiting = (skip,) * 6
        n_prev = sum(1 for m in history if m.get("role") == "user")
        turns = list(turns or [])[:n_prev]  # undo / clear / retry shrink the history
        question = (message or "").strip()
        if not question:
            yield render.error_markdown("Type a question first."), *waiting
            return
        hist = self.engine_history(history, turns)
        filters = make_filters(sources, venues, years, paper_ids)
        yield "_Searching the abstracts…_", *waiting
        partial, answer = "", None
        try:
            events = run_with_deadline(
                lambda: self.engine.ask_stream(
                    question, history=hist, k=int(k) if k else None, filters=filters),
                self.settings.ui.ui_timeout,
            )
            for ev in events:
                if ev.kind == "token":
                    partial += ev.text
                    yield render.stream_markdown(partial), *waiting
                elif ev.kind == "status" and not partial:
                    yield f"_{render.md_escape(ev.text)}_", *waiting
                elif ev.kind == "evidence" and ev.answer is not None:
                    # Cited papers and their quotes show before the synthesis streams.
                    yield ("_Evidence found; writing the answer…_" if not partial
                           else render.stream_markdown(partial),
                           render.citations_panel(ev.answer, preliminary=True), *waiting[1:])
                elif ev.kind == "answer":
                    answer = ev.answer
            if answer is None:
                raise AqaError("The engine finished without an answer.")
        except Exception as e:  # noqa: BLE001 - every failure becomes a chat message
            msg = error_text(e)
            turns.append(Turn(question, None))
            yield (render.error_markdown(msg), render.error_panel(msg), turns,
                   *self.export_buttons(turns), self.result(turns, error=msg))
            return
        turns.append(Turn(question, answer))
        yield (render.answer_markdown(answer), render.citations_panel(answer), turns,
               *self.export_buttons(turns), self.result(turns))

    @staticmethod
    def result(turns: list[Turn], error: str | None = None) -> str:
        """JSON text for API clients: the latest answer (``Answer.to_dict()``, as
        the CLI's --json), the error if it failed, and this session's questions."""
        last = turns[-1].answer if turns else None
        return json.dumps({
            "answer": last.to_dict() if last is not None else None,
            "error": error,
            "conversation": [t.question for t in turns],
        }, ensure_ascii=False)

    def new_chat(self) -> tuple:
        """Clear the conversation, its state, the panel and the exports."""
        return ([], [], [], render.citations_panel(None), *self.export_buttons([]),
                self.result([]), gr.Textbox(value=""))

    # -------------------------------------------------------------- compare

    def compare(self, paper_ids: list[str] | None, query: str | None,
                progress: gr.Progress = gr.Progress()) -> tuple:  # noqa: B008 - Gradio API
        """Returns (table html, markdown download, csv download)."""
        off = gr.DownloadButton(value=None, interactive=False)
        ids = list(dict.fromkeys(paper_ids or []))
        query = (query or "").strip()
        if len(ids) == 1 or (not ids and not query):
            return (render.error_panel("Pick 2 to 4 papers, or describe a topic to pick them."),
                    off, off)
        if len(ids) > 4:
            return render.error_panel("Compare takes at most 4 papers."), off, off
        progress(0.1, desc="Comparing papers and writing the synthesis…")
        try:
            (cmp,) = list(run_with_deadline(
                lambda: [self.engine.compare(ids or None, query=None if ids else query)],
                self.settings.ui.ui_timeout, what="The comparison"))
        except Exception as e:  # noqa: BLE001 - shown in the tab, never a traceback
            return render.error_panel(error_text(e)), off, off
        return self.comparison_outputs(cmp)

    def comparison_outputs(self, cmp: Comparison) -> tuple:
        md = self._write(export.comparison_markdown(cmp), "comparison", ".md")
        csv = self._write(export.comparison_csv(cmp), "comparison", ".csv")
        return (render.comparison_html(cmp), gr.DownloadButton(value=md, interactive=True),
                gr.DownloadButton(value=csv, interactive=True))

    # --------------------------------------------------------------- papers

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
        titles = {p.paper_id: p.display_title for p in self.all_papers()}
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
        filters = make_filters(sources, venues, years, None)
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
                topic_note = f" in topic “{render.md_escape(names.get(int(topic), topic))}”"
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
        rows = sort_rows(rows, sort or "Relevance")[:PAPER_LIST_LIMIT]
        return (render.explorer_html(rows, query=query, saved=saved or [], clusters=labels),
                note)

    def topic_view(self, topic: str | None, *args: Any) -> tuple[str, str, str]:
        """A topic picked (dropdown or map label): (map, results, note)."""
        results, note = self.search_papers(*args[:6], topic, *args[6:])
        return self.topic_map_html(topic), results, note

    @staticmethod
    def pick_topic(token: str | None) -> Any:
        """A click on a map label reports "cluster|time"; select that topic."""
        cluster = (token or "").split("|")[0]
        return gr.Dropdown(value=cluster) if cluster.isdigit() else gr.skip()

    def saved_outputs(self, saved: list[str]) -> tuple:
        """(saved list html, BibTeX, CSV, Markdown downloads, note)."""
        papers = {p.paper_id: p for p in self.all_papers()}
        chosen = [papers[i] for i in saved if i in papers]
        if not chosen:
            off = gr.DownloadButton(value=None, interactive=False)
            return render.saved_html([]), off, off, off, ""
        csv_path = self._write(saved_csv(chosen), "saved-papers", ".csv")
        md_path = self._write(saved_markdown(chosen), "saved-papers", ".md")
        citable = [p for p in chosen if not p.title_derived]
        bib = self._write(export.bibtex(chosen), "saved-papers", ".bib") if citable else None
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

    def send_to_compare(self, selected: list[str] | None) -> tuple:
        ids = list(selected or [])
        if len(ids) < 2:
            gr.Warning("Save at least 2 papers to compare.")
            return gr.skip(), gr.skip()
        if len(ids) > 4:
            gr.Warning("Compare takes at most 4 papers; using the first 4 saved.")
        return gr.Dropdown(value=ids[:4]), gr.Tabs(selected="compare")

    def ask_about(self, selected: list[str] | None) -> tuple:
        ids = list(selected or [])
        if not ids:
            gr.Warning("Save at least one paper to ask about.")
            return gr.skip(), gr.skip(), gr.skip()
        gr.Info(f"Chat answers now come only from the {len(ids)} saved paper(s); "
                "clear “Only these papers” in Settings to search everything.")
        return gr.Dropdown(value=ids), gr.Accordion(open=True), gr.Tabs(selected="chat")

    def examples_for(self, pinned: list[str] | None) -> list[str]:
        """Example questions: about the pinned papers when there are some."""
        if pinned:
            return list(PINNED_EXAMPLES_ONE if len(pinned) == 1 else PINNED_EXAMPLES_MANY)
        return self.example_questions()

    def pinned_changed(self, pinned: list[str] | None) -> Any:
        return gr.Chatbot(examples=[{"text": q} for q in self.examples_for(pinned)])

    def refresh(self) -> tuple:
        """On page load: corpus status and the choices that depend on it."""
        papers = self.all_papers()
        choices = self.paper_choices(papers)
        sources, venues, years = self.facet_choices()
        return (
            self.status_markdown(),
            gr.Dropdown(choices=choices),
            gr.Dropdown(choices=choices),
            gr.CheckboxGroup(choices=sources),
            gr.Dropdown(choices=venues),
            gr.Dropdown(choices=years),
            gr.CheckboxGroup(choices=sources),
            gr.Dropdown(choices=venues),
            gr.Dropdown(choices=years),
            gr.Dropdown(choices=self.topic_choices()),
            self.topic_map_html(None),
        )


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


def saved_csv(papers: list[Paper]) -> str:
    """The saved list as CSV: one paper per row (cells neutralised as in ui.export)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["paper_id", "title", "title_derived", "authors", "venue", "year", "source",
                "url", "abstract"])
    for p in papers:
        w.writerow([export.csv_cell(v) for v in (
            p.paper_id, p.title, p.title_derived, "; ".join(p.authors), p.venue or "",
            p.year or "", p.source, p.url or "", p.abstract)])
    return buf.getvalue()


def saved_markdown(papers: list[Paper]) -> str:
    """The saved list as Markdown (escaped as in ui.export)."""
    out = ["# Saved papers", ""]
    out += [f"{i}. {export._paper_line(p)}" for i, p in enumerate(papers, 1)]
    return "\n".join(out) + "\n"


def build_app(engine: EngineAPI, settings: Settings | None = None) -> gr.Blocks:
    """The whole app for ``engine`` (a ``rag.Engine`` or a stand-in: ``rag.api.EngineAPI``)."""
    ui = AqaUI(engine, settings)
    s = ui.settings
    choices = ui.paper_choices()
    sources, venues, years = ui.facet_choices()
    examples = ui.example_questions()

    # delete_cache: Gradio's copies of export files older than a day are removed.
    with gr.Blocks(title="abstracts-qa", analytics_enabled=False,
                   delete_cache=(3600, 86400)) as app:
        gr.Markdown("## abstracts-qa · grounded answers from paper abstracts")
        with gr.Tabs(selected="chat") as tabs:
            with gr.Tab("Chat", id="chat"):
                turns = gr.State([])
                panel = gr.HTML(render.citations_panel(None), elem_id="aqa-citations",
                                label="Cited papers", render=False)
                dl_md = gr.DownloadButton("Markdown", interactive=False, size="sm",
                                          elem_id="aqa-export-md", render=False)
                dl_json = gr.DownloadButton("JSON", interactive=False, size="sm",
                                            elem_id="aqa-export-json", render=False)
                dl_bib = gr.DownloadButton("BibTeX", interactive=False, size="sm",
                                           elem_id="aqa-export-bib", render=False)
                # Structured result for API clients; a JSON string, because the
                # client would try to download any dict with a "path" key.
                result = gr.Textbox(visible=False, label="Result JSON", render=False)
                with gr.Row(equal_height=False):
                    with gr.Column(scale=3):
                        with gr.Accordion("Settings: filters and papers to retrieve",
                                          open=False, elem_id="aqa-settings") as settings_acc:
                            f_sources = gr.CheckboxGroup(sources, label="Sources (none = all)")
                            with gr.Row():
                                f_venues = gr.Dropdown(venues, multiselect=True, value=[],
                                                       label="Venues (none = all)")
                                f_years = gr.Dropdown(years, multiselect=True, value=[],
                                                      label="Years (none = all)")
                            f_papers = gr.Dropdown(choices, multiselect=True, value=[],
                                                   filterable=True, elem_id="aqa-only-papers",
                                                   label="Only these papers (none = all)")
                            f_k = gr.Slider(1, 15, value=s.retrieval.top_k, step=1,
                                            label="Papers to retrieve (k)")
                        chatbot = gr.Chatbot(
                            height=520, label="Answers", elem_id="aqa-chatbot",
                            latex_delimiters=[], allow_tags=False, sanitize_html=True,
                            feedback_options=None, buttons=["copy"],
                            placeholder="Ask about the loaded papers. Answers cite them as [n].",
                        )
                        textbox = gr.Textbox(placeholder="Ask a question about the papers…",
                                             show_label=False, submit_btn=True, stop_btn=True,
                                             elem_id="aqa-question", autofocus=True)
                        chat = gr.ChatInterface(
                            ui.respond,
                            chatbot=chatbot,
                            textbox=textbox,
                            additional_inputs=[f_sources, f_venues, f_years, f_papers, f_k,
                                               turns],
                            additional_outputs=[panel, turns, dl_md, dl_json, dl_bib, result],
                            examples=[[q] for q in examples] or None,
                            cache_examples=False,
                            api_name="chat",
                            analytics_enabled=False,
                            fill_height=False,
                            concurrency_limit=s.llm_concurrency,
                        )
                    with gr.Column(scale=2):
                        with gr.Row():
                            new_chat = gr.Button("New chat", size="sm", elem_id="aqa-new-chat")
                        # Cited papers first: on a phone they come before the exports.
                        panel.render()
                        gr.Markdown("Export conversation:")
                        with gr.Row():
                            dl_md.render()
                            dl_json.render()
                            dl_bib.render()
                        result.render()
                reset_outputs = [chat.chatbot, chat.chatbot_state, turns, panel,
                                 dl_md, dl_json, dl_bib, result, chat.textbox]
                new_chat.click(ui.new_chat, None, reset_outputs, queue=False,
                               api_visibility="private")
                chat.chatbot.clear(lambda: ui.new_chat()[2:8], None,
                                   [turns, panel, dl_md, dl_json, dl_bib, result], queue=False,
                                   api_visibility="private")

            with gr.Tab("Compare", id="compare"):
                gr.Markdown("Pick 2–4 papers, or describe a topic and the engine picks them.")
                with gr.Row():
                    c_papers = gr.Dropdown(choices, multiselect=True, max_choices=4, value=[],
                                           filterable=True, label="Papers (2–4)",
                                           elem_id="aqa-compare-papers", scale=3)
                    c_query = gr.Textbox(label="…or a topic", elem_id="aqa-compare-query",
                                         scale=2)
                with gr.Row():
                    c_btn = gr.Button("Compare", variant="primary", elem_id="aqa-compare-btn")
                    c_md = gr.DownloadButton("Export Markdown", interactive=False, size="sm",
                                             elem_id="aqa-compare-md")
                    c_csv = gr.DownloadButton("Export CSV", interactive=False, size="sm",
                                              elem_id="aqa-compare-csv")
                c_out = gr.HTML('<div class="aqa-empty">The comparison table appears here.</div>',
                                elem_id="aqa-compare-out")
                gr.on([c_btn.click, c_query.submit], ui.compare, [c_papers, c_query],
                      [c_out, c_md, c_csv], api_name="compare", show_progress="full",
                      concurrency_limit=s.llm_concurrency)

            with gr.Tab("Papers", id="papers"):
                status_md = gr.Markdown(ui.status_markdown(), elem_id="aqa-status")
                saved = gr.State([])
                with gr.Row():
                    p_query = gr.Textbox(label="Search the collection (hybrid search)",
                                         elem_id="aqa-paper-query", scale=4)
                    p_btn = gr.Button("Search", elem_id="aqa-paper-search", scale=1)
                with gr.Row():
                    p_sort = gr.Dropdown(SORTS, value=SORTS[0], label="Sort by",
                                         elem_id="aqa-sort", filterable=False)
                    p_min = gr.Slider(0.0, 1.0, value=s.ui.ui_min_score, step=0.05,
                                      label="Relevance cut-off: hide matches scoring below",
                                      elem_id="aqa-min-score")
                with gr.Accordion("Filters: source, venue, year", open=False,
                                  elem_id="aqa-paper-filters"):
                    p_sources = gr.CheckboxGroup(sources, label="Sources (none = all)",
                                                 elem_id="aqa-p-sources")
                    with gr.Row():
                        p_venues = gr.Dropdown(venues, multiselect=True, value=[],
                                               label="Venues (none = all)", elem_id="aqa-p-venues")
                        p_years = gr.Dropdown(years, multiselect=True, value=[],
                                              label="Years (none = all)", elem_id="aqa-p-years")
                with gr.Accordion("Topic map", open=True, elem_id="aqa-topic-acc"):
                    with gr.Row(equal_height=False):
                        p_map = gr.HTML(ui.topic_map_html(None), elem_id="aqa-topic-map")
                    p_topic = gr.Dropdown(ui.topic_choices(), value="", label="Topic",
                                          elem_id="aqa-topic", filterable=True)
                p_note = gr.Markdown(elem_id="aqa-paper-note")
                with gr.Row(equal_height=False):
                    with gr.Column(scale=3):
                        p_results = gr.HTML(elem_id="aqa-paper-results")
                    with gr.Column(scale=2, elem_id="aqa-saved-col"):
                        p_saved = gr.HTML(render.saved_html([]), elem_id="aqa-saved")
                        with gr.Row():
                            p_to_compare = gr.Button("Compare saved", size="sm",
                                                     elem_id="aqa-to-compare")
                            p_to_chat = gr.Button("Ask about saved", size="sm",
                                                  elem_id="aqa-to-chat")
                            p_clear = gr.Button("Clear", size="sm", elem_id="aqa-clear-saved")
                        gr.Markdown("Export saved list:")
                        with gr.Row():
                            s_bib = gr.DownloadButton("BibTeX", interactive=False, size="sm",
                                                      elem_id="aqa-saved-bib")
                            s_csv = gr.DownloadButton("CSV", interactive=False, size="sm",
                                                      elem_id="aqa-saved-csv")
                            s_md = gr.DownloadButton("Markdown", interactive=False, size="sm",
                                                     elem_id="aqa-saved-md")
                        s_note = gr.Markdown(elem_id="aqa-saved-note")
                # Reported by the page script (card Save toggles, map label clicks).
                save_toggle = gr.Textbox(elem_id="aqa-save-toggle", elem_classes="aqa-hidden",
                                         show_label=False, container=False)
                topic_pick = gr.Textbox(elem_id="aqa-topic-pick", elem_classes="aqa-hidden",
                                        show_label=False, container=False)

                explore_in = [p_query, p_sort, p_min, p_sources, p_venues, p_years, p_topic,
                              saved]
                gr.on([p_btn.click, p_query.submit, p_sort.change, p_min.change,
                       p_sources.change, p_venues.change, p_years.change],
                      ui.search_papers, explore_in, [p_results, p_note],
                      api_name="search_papers")
                p_topic.change(ui.topic_view, [p_topic, *explore_in[:6], saved],
                               [p_map, p_results, p_note], api_visibility="private")
                topic_pick.change(ui.pick_topic, [topic_pick], [p_topic],
                                 api_visibility="private")
                saved_out = [saved, p_saved, s_bib, s_csv, s_md, s_note]
                save_toggle.change(ui.toggle_saved, [save_toggle, saved], saved_out,
                                  api_visibility="private")
                p_clear.click(ui.clear_saved, None, saved_out, api_visibility="private").then(
                    ui.search_papers, explore_in, [p_results, p_note], api_visibility="private")
                p_to_compare.click(ui.send_to_compare, [saved], [c_papers, tabs],
                                   api_visibility="private")
                p_to_chat.click(ui.ask_about, [saved], [f_papers, settings_acc, tabs],
                                api_visibility="private")
                f_papers.change(ui.pinned_changed, [f_papers], [chat.chatbot],
                                api_visibility="private")

        app.load(ui.refresh, None, [status_md, c_papers, f_papers, f_sources, f_venues, f_years,
                                    p_sources, p_venues, p_years, p_topic, p_map],
                 api_visibility="private")
        app.load(ui.search_papers, explore_in, [p_results, p_note], api_visibility="private")
    return app


def check_port(host: str, port: int) -> None:
    """Raise a one-line ``AqaError`` when ``host:port`` can't be bound (in use)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return  # an unknown host: let the server report it
    family, _, _, _, addr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        try:
            sock.bind(addr)
        except OSError as e:
            raise AqaError(
                f"Port {port} on {host} is already in use ({e.strerror or e}): stop the other "
                f"server, or pick a free port with `aqa serve --port {port + 1}` (or AQA_PORT)."
            ) from None


def launch(app: gr.Blocks, settings: Settings, *, port: int | None = None,
           block: bool = True) -> None:
    """Queue + launch with the configured host, port and optional auth.

    Queue: answers and comparisons run ``settings.llm_concurrency`` at a time
    (their own limits, set on those events); every other event (search,
    browsing, exports) runs up to ``settings.ui.ui_workers`` at once, in its own
    group, so none of them waits behind LLM generation.
    """
    auth = None
    if settings.ui.auth_user and settings.ui.auth_password:
        auth = (settings.ui.auth_user, settings.ui.auth_password)
    port = port if port is not None else settings.ui.port
    check_port(settings.ui.host, port)
    app.queue(default_concurrency_limit=max(1, settings.ui.ui_workers),
              max_size=settings.ui.ui_queue_size)
    try:
        app.launch(
            server_name=settings.ui.host,
            server_port=port,
            auth=auth,
            prevent_thread_lock=not block,
            show_error=False,
            share=False,
            inbrowser=False,
            ssr_mode=False,
            mcp_server=False,
            footer_links=["api"],
            css=render.CSS,
            head=render.JS,  # clickable [n], Save toggles, topic-map clicks
            quiet=not block,
        )
    except OSError as e:  # lost a race for the port, or a bad host
        raise AqaError(f"Cannot serve on {settings.ui.host}:{port}: {e}. Pick another port with "
                       "`aqa serve --port N` (or AQA_PORT) or another AQA_HOST.") from None


SHUTDOWN_BUDGET_S = 1.8  # SIGINT/SIGTERM to process exit, at most


def shutdown(app: gr.Blocks | None) -> None:
    """Stop serving now: abandon in-flight LLM work at its next token, remove
    the export folder, then close the server without waiting for open
    connections (bounded, in a helper thread)."""
    cancel_all()
    cleanup_exports()
    if app is None:
        return
    server = getattr(app, "server", None)
    if server is not None:
        # uvicorn: open event streams (queued or streaming answers) are cancelled
        # after 0.5 s instead of being awaited, then the app's shutdown runs
        # (Gradio removes its file cache); its "cancel N tasks" log is expected.
        server.config.timeout_graceful_shutdown = 0.5
        logging.getLogger("uvicorn.error").setLevel(logging.CRITICAL)
    closer = threading.Thread(target=app.close, kwargs={"verbose": False},
                              name="aqa-close", daemon=True)
    closer.start()
    closer.join(timeout=1.2)


def serve(settings: Settings | None = None, engine: EngineAPI | None = None) -> int:
    """Run the app until SIGINT or SIGTERM (ingests the configured corpus if
    the index is empty, so the first run works on the bundled corpus).

    On either signal it shuts down within ``SHUTDOWN_BUDGET_S``: running
    answers stop at their next token, the export folder is removed, and the
    process exits even if some library thread would keep it alive. Returns
    the exit status (130 after SIGINT, 0 after SIGTERM).
    """
    settings = settings or (engine.settings if engine is not None else get_settings())
    main = threading.current_thread() is threading.main_thread()
    caught: list[int] = []
    stop = threading.Event()

    def interrupt(signum: int, _frame: Any) -> None:  # before the app runs: like Ctrl-C
        raise KeyboardInterrupt

    def on_signal(signum: int, _frame: Any) -> None:
        if caught:  # a second signal: don't wait any longer
            os._exit(128 + signum)
        caught.append(signum)
        stop.set()

    if main:
        signal.signal(signal.SIGTERM, interrupt)
    if engine is None:
        from rag.engine import Engine

        engine = Engine(settings)
    if engine.status().papers == 0:
        print("Indexing the corpus (the first run embeds every abstract once)…", flush=True)
        rep = engine.ingest(progress=True)
        print(f"Indexed {rep.papers_total} papers.", flush=True)
    app = build_app(engine, settings)
    if main:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, on_signal)
    try:
        launch(app, settings, block=False)  # a port in use ends here, in one line
        print(f"abstracts-qa is running on http://{settings.ui.host}:{app.server_port} "
              "(Ctrl-C to stop)", flush=True)
        while not stop.wait(0.2):
            pass
    except KeyboardInterrupt:
        caught.append(signal.SIGINT)
    finally:
        t_signal = time.monotonic()
        code = 130 if not caught or caught[0] == signal.SIGINT else 0
        if caught:
            # Whatever a library thread does meanwhile, the process ends in time.
            watchdog = threading.Timer(SHUTDOWN_BUDGET_S, _hard_exit, args=(code,))
            watchdog.daemon = True
            watchdog.start()
            print("Shutting down…", flush=True)
        shutdown(app)
        if caught:
            _exit_now(code, deadline=t_signal + SHUTDOWN_BUDGET_S)
    return 130 if not caught or caught[0] == signal.SIGINT else 0


def _exit_now(code: int, deadline: float) -> None:
    """End the process after a signal: run the atexit handlers (bounded by
    ``deadline``), then exit without the interpreter's slow teardown of
    torch/chroma/gradio threads, which measured 2-4 s."""
    runner = threading.Thread(target=atexit._run_exitfuncs, name="aqa-atexit", daemon=True)
    runner.start()
    runner.join(timeout=max(0.0, deadline - time.monotonic()))
    _hard_exit(code)


def _hard_exit(code: int) -> None:
    cleanup_exports()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
