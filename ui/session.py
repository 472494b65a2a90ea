"""Per-session event handlers of the Chat and Compare tabs (``AqaUI``), kept
apart from the layout so unit tests can call them; the Papers tab's handlers
are ``ui.explorer.Explorer`` (``AqaUI.explorer``).

A conversation lives in ``gr.State`` as typed ``Turn`` objects: the engine's
follow-up history is built from the checked ``Answer`` of each turn, never
from the Markdown the chat shows. Every string shown is built by
``ui.render``, every download by ``ui.export``; LLM calls run under
``ui.worker.run_with_deadline``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import gradio as gr

from rag.api import EngineAPI
from rag.config import Settings, get_settings
from rag.errors import AqaError
from rag.types import Answer, Comparison, Filters
from ui import export, render
from ui.admission import Admission, Busy
from ui.explorer import Explorer, all_papers
from ui.warmup import MESSAGE as WARMUP_MESSAGE
from ui.warmup import Warmup
from ui.worker import error_text, run_with_deadline

log = logging.getLogger(__name__)
# Answer durations assumed until some are measured (ui.admission): the bundled
# model on 2 cores, and a model server (measured ~1-2 s with a fast one).
FIRST_ESTIMATE_LOCAL_S = 15.0
FIRST_ESTIMATE_SERVER_S = 2.0
STREAM_UPDATES_PER_S = 10  # redraws of a streaming answer (tokens between are batched)

# Example questions once papers are pinned ("Ask about selected").
PINNED_EXAMPLES_ONE = ["Summarize this paper.", "What are its limitations?",
                       "Which datasets or benchmarks does it use?", "What results does it report?"]
PINNED_EXAMPLES_MANY = ["Summarize these papers.", "How do these papers differ?",
                        "What are their limitations?", "Which datasets or benchmarks do they use?"]


@dataclass
class Turn:
    """One chat exchange: the question, the checked answer (None when it
    failed or was stopped, so it is never used as history) and the Markdown
    the chat shows for it."""

    question: str
    answer: Answer | None
    rendered: str = ""
    stopped: bool = False
    # What this turn left in the panel, the three export buttons and the result
    # box: (panel HTML, md path, json path, bib path, result JSON); a display
    # cache, not part of the turn's identity.
    shown: tuple = field(default=(), compare=False, repr=False)


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


def user_questions(history: list[dict]) -> list[str]:
    """The user messages of the chat's history, as plain text."""
    return [message_text(m.get("content")) for m in history if m.get("role") == "user"]


def aligned_turns(turns: list[Turn] | None, questions: list[str]) -> list[Turn]:
    """The turns that still match the chat, in order: undo, retry, edit and
    clear shrink or change the history, and a turn past the first mismatch
    no longer belongs to this conversation."""
    out: list[Turn] = []
    for turn, question in zip(turns or [], questions, strict=False):
        if turn.question != question:
            break
        out.append(turn)
    return out


def engine_history(turns: list[Turn]) -> list[dict]:
    """Conversation for ``engine.ask(history=...)``: each checked answer's
    plain text (failed and stopped turns are left out). Assistant messages
    carry ``papers``: the cited paper ids in citation order, so the engine can
    resolve "the second one"."""
    out: list[dict] = []
    for turn in turns:
        if turn.answer is None:
            continue
        cites = sorted(turn.answer.citations, key=lambda c: c.number)
        papers = list(dict.fromkeys(c.paper.paper_id for c in cites))
        out += [{"role": "user", "content": turn.question},
                {"role": "assistant", "content": turn.answer.text, "papers": papers}]
    return out


def make_filters(sources: list[str] | None, venues: list[str] | None,
                 years: list[Any] | None, paper_ids: list[str] | None) -> Filters | None:
    return Filters.from_lists(sources, venues, years, paper_ids)


def buttons(files: tuple[str | None, ...]) -> tuple[Any, ...]:
    """Export buttons for ``files``, each enabled when it has a file (a property
    update: Gradio builds each anew, so only when a button's state changes)."""
    return tuple(gr.DownloadButton(value=f, interactive=f is not None) for f in files)


def _off() -> Any:
    return gr.DownloadButton(value=None, interactive=False)


