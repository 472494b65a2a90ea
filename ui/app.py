"""The Gradio app's layout and wiring (``build_app``): the Chat, Compare and
Papers tabs, their components, and which handler each event calls.

It holds no logic of its own: handlers are ``ui.session.AqaUI`` (chat,
compare) and ``ui.explorer.Explorer`` (papers); running the server is
``ui.server``. Importing it has no side effects (no environment changes).
"""

from __future__ import annotations

import gradio as gr

from rag.api import EngineAPI
from rag.config import Settings
from ui import render
from ui.explorer import SORTS
from ui.session import AqaUI
from ui.warmup import MESSAGE as WARMUP_MESSAGE
from ui.warmup import Warmup


def build_app(engine: EngineAPI, settings: Settings | None = None,
              warmup: Warmup | None = None) -> gr.Blocks:
    """The whole app for ``engine`` (a ``rag.Engine`` or a stand-in: ``rag.api.EngineAPI``);
    with ``warmup`` (``serve()``'s), a status line shows while the models load."""
    ui = AqaUI(engine, settings, warmup)
    ex = ui.explorer
    s = ui.settings
    choices = ui.paper_choices()
    sources, venues, years = ui.facet_choices()
    examples = ui.example_questions()

    # delete_cache: Gradio's copies of export files older than a day are removed.
    with gr.Blocks(title="abstracts-qa", analytics_enabled=False,
                   delete_cache=(3600, 86400)) as app:
        gr.Markdown("## abstracts-qa · grounded answers from paper abstracts")
        warm_md = gr.Markdown(WARMUP_MESSAGE, elem_id="aqa-warmup", visible=ui.warming())
        if warmup is not None:
            warm_timer = gr.Timer(0.5, active=ui.warming())
            warm_timer.tick(ui.warmup_tick, None, [warm_md, warm_timer], queue=False,
                            show_progress="hidden", api_visibility="private")
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
                            # A filter with fewer than two values changes nothing: hidden.
                            f_sources = gr.CheckboxGroup(sources, label="Sources (none = all)",
                                                         visible=len(sources) >= 2)
                            with gr.Row():
                                f_venues = gr.Dropdown(venues, multiselect=True, value=[],
                                                       label="Venues (none = all)",
                                                       visible=len(venues) >= 2)
                                f_years = gr.Dropdown(years, multiselect=True, value=[],
                                                      label="Years (none = all)",
                                                      visible=len(years) >= 2)
                            f_papers = gr.Dropdown(choices, multiselect=True, value=[],
                                                   filterable=True, elem_id="aqa-only-papers",
                                                   label="Only these papers (none = all)")
                            f_k = gr.Slider(1, 15, value=s.retrieval.top_k, step=1,
                                            label="Papers to retrieve (k)")
                        chatbot = gr.Chatbot(
                            height=520, label="Answers", elem_id="aqa-chatbot",
                            autoscroll=False,  # the page script keeps the answer's start in view
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
                            # ui.admission runs llm_concurrency answers at once and
                            # refuses, with when to retry, what would wait too long.
                            concurrency_limit=None,
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
                # Stop: ChatInterface cancels the answer; this replaces its draft.
                textbox.stop(ui.stopped, [chat.chatbot, turns],
                             [chat.chatbot, chat.chatbot_state, panel, turns, dl_md, dl_json,
                              dl_bib, result], queue=False, api_visibility="private")
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
                filters_label = ui.filters_label(sources, venues, years)
                with gr.Accordion(filters_label, open=False, elem_id="aqa-paper-filters",
                                  visible=filters_label != "Filters") as p_filters_acc:
                    p_sources = gr.CheckboxGroup(sources, label="Sources (none = all)",
                                                 elem_id="aqa-p-sources",
                                                 visible=len(sources) >= 2)
                    with gr.Row():
                        p_venues = gr.Dropdown(venues, multiselect=True, value=[],
                                               label="Venues (none = all)", elem_id="aqa-p-venues",
                                               visible=len(venues) >= 2)
                        p_years = gr.Dropdown(years, multiselect=True, value=[],
                                              label="Years (none = all)", elem_id="aqa-p-years",
                                              visible=len(years) >= 2)
                # Open to browse; a search folds it away so the results come first.
                with gr.Accordion("Topic map", open=True, elem_id="aqa-topic-acc") as topic_acc:
                    with gr.Row(equal_height=False):
                        p_map = gr.HTML(ex.topic_map_html(None), elem_id="aqa-topic-map")
                    p_topic = gr.Dropdown(ex.topic_choices(), value="", label="Topic",
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
                # A new query searches every topic (ui.explorer says why); sorting,
                # the cut-off and the facets refine the current view, topic included.
                gr.on([p_btn.click, p_query.submit], ex.new_search, explore_in,
                      [p_results, p_note, p_topic, p_map, topic_acc], api_visibility="private")
                gr.on([p_sort.change, p_min.change, p_sources.change, p_venues.change,
                       p_years.change],
                      ex.search_papers, explore_in, [p_results, p_note],
                      api_name="search_papers")
                # .input: only the reader's own picks (new_search resets it quietly).
                p_topic.input(ex.topic_view, [p_topic, *explore_in[:6], saved],
                              [p_map, p_results, p_note], api_visibility="private")
                topic_pick.change(ex.pick_topic, [topic_pick, *explore_in[:6], saved],
                                  [p_topic, p_map, p_results, p_note], api_visibility="private")
                saved_out = [saved, p_saved, s_bib, s_csv, s_md, s_note]
                save_toggle.change(ex.toggle_saved, [save_toggle, saved], saved_out,
                                  api_visibility="private")
                p_clear.click(ex.clear_saved, None, saved_out, api_visibility="private").then(
                    ex.search_papers, explore_in, [p_results, p_note], api_visibility="private")
                p_to_compare.click(ex.send_to_compare, [saved], [c_papers, tabs],
                                   api_visibility="private")
                p_to_chat.click(ex.ask_about, [saved], [f_papers, settings_acc, tabs],
                                api_visibility="private")
                f_papers.change(ui.pinned_changed, [f_papers], [chat.chatbot],
                                api_visibility="private")

        app.load(ui.refresh, None, [status_md, c_papers, f_papers, f_sources, f_venues, f_years,
                                    p_sources, p_venues, p_years, p_topic, p_map,
                                    p_filters_acc],
                 api_visibility="private")
        if warmup is not None:
            app.load(ui.warmup_tick, None, [warm_md, warm_timer], queue=False,
                     api_visibility="private")
        app.load(ex.search_papers, explore_in, [p_results, p_note], api_visibility="private")
    return app