class AqaUI:
    """Event handlers of one app (Gradio keeps each session's state apart)."""

    def __init__(self, engine: EngineAPI, settings: Settings | None = None,
                 warmup: Warmup | None = None) -> None:
        self.engine = engine
        self.settings = settings or getattr(engine, "settings", None) or get_settings()
        self.warmup = warmup  # serve()'s start-up warm-up, if one runs
        self.explorer = Explorer(engine, self.settings)
        # The export folder exists (and its atexit cleanup is registered) from
        # the moment the app is built, not from the first download.
        self.export_root = export.exports_root()
        # Answers run llm_concurrency at a time; beyond that a request waits only
        # while its estimated wait stays under ui_max_wait (ui.admission).
        local = self.settings.llm.resolved_provider == "local"
        self.admission = Admission(
            self.settings.llm_concurrency, self.settings.ui.ui_max_wait,
            FIRST_ESTIMATE_LOCAL_S if local else FIRST_ESTIMATE_SERVER_S)

    # ------------------------------------------------------------ catalogue

    def paper_choices(self, papers: list | None = None) -> list[tuple[str, str]]:
        papers = all_papers(self.engine) if papers is None else papers
        return [(render.paper_choice_label(p), p.paper_id) for p in papers]

    def facet_choices(self) -> tuple[list[str], list[str], list[int]]:
        papers = all_papers(self.engine)
        try:
            sources = sorted(self.engine.status().sources)
        except AqaError:
            sources = []
        sources = sources or sorted({p.source for p in papers if p.source})
        venues = sorted({p.venue for p in papers if p.venue})
        years = sorted({p.year for p in papers if p.year})
        return sources, venues, years

    @staticmethod
    def filters_label(sources: list[str], venues: list[str], years: list[int]) -> str:
        """The filters accordion's title, naming only the filters shown: a
        filter with fewer than two values would change nothing, so it is hidden."""
        shown = [name for name, values in (("source", sources), ("venue", venues),
                                           ("year", years)) if len(values) >= 2]
        return "Filters: " + ", ".join(shown) if shown else "Filters"

    # -------------------------------------------------------------- warm-up

    def warming(self) -> bool:
        return self.warmup is not None and self.warmup.pending

    def warmup_tick(self) -> tuple[Any, Any]:
        """The start-up status line and its timer: shown (and polling) while
        the models load, gone once they are ready."""
        on = self.warming()
        return gr.Markdown(visible=on), gr.Timer(active=on)

    def wait_for_warmup(self) -> None:
        """A question asked while the models load waits for them (then runs at
        full speed) instead of loading them a second time beside the warm-up."""
        while self.warmup is not None and not self.warmup.wait(0.5):
            pass

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

    def examples_for(self, pinned: list[str] | None) -> list[str]:
        """Example questions: about the pinned papers when there are some."""
        if pinned:
            return list(PINNED_EXAMPLES_ONE if len(pinned) == 1 else PINNED_EXAMPLES_MANY)
        return self.example_questions()

    def pinned_changed(self, pinned: list[str] | None) -> Any:
        return gr.Chatbot(examples=[{"text": q} for q in self.examples_for(pinned)])

    def refresh(self) -> tuple:
        """On page load: corpus status and the choices that depend on it (a
        filter with fewer than two values is hidden, its accordion too when
        none is left)."""
        choices = self.paper_choices()
        sources, venues, years = self.facet_choices()
        facets = (
            gr.CheckboxGroup(choices=sources, visible=len(sources) >= 2),
            gr.Dropdown(choices=venues, visible=len(venues) >= 2),
            gr.Dropdown(choices=years, visible=len(years) >= 2),
        )
        label = self.filters_label(sources, venues, years)
        return (
            self.status_markdown(),
            gr.Dropdown(choices=choices),
            gr.Dropdown(choices=choices),
            *facets,
            *facets,
            gr.Dropdown(choices=self.explorer.topic_choices()),
            self.explorer.topic_map_html(None),
            gr.Accordion(label=label, visible=label != "Filters"),
        )

    # ----------------------------------------------------------------- chat

    def export_files(self, turns: list[Turn]) -> tuple[str | None, str | None, str | None]:
        """The conversation's downloads (Markdown, JSON, BibTeX), written now;
        None for one that has nothing to hold."""
        answers = [t.answer for t in turns if t.answer is not None]
        if not answers:
            return None, None, None
        md = export.write_export(export.conversation_markdown(answers), "conversation", ".md")
        js = export.write_export(export.conversation_json(answers), "conversation", ".json")
        cited = export.cited_papers(answers)
        # BibTeX only when some cited paper has a real title (not a derived label).
        bib = (export.write_export(export.bibtex(cited), "cited-papers", ".bib")
               if any(not p.title_derived for p in cited) else None)
        return md, js, bib

    def export_buttons(self, turns: list[Turn]) -> tuple[Any, Any, Any]:
        """The three export buttons for ``turns``, each enabled when it has a file."""
        return buttons(self.export_files(turns))

    @staticmethod
    def on_screen(turns: list[Turn]) -> list[Any]:
        """What the panel, the export buttons and the result box show now (what
        the last turn left there, or their first values), as plain values. An
        answer's redraws repeat these instead of ``gr.skip()``: a skip is a
        property update, for which Gradio builds a new component and its JSON
        schema each time (py-spy under ``python -m eval.load``: about a third
        of the server's CPU)."""
        last = next((t.shown for t in reversed(turns) if t.shown), None)
        return list(last) if last else [render.citations_panel(None), None, None, None, ""]

    def export_updates(self, files: tuple[str | None, ...], before: list[Turn]) -> tuple[Any, ...]:
        """The export buttons for ``files`` after one more turn, as cheap updates
        where a button's state (enabled or not) is what ``before`` left: a bare
        file path is a value update, while a component is a property update, for
        which Gradio builds a new component and its JSON schema (measured: about
        a third of the server's CPU per answer, 100 sessions at once)."""
        if [f is not None for f in files] != list(self.export_state(before)):
            return buttons(files)
        return files

    @staticmethod
    def export_state(turns: list[Turn]) -> tuple[bool, bool, bool]:
        """Which export buttons (md, json, bib) ``turns`` leave enabled."""
        answers = [t.answer for t in turns if t.answer is not None]
        if not answers:
            return (False, False, False)
        return (True, True, any(not p.title_derived for p in export.cited_papers(answers)))

    def respond(self, message: str, history: list[dict], sources: list[str] | None,
                venues: list[str] | None, years: list[Any] | None,
                paper_ids: list[str] | None, k: float | None,
                turns: list[Turn] | None) -> Iterator[tuple]:
        """ChatInterface fn: yields (message, panel, turns, md, json, bib, result);
        ``result`` is the structured answer for API clients (hidden in the page)."""
        turns = aligned_turns(turns, user_questions(history))
        # The outputs after the message while the answer is written: (panel,
        # turns, md, json, bib, result) as they are (see on_screen); a state
        # has no component, so the turns can be skipped. The evidence replaces
        # the panel.
        panel, md, js, bib, res = self.on_screen(turns)
        waiting = [panel, gr.skip(), md, js, bib, res]
        question = (message or "").strip()
        if not question:
            yield render.error_markdown("Type a question first."), *waiting
            return
        hist = engine_history(turns)
        filters = make_filters(sources, venues, years, paper_ids)
        if self.warming():  # the models are loading at start-up: wait for them
            yield f"_{render.md_escape(WARMUP_MESSAGE)}_", *waiting
            self.wait_for_warmup()
        try:
            with self.admission.enter() as waiter:
                for ahead in waiter:  # only while every answer slot is taken
                    yield f"_Waiting for a free answer slot ({ahead} in line)…_", *waiting
                yield from self._answer(question, hist, k, filters, turns, waiting)
        except Busy as b:  # refused at once, with when to retry; nothing is kept
            msg = str(b)
            yield (render.error_markdown(msg), render.error_panel(msg), turns,
                   md, js, bib, self.result(turns, error=msg))

    def _answer(self, question: str, hist: list[dict], k: float | None,
                filters: Filters | None, turns: list[Turn], waiting: list) -> Iterator[tuple]:
        """One admitted answer: streams, then the checked answer (or the error)."""
        yield "_Searching the abstracts…_", *waiting
        partial, answer = "", None
        try:
            events = run_with_deadline(
                lambda: self.engine.ask_stream(
                    question, history=hist, k=int(k) if k else None, filters=filters),
                self.settings.ui.ui_timeout,
            )
            shown_at, pending = 0.0, False
            for ev in events:
                if ev.kind == "token":
                    partial += ev.text
                    # At most STREAM_UPDATES_PER_S redraws: each is a Gradio event
                    # (postprocess, SSE) for the whole server, while the reader
                    # sees no difference above ~10 per second.
                    now = time.monotonic()
                    pending = now - shown_at < 1.0 / STREAM_UPDATES_PER_S
                    if not pending:
                        shown_at = now
                        yield render.stream_markdown(partial), *waiting
                elif ev.kind == "status" and not partial:
                    yield f"_{render.md_escape(ev.text)}_", *waiting
                elif ev.kind == "evidence" and ev.answer is not None:
                    # Cited papers and their quotes show before the synthesis streams.
                    waiting[0] = render.citations_panel(ev.answer, preliminary=True)
                    yield ("_Evidence found; writing the answer…_" if not partial
                           else render.stream_markdown(partial), *waiting)
                elif ev.kind == "answer":
                    if pending:  # the tokens batched since the last redraw, then the check
                        yield render.stream_markdown(partial), *waiting
                    answer = ev.answer
            if answer is None:
                raise AqaError("The engine finished without an answer.")
        except Exception as e:  # noqa: BLE001 - every failure becomes a chat message
            msg = error_text(e)
            text = render.error_markdown(msg)
            # A failed turn adds nothing to the exports: the buttons stay as they are.
            turns.append(Turn(question, None, text))
            turns[-1].shown = (render.error_panel(msg), *waiting[2:5], self.result(turns, error=msg))
            yield text, turns[-1].shown[0], turns, *turns[-1].shown[1:]
            return
        text = render.answer_markdown(answer)
        before = list(turns)
        turns.append(Turn(question, answer, text))
        files = self.export_files(turns)
        turns[-1].shown = (render.citations_panel(answer), *files, self.result(turns))
        yield (text, turns[-1].shown[0], turns, *self.export_updates(files, before),
               turns[-1].shown[4])

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

    def stopped(self, history: list[dict], turns: list[Turn] | None) -> tuple:
        """Stop pressed: the unchecked draft (and its cursor) gives way to a
        "Stopped" marker, the panel says so, and the turn is kept as stopped,
        so follow-ups never see the draft. Returns (chat, chat state, panel,
        turns, md, json, bib, result); an answer that finished first stays."""
        questions = user_questions(history)
        turns = aligned_turns(turns, questions)
        if len(turns) == len(questions):  # nothing was running: leave it all as it is
            return (gr.skip(),) * 8
        history = list(history)
        if history and history[-1].get("role") == "assistant":
            history.pop()  # the streamed draft
        history.append({"role": "assistant", "content": render.STOPPED_MARKDOWN})
        turns.append(Turn(questions[-1], None, render.STOPPED_MARKDOWN, stopped=True))
        files = self.export_files(turns)
        turns[-1].shown = (render.stopped_panel(), *files,
                           self.result(turns, error="Stopped before the answer was checked."))
        return (history, history, turns[-1].shown[0], turns,
                *buttons(files),
                turns[-1].shown[4])

    def new_chat(self) -> tuple:
        """Clear the conversation, its state, the panel and the exports."""
        return ([], [], [], render.citations_panel(None), *self.export_buttons([]),
                self.result([]), gr.Textbox(value=""))

    # -------------------------------------------------------------- compare

    def compare(self, paper_ids: list[str] | None, query: str | None,
                progress: gr.Progress = gr.Progress()) -> tuple:  # noqa: B008 - Gradio API
        """Returns (table html, markdown download, csv download)."""
        ids = list(dict.fromkeys(paper_ids or []))
        query = (query or "").strip()
        if len(ids) == 1 or (not ids and not query):
            return (render.error_panel("Pick 2 to 4 papers, or describe a topic to pick them."),
                    _off(), _off())
        if len(ids) > 4:
            return render.error_panel("Compare takes at most 4 papers."), _off(), _off()
        if self.warming():
            progress(0.05, desc=WARMUP_MESSAGE)
            self.wait_for_warmup()
        progress(0.1, desc="Comparing papers and writing the synthesis…")
        try:
            (cmp,) = list(run_with_deadline(
                lambda: [self.engine.compare(ids or None, query=None if ids else query)],
                self.settings.ui.ui_timeout, what="The comparison"))
        except Exception as e:  # noqa: BLE001 - shown in the tab, never a traceback
            return render.error_panel(error_text(e)), _off(), _off()
        return self.comparison_outputs(cmp)

    @staticmethod
    def comparison_outputs(cmp: Comparison) -> tuple:
        md = export.write_export(export.comparison_markdown(cmp), "comparison", ".md")
        csv = export.write_export(export.comparison_csv(cmp), "comparison", ".csv")
        return (render.comparison_html(cmp), gr.DownloadButton(value=md, interactive=True),
                gr.DownloadButton(value=csv, interactive=True))
