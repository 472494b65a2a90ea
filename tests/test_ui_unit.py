"""Fast tests of the UI's rendering, escaping, exports and event handlers,
against a duck-typed fake engine that returns real ``rag.types`` objects."""

from __future__ import annotations

import csv
import io
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag.errors import LLMError
from rag.types import (
    ASPECT_LABELS,
    ASPECTS,
    Answer,
    Citation,
    CompareCell,
    Comparison,
    CorpusStatus,
    Filters,
    Paper,
    Provenance,
    SearchHit,
    SearchResults,
    SentenceSupport,
    StreamEvent,
    Timings,
)
from ui import export, render
from ui.app import build_app
from ui.session import AqaUI, Turn, make_filters, message_text
from ui.worker import run_with_deadline

XSS_ABSTRACT = (
    "We study robust parsing. <script>alert(1)</script> Our parser handles "
    '<img src=x onerror=alert(1)> tags and [a link](javascript:alert(1)) safely.'
)


def paper(pid: str, title: str, *, derived: bool = False, authors=None, url=None,
          abstract: str = "A method for robust retrieval of passages.") -> Paper:
    return Paper(paper_id=pid, abstract=abstract, title=title, title_derived=derived,
                 authors=list(authors or []), url=url, venue="ICML", year=2025,
                 source="icml2025", provenance=[Provenance(f"icml2025/{pid}.txt", 1, 2)])


P1 = paper("p1", "ShieldAgent", authors=["Zhaorun Chen", "Bo Li"], url="https://example.org/p1",
           abstract="ShieldAgent enforces safety policy compliance for agent trajectories.")
P2 = paper("p2", "safety policies for agents", derived=True,
           abstract="We verify agent actions against extracted safety rules.")
PX = paper("px", "Robust <b>parsing</b> & more", authors=["Eve <evil>"],
           url="javascript:alert(1)", abstract=XSS_ABSTRACT)


def make_answer(declined: bool = False) -> Answer:
    hits = [SearchHit(P1, 0.9, 1), SearchHit(P2, 0.7, 2), SearchHit(PX, 0.3, 3)]
    if declined:
        return Answer("q?", "q?", "I cannot answer.", [], [], hits, True,
                      "No indexed abstract is close enough.", "none", Timings())
    sents = [
        SentenceSupport("ShieldAgent enforces safety policy compliance.", [1], 0.8, True, "p1"),
        SentenceSupport("It also cures <script>alert(2)</script> cancer.", [], 0.1, False),
    ]
    cites = [Citation(1, P1, P1.abstract, 0.8)]
    return Answer("What does ShieldAgent do?", "What does ShieldAgent do?",
                  "ShieldAgent enforces safety policy compliance. [1] It also cures cancer.",
                  sents, cites, hits, False, None, "fake-llm", Timings(10, 20, 1500))


def make_comparison() -> Comparison:
    cells = {
        "p1": {a: CompareCell(f"{a} of one", f"quote {a} <img src=x onerror=alert(1)>")
               for a in ASPECTS},
        "px": {a: CompareCell("Not stated", None) for a in ASPECTS},
    }
    cells["px"]["problem"] = CompareCell("parsing | tables", "We study robust parsing.")
    return Comparison([P1, PX], cells, "Both study robustness [1][2].",
                      [SentenceSupport("Both study robustness.", [1, 2], 0.7, True)],
                      "fake-llm", Timings(1, 2, 3000))


class FakeEngine:
    """Stand-in for rag.Engine implementing ``rag.api.EngineAPI``."""

    def __init__(self, *, fail: Exception | None = None, delay: float = 0.0) -> None:
        from rag.config import Settings

        self.settings = Settings(_env_file=None, ui_timeout=5.0)
        self.fail, self.delay = fail, delay
        self.calls: list[dict] = []
        self.closed = False

    def papers(self, query=None, *, limit=None, filters=None, min_score=None):
        if query and min_score is not None:
            return [h.paper for h in self.search(query, k=limit, filters=filters,
                                                 min_score=min_score)]
        ps = [P1, P2, PX]
        if filters is not None and filters.paper_ids:
            ps = [p for p in ps if p.paper_id in filters.paper_ids]
        if query:
            ps = [p for p in ps if query.lower() in (p.abstract + p.title).lower()]
        return ps[:limit] if limit else ps

    def search(self, query, *, k=None, filters=None, mode=None, min_score=None):
        hits = [SearchHit(p, 1.0 / i, i) for i, p in enumerate(self.papers(query, limit=k), 1)]
        kept = [h for h in hits if min_score is None or h.score >= min_score]
        return SearchResults(kept, below_min_score=len(hits) - len(kept))

    def topic_map(self):
        from rag.topics import TopicCluster, TopicMap, TopicPoint

        return TopicMap("k", "PCA + KMeans(2)",
                        [TopicPoint("p1", 0.1, 0.2, 0), TopicPoint("p2", 0.2, 0.1, 0),
                         TopicPoint("px", 0.9, 0.8, 1)],
                        [TopicCluster(0, "agents · safety", ["agents", "safety"], 2, 0.1, 0.2),
                         TopicCluster(1, "parsing <b>", ["parsing"], 1, 0.9, 0.8)])

    def status(self):
        return CorpusStatus(3, 9, {"icml2025": 3}, "all-MiniLM-L6-v2", "fake", None, "/tmp")

    def example_questions(self, n=4):
        return ["What does ShieldAgent do?"][:n]

    def ask_stream(self, question, *, history=(), k=None, filters=None) -> Iterator[StreamEvent]:
        self.calls.append({"question": question, "history": list(history), "k": k,
                           "filters": filters})
        try:
            yield StreamEvent("status", "Searching the abstracts…")
            if self.fail:
                raise self.fail
            for piece in ["ShieldAgent ", "enforces <b>", " policies [1]."]:
                time.sleep(self.delay)
                yield StreamEvent("token", piece)
            yield StreamEvent("answer", answer=make_answer())
        finally:
            self.closed = True

    def compare(self, papers=None, *, query=None, progress=None):
        self.calls.append({"papers": papers, "query": query})
        if self.fail:
            raise self.fail
        return make_comparison()

    def ask(self, question, *, history=(), k=None, filters=None):
        events = self.ask_stream(question, history=history, k=k, filters=filters)
        return [ev.answer for ev in events if ev.kind == "answer"][-1]

    def get_paper(self, ref):
        return {p.paper_id: p for p in (P1, P2, PX)}[ref]

    def ingest(self, paths=None, *, prune=False, rebuild=False, progress=True):
        from rag.types import IngestReport

        return IngestReport(papers_total=3)


# ------------------------------------------------------------------ escaping


def test_md_escape_neutralises_html_and_markdown():
    out = render.md_escape("<script>alert(1)</script> [x](javascript:y) *b* $x$")
    assert "<script" not in out and "&lt;script&gt;" in out
    assert "](" not in out  # link syntax broken up by escapes
    assert r"\*b\*" in out and r"\$x\$" in out


def test_model_bold_survives_but_html_does_not():
    md = render.md_model_text("**Problem**: <img src=x onerror=alert(1)> uses *a* [x](y)")
    assert md.startswith("**Problem**:") and "<img" not in md and " *a* " in md
    assert r"\[x\]\(y\)" in md  # no link from model text
    out = render.html_model_text("**Key <b>idea</b>** and ** stray")
    assert out == "<strong>Key &lt;b&gt;idea&lt;/b&gt;</strong> and ** stray"


def test_papers_html_shows_planted_abstract_as_text():
    out = render.papers_html([PX])
    assert "<script" not in out and "<img" not in out and "<b>parsing" not in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    assert "&lt;img src=x onerror=alert(1)&gt;" in out
    assert "Eve &lt;evil&gt;" in out
    assert "javascript:" not in out.split("aqa-abstract-text")[0]  # no javascript: link
    assert "icml2025/px.txt#1" in out  # provenance shown


def test_safe_url_only_http():
    assert render.safe_url("https://a.org/x") == "https://a.org/x"
    assert render.safe_url("javascript:alert(1)") is None
    assert render.safe_url("data:text/html,hi") is None


def test_mark_spans_marks_the_quote_not_words():
    out = render.mark_spans("First sentence here. Agents follow <safety> rules. Last one.",
                            ["Agents follow <safety> rules."])
    assert out.count("<mark") == 1
    assert '<mark class="aqa-span">Agents follow &lt;safety&gt; rules.</mark>' in out
    best = render.mark_spans("Cats sleep. Agents obey safety rules always. Dogs run.", [],
                             ["The agents obey the safety rules."])
    assert '<mark class="aqa-span">Agents obey safety rules always.</mark>' in best


def test_highlight_marks_shared_words_and_escapes():
    out = render.highlight("Safety <rules> for agents.", ["Agents follow safety rules [1]."])
    assert "<mark>Safety</mark>" in out and "<mark>agents</mark>" in out
    assert "&lt;<mark>rules</mark>&gt;" in out
    assert "<mark>for</mark>" not in out  # stop word


# -------------------------------------------------------------------- chat


def test_answer_markdown_markers_and_unsupported():
    md = render.answer_markdown(make_answer())
    assert r"[\[1\]](#aqa-cite-1)" in md  # a literal, clickable [1]
    assert "(unsupported)" in md and "⚠️" in md
    assert "<script" not in md
    # Evidence once: the chat lists the cited papers; their quotes are in the panel.
    cited = md.split("**Cited papers** (quotes in the panel):")[1]
    assert r"- [\[1\]](#aqa-cite-1) ShieldAgent · ICML 2025" in cited
    assert "“" not in md and "ShieldAgent enforces safety policy compliance for" not in md


def test_model_markdown_renders_but_stays_safe():
    md = render.md_model_text("An *actionable* `top_k <b>` setting, _really_ **bold**. "
                              "<script>x</script> ![i](http://x/i.png) # h | t ~~s~~")
    assert "*actionable*" in md and "_really_" in md and "**bold**" in md
    assert "`top_k <b>`" in md  # a code span is verbatim: Markdown shows it as text
    assert "<script" not in md and "&lt;script&gt;" in md
    assert r"\!\[i\]" in md and r"\#" in md and r"\|" in md and r"\~\~s\~\~" in md
    assert render.stream_markdown("Half *done* [1").endswith(r"\[1 ▌")


def test_withdrawn_sentence_stays_visible_struck_through():
    a = make_answer()
    a.sentences[1].withdrawn = True
    a.sentences[1].withdrawn_reason = "no abstract states it"
    md = render.answer_markdown(a)
    assert "~~It also cures" in md and "*(withdrawn: no abstract states it)*" in md


def test_links_render_without_backslashes():
    md = render.md_with_links("See https://shieldagent-aiguard.github.io/. Or *x*.")
    assert "[https://shieldagent-aiguard.github.io/](https://shieldagent-aiguard.github.io/)" in md
    assert md.endswith(r"\. Or \*x\*\.")
    hostile = render.md_with_links("[a](javascript:alert(1)) <b>x</b>")
    assert "](javascript" not in hostile and "<b>" not in hostile


def test_decline_texts_by_kind():
    from rag.types import Evidence

    a = make_answer(declined=True)
    a.decline_kind = "absent"
    assert "Nothing in the loaded collection is about this" in render.answer_markdown(a)
    a.decline_kind = "missing_detail"
    a.evidence = [Evidence(1, "p1", "ShieldAgent enforces safety policy compliance.", 0.6)]
    md = render.answer_markdown(a)
    assert "abstract does not state this" in md and "Closest sentence" in md
    assert "> ShieldAgent enforces" in md


def test_interpreted_question_shown():
    a = make_answer()
    a.question, a.standalone_question = "And the second one?", "What does MELON propose?"
    assert render.answer_markdown(a).startswith("_Interpreted as: What does MELON propose?_")


def test_rewritten_follow_up_is_shown():
    a = make_answer()
    assert "Interpreted as" not in render.answer_markdown(a)
    a.question, a.standalone_question = "And its results?", "What results does <ShieldAgent> report?"
    md = render.answer_markdown(a)
    assert md.startswith("_Interpreted as: What results does &lt;ShieldAgent&gt;")


def test_declined_answer_lists_nearest_papers():
    md = render.answer_markdown(make_answer(declined=True))
    assert "does not answer" in md
    assert "ShieldAgent" in md and "derived label" in md  # P2's label is marked
    panel = render.citations_panel(make_answer(declined=True))
    assert "Nearest papers" in panel and "<script" not in panel


def test_citations_panel_card():
    panel = render.citations_panel(make_answer())
    assert 'data-cite="1"' in panel and 'id="aqa-cite-1"' in panel
    assert "Zhaorun Chen, Bo Li" in panel
    assert 'href="https://example.org/p1"' in panel
    assert "Quote backs the claim: strong (0.80)" in panel
    assert "Answers the question: weak match" in panel  # relevance 0.0
    # The matched evidence span is marked as one span, not word by word.
    assert panel.count("<mark") == 1
    assert '<mark class="aqa-span">ShieldAgent enforces safety policy compliance' in panel
    assert "<details" in panel  # full abstract one click away
    derived = render.citation_card(Citation(2, P2, P2.abstract, 0.5), [])
    assert "(derived label)" in derived


# ----------------------------------------------------------------- compare


def test_comparison_html_table():
    cmp = make_comparison()
    out = render.comparison_html(cmp)
    head = out.split("<tbody>")[0]
    assert len(re.findall(r"<th[ >]", head)) == 1 + len(cmp.papers)  # aspect + one per paper
    for a in ASPECTS:
        assert f">{ASPECT_LABELS[a]}</th>" in out
    assert 'title="quote problem &lt;img src=x onerror=alert(1)&gt;"' in out
    assert "<img" not in out
    assert out.count('class="aqa-not-stated"') == len(ASPECTS) - 1
    assert "Synthesis" in out and out.count("aqa-abstract") >= 2


# ------------------------------------------------------------------ export


def test_conversation_exports(tmp_path: Path):
    ans = [make_answer(), make_answer(declined=True)]
    md = export.conversation_markdown(ans)
    assert "## Q1. What does ShieldAgent do?" in md
    assert "[1] ShieldAgent. Zhaorun Chen, Bo Li" in md
    assert "Unsupported sentences" in md and "**Declined:**" in md
    doc = json.loads(export.conversation_json(ans))
    assert doc["turns"][0]["citations"][0]["paper"]["paper_id"] == "p1"
    assert doc["turns"][1]["declined"] is True
    path = Path(export.write_export(md, "conversation", ".md", tmp_path))
    assert path.read_text(encoding="utf-8") == md and path.suffix == ".md"


def test_bibtex_skips_derived_and_escapes():
    bib = export.bibtex([P1, P2, paper("p3", "Cats & Dogs_50%", authors=["Ann Lee"])])
    assert bib.count("@inproceedings{") == 2
    assert "author = {Zhaorun Chen and Bo Li}" in bib
    assert r"Cats \& Dogs\_50\%" in bib
    assert "Skipped" in bib and "p2" in bib
    keys = re.findall(r"@\w+\{([^,]+),", bib)
    assert len(set(keys)) == len(keys)


def test_comparison_markdown_and_csv():
    cmp = make_comparison()
    md = export.comparison_markdown(cmp)
    assert r"parsing \| tables" in md  # pipes cannot break the table
    rows = [line for line in md.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + len(ASPECTS)
    table = list(csv.reader(io.StringIO(export.comparison_csv(cmp))))
    # One paper per row, one aspect per column; no "(quote)" rows.
    assert table[0] == ["n", "paper", "paper_id", *[ASPECT_LABELS[a] for a in ASPECTS]]
    assert len(table) == 3
    assert table[1][:3] == ["1", "ShieldAgent", "p1"] and table[1][3] == "problem of one"
    assert table[2][1:4] == ["Robust <b>parsing</b> & more", "px", "parsing | tables"]
    assert not any("(quote)" in c for r in table for c in r)


# ---------------------------------------------------------------- handlers


def _drain(gen):
    return list(gen)


def test_respond_streams_then_final_answer():
    eng = FakeEngine()
    ui = AqaUI(eng)
    outs = _drain(ui.respond("What does ShieldAgent do?", [], [], [], [], [], 5, []))
    assert outs[0][0].startswith("_Searching")
    streamed = [o[0] for o in outs if "▌" in o[0]]
    assert streamed and "&lt;b&gt;" in streamed[-1]  # partial tokens escaped too
    final = outs[-1]
    assert r"\[1\]" in final[0] and "Cited papers" in final[1]
    turns = final[2]
    assert len(turns) == 1 and turns[0].answer is not None
    assert eng.calls[0]["k"] == 5 and eng.calls[0]["filters"] is None
    md_btn = final[3]
    assert Path(md_btn.value["path"]).read_text(encoding="utf-8").startswith("# abstracts")
    result = json.loads(final[6])
    assert result["conversation"] == ["What does ShieldAgent do?"] and result["error"] is None
    assert result["answer"]["citations"][0]["paper"]["paper_id"] == "p1"


def test_a_full_house_refuses_at_once_with_when_to_retry_and_second_answers_are_cheap():
    """Issue #29, item 16: beyond the answer slots and the short wait, a
    question is refused at once, saying when to ask again; and a second
    answer updates the export buttons by value only (no component rebuilt)."""
    import gradio as gr

    eng = FakeEngine()
    ui = AqaUI(eng)
    held = [ui.admission.enter() for _ in range(ui.admission.running + ui.admission.max_waiting)]
    for h in held:
        h.__enter__()
    outs = _drain(ui.respond("What does ShieldAgent do?", [], [], [], [], [], 5, []))
    assert len(outs) == 1 and "ask again in about" in outs[0][0] and not eng.calls
    assert json.loads(outs[0][6])["error"].startswith("Busy:")
    for h in held:
        h.__exit__(None, None, None)
    first = _drain(ui.respond("What does ShieldAgent do?", [], [], [], [], [], 5, []))[-1]
    assert isinstance(first[3], gr.DownloadButton) and first[3].interactive
    history = [{"role": "user", "content": "What does ShieldAgent do?"},
               {"role": "assistant", "content": first[0]}]
    second = _drain(ui.respond("And its results?", history, [], [], [], [], 5, first[2]))[-1]
    assert isinstance(second[3], str) and Path(second[3]).is_file()  # a value update


def test_redraws_repeat_values_instead_of_rebuilding_components():
    """Issue #29, item 16: a skipped output (``gr.skip()``, a property update)
    makes Gradio build that component anew on every redraw; while an answer is
    written the panel, export buttons and result repeat their values instead,
    and the evidence panel, once shown, stays for the rest of the stream."""
    import gradio as gr

    class Evidence(FakeEngine):
        def ask_stream(self, question, *, history=(), k=None, filters=None):
            yield StreamEvent("status", "Searching the abstracts…")
            yield StreamEvent("evidence", answer=make_answer())
            for i in range(3):
                yield StreamEvent("token", f"w{i} ")
                time.sleep(0.11)
            yield StreamEvent("answer", answer=make_answer())

    ui = AqaUI(Evidence())
    first = _drain(ui.respond("What does ShieldAgent do?", [], [], [], [], [], 5, []))
    history = [{"role": "user", "content": "What does ShieldAgent do?"},
               {"role": "assistant", "content": first[-1][0]}]
    outs = _drain(ui.respond("And its results?", history, [], [], [], [], 5, first[-1][2]))
    for o in outs:
        for i in (1, 3, 4, 5, 6):  # panel, md, json, bib, result: never a property update
            assert not (isinstance(o[i], dict) or isinstance(o[i], gr.components.Component)), (i, o[i])
    # Before the evidence the panel still shows the first answer's papers; after it,
    # every redraw shows the new (preliminary) evidence.
    ev = next(n for n, o in enumerate(outs) if "Evidence found" in o[0])
    assert outs[0][1] == first[-1][1] and outs[0][6] == first[-1][6]
    assert all(o[1] == outs[ev][1] for o in outs[ev:-1]) and outs[ev][1] != first[-1][1]
    assert isinstance(outs[0][3], str) and Path(outs[0][3]).is_file()  # the first answer's export


def test_streaming_redraws_are_batched_to_ten_per_second():
    """Issue #29, item 16: each redraw is a Gradio event for the whole server;
    tokens arriving faster than 10 per second are batched, and the last batch
    is still shown before the checked answer."""

    class Fast(FakeEngine):
        def ask_stream(self, question, *, history=(), k=None, filters=None):
            yield StreamEvent("status", "Searching the abstracts…")
            for i in range(200):
                yield StreamEvent("token", f"w{i} ")
            yield StreamEvent("answer", answer=make_answer())

    outs = _drain(AqaUI(Fast()).respond("What does ShieldAgent do?", [], [], [], [], [], 5, []))
    streamed = [o[0] for o in outs if "▌" in o[0]]
    assert 1 <= len(streamed) <= 5  # not 200
    assert "w199" in streamed[-1]


def test_respond_uses_plain_history_and_filters():
    eng = FakeEngine()
    ui = AqaUI(eng)
    first = make_answer()
    history = [{"role": "user", "content": [{"type": "text", "text": "What does ShieldAgent do?"}]},
               {"role": "assistant", "content": render.answer_markdown(first)}]
    _drain(ui.respond("And its results?", history, ["icml2025"], [], [2025], ["p1"], 3,
                      [Turn("What does ShieldAgent do?", first)]))
    call = eng.calls[0]
    assert call["history"] == [{"role": "user", "content": "What does ShieldAgent do?"},
                               {"role": "assistant", "content": first.text, "papers": ["p1"]}]
    assert call["filters"] == Filters(sources=["icml2025"], years=[2025], paper_ids=["p1"])


def test_respond_llm_error_is_a_message_not_a_traceback():
    eng = FakeEngine(fail=LLMError("The LLM at http://x did not answer within 60 s"))
    ui = AqaUI(eng)
    final = _drain(ui.respond("q?", [], None, None, None, None, 5, []))[-1]
    assert "Could not answer" in final[0] and "did not answer within 60 s" in final[0]
    assert "Traceback" not in final[0] and "aqa-error" in final[1]
    assert final[2][0].answer is None  # failed turn kept out of the follow-up history
    assert "did not answer" in json.loads(final[6])["error"]
    assert eng.closed


def test_respond_times_out_and_stops_the_engine():
    eng = FakeEngine(delay=1.0)
    eng.settings.ui.ui_timeout = 0.3
    ui = AqaUI(eng)
    t0 = time.monotonic()
    final = _drain(ui.respond("q?", [], None, None, None, None, 5, []))[-1]
    assert time.monotonic() - t0 < 2.0
    assert r"AQA\_UI\_TIMEOUT" in final[0]
    deadline = time.monotonic() + 3
    while not eng.closed and time.monotonic() < deadline:
        time.sleep(0.05)
    assert eng.closed  # the worker closed the engine generator (frees the LLM)


def test_run_with_deadline_reraises():
    def boom():
        yield 1
        raise ValueError("x")

    with pytest.raises(ValueError):
        list(run_with_deadline(boom, 5))


def test_typed_history_skips_failed_and_stopped_turns():
    from ui.session import aligned_turns, engine_history

    first = make_answer()
    turns = [Turn("q1", first, "shown"), Turn("q2", None, "failed"),
             Turn("q3", None, render.STOPPED_MARKDOWN, stopped=True)]
    assert engine_history(turns) == [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": first.text, "papers": ["p1"]}]
    # Undo/retry/edit: only the turns that still match the chat's questions.
    assert aligned_turns(turns, ["q1", "q2 edited", "q3"]) == turns[:1]
    assert aligned_turns(turns, ["q1"]) == turns[:1]


def test_stop_replaces_the_draft_with_a_marker():
    ui = AqaUI(FakeEngine())
    draft = [{"role": "user", "content": "q1"},
             {"role": "assistant", "content": render.stream_markdown("Half a sen")}]
    chat, state, panel, turns, md_btn, *_rest, result = ui.stopped(draft, [])
    assert chat == state and chat[-1]["content"] == render.STOPPED_MARKDOWN
    assert "▌" not in json.dumps(chat) and "Half a sen" not in json.dumps(chat)
    assert "Stopped" in panel and "being written" not in panel
    assert turns == [Turn("q1", None, render.STOPPED_MARKDOWN, stopped=True)]
    assert not md_btn.interactive and json.loads(result)["answer"] is None
    # A follow-up never sees the stopped draft.
    eng = ui.engine
    _drain(ui.respond("q2", chat, None, None, None, None, 5, turns))
    assert eng.calls[-1]["history"] == []
    # Stop after the answer finished: nothing changes.
    done = [*draft[:1], {"role": "assistant", "content": "answer"}]
    import gradio as gr

    assert ui.stopped(done, [Turn("q1", make_answer())]) == (gr.skip(),) * 8


def test_new_chat_clears_everything():
    out = AqaUI(FakeEngine()).new_chat()
    assert out[0] == [] and out[1] == [] and out[2] == []
    assert "appear here" in out[3]


def test_compare_handler_validates_and_exports():
    eng = FakeEngine()
    ui = AqaUI(eng)
    assert "Pick 2 to 4" in ui.compare(["p1"], "")[0]
    assert "at most 4" in ui.compare(["a", "b", "c", "d", "e"], "")[0]
    html_out, md_btn, csv_btn = ui.compare(["p1", "px"], "")
    assert "<table>" in html_out and eng.calls[-1] == {"papers": ["p1", "px"], "query": None}
    assert Path(csv_btn.value["path"]).suffix == ".csv"
    assert Path(md_btn.value["path"]).suffix == ".md"
    ui.compare([], "agent safety")
    assert eng.calls[-1] == {"papers": None, "query": "agent safety"}
    eng.fail = LLMError("endpoint down")
    assert "endpoint down" in ui.compare(["p1", "px"], "")[0]


def test_search_papers_handler():
    ui = AqaUI(FakeEngine())
    html_out, note = ui.explorer.search_papers("parsing", min_score=0.0)
    assert "&lt;script&gt;" in html_out and "<script" not in html_out
    assert html_out.count('class="aqa-card aqa-result') == 1 and "1 papers match" in note
    assert "match 1.00" in html_out and "<mark>parsing</mark>" in html_out.split("aqa-snippet")[1]
    html_all, note_all = ui.explorer.search_papers("")
    assert html_all.count('class="aqa-card aqa-result') == 3 and note_all.startswith("3 papers")
    assert "topic: agents · safety" in html_all


def test_explorer_cutoff_sort_topic_and_saved():
    ui = AqaUI(FakeEngine())
    # Scores are 1/rank here: a 0.6 cut-off keeps only the best.
    eng_hits = ui.explorer.search_papers("a", min_score=0.6)
    assert eng_hits[0].count('class="aqa-card aqa-result') == 1 and "weaker matches hidden" in eng_hits[1]
    by_title, _ = ui.explorer.search_papers("", sort="Title A–Z")
    order = re.findall(r'data-paper="(\w+)"', by_title)
    assert order == ["px", "p2", "p1"]  # "Robust…", "safety…", "ShieldAgent" (case-folded)
    in_topic, note = ui.explorer.search_papers("", topic="0")
    assert re.findall(r'data-paper="(\w+)"', in_topic) == ["p1", "p2"] and "in topic" in note
    mp, res, _ = ui.explorer.topic_view("1", "", "Relevance", 0.35, [], [], [], [])
    assert 'class="aqa-cluster is-selected" data-cluster="1"' in mp and "px" in res
    assert "parsing &lt;b&gt;" in mp and "<b>" not in mp
    saved, html_saved, bib, csv_btn, md_btn, note = ui.explorer.toggle_saved("p1|123", [])
    assert saved == ["p1"] and "ShieldAgent" in html_saved and bib.interactive
    rows = list(csv.DictReader(io.StringIO(Path(csv_btn.value["path"]).read_text())))
    assert [r["paper_id"] for r in rows] == ["p1"]
    saved, *_rest, note = ui.explorer.toggle_saved("p2|124", saved)
    assert saved == ["p1", "p2"] and "BibTeX needs real titles" in note
    assert ui.explorer.toggle_saved("p1|125", saved)[0] == ["p2"]
    assert ui.explorer.clear_saved()[0] == []
    starred, _ = ui.explorer.search_papers("", saved=["px"])
    assert starred.count("★ Saved") == 1


def test_examples_adapt_to_pinned_papers():
    ui = AqaUI(FakeEngine())
    assert ui.examples_for([]) == ["What does ShieldAgent do?"]
    assert ui.examples_for(["p1"])[0] == "Summarize this paper."
    assert ui.examples_for(["p1", "p2"])[1] == "How do these papers differ?"


def test_engine_and_fakes_implement_the_engine_api():
    """``rag.api.EngineAPI`` is what the UI codes against: the real Engine and
    the UI's stand-ins have each of its methods, with the same parameters
    (names and kinds), so a fake cannot drift from the engine."""
    import inspect

    from rag.api import EngineAPI, api_methods
    from rag.engine import Engine
    from tests.conftest_ui import FakeEngine as E2EFake

    def params(fn) -> list[tuple[str, object]]:
        return [(p.name, p.kind) for p in inspect.signature(fn).parameters.values()]

    names = api_methods()
    assert {"ingest", "search", "ask", "ask_stream", "compare", "papers", "get_paper",
            "status", "example_questions", "topic_map"} <= set(names)
    for impl in (Engine, FakeEngine, E2EFake):
        for name in names:
            assert params(getattr(impl, name)) == params(getattr(EngineAPI, name)), (impl, name)
    for fake in (FakeEngine(), E2EFake([P1, P2])):
        assert isinstance(fake, EngineAPI)
    # What the UI calls on its engine is in the protocol.
    import ui

    code = "".join(p.read_text() for p in Path(ui.__file__).parent.rglob("*.py"))
    used = set(re.findall(r"\bengine\.(\w+)", code))
    assert used <= set(names) | {"settings"}, used - set(names)


def test_helpers():
    assert make_filters([], [], [], []) is None
    assert make_filters(None, ["ICML"], ["2025"], None) == Filters(venues=["ICML"], years=[2025])
    assert message_text([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]) == "a b"


def test_build_app_exposes_chat_api():
    app = build_app(FakeEngine())
    names = {fn.api_name for fn in app.fns.values()}
    assert {"chat", "compare", "search_papers"} <= names


def test_launch_binds_localhost_with_optional_auth():
    """The real launch path (fake engine): auth from settings guards the app."""
    import httpx
    from gradio_client import Client

    from tests.conftest_ui import free_port
    from ui.server import launch

    eng = FakeEngine()
    port = free_port()
    s = eng.settings.updated(auth_user="ann", auth_password="s3cret")
    assert s.ui.host == "127.0.0.1"
    app = build_app(eng, s)
    assert app.analytics_enabled is False
    launch(app, s, port=port, block=False)
    try:
        url = f"http://127.0.0.1:{port}/"
        assert httpx.get(url + "config", timeout=10).status_code == 401
        c = Client(url, auth=("ann", "s3cret"), verbose=False)
        html_out, note = c.predict("parsing", "Relevance", 0.0, [], [], [], "", [],
                                   api_name="/search_papers")
        assert "1 papers match" in note and "&lt;script&gt;" in html_out
    finally:
        app.close()


def test_importing_the_ui_changes_no_environment_variable():
    """``import ui.app`` (and ui.server) has no side effects: the offline
    environment is set by the entry points (``aqa``, ``serve()``), not at import."""
    import os
    import subprocess
    import sys

    code = ("import json, os\nbefore = dict(os.environ)\n"
            "import ui, ui.app, ui.server\n"
            "print(json.dumps({k: [before.get(k), os.environ.get(k)] "
            "for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k)}))")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "TRANSFORMERS_", "GRADIO_", "TIKTOKEN_", "CHROMA_"))
           and k not in ("ANONYMIZED_TELEMETRY", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY",
                         "TOKENIZERS_PARALLELISM")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=Path(__file__).resolve().parent.parent, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {}


# ------------------------------------------- issue 29: Papers tab, warm-up


def test_new_search_clears_the_topic_and_folds_the_map():
    import gradio as gr

    ex = AqaUI(FakeEngine()).explorer
    # A topic narrows the current view, query included; an empty topic view says
    # how to look in all topics.
    _, note = ex.search_papers("parsing", "Relevance", 0.0, [], [], [], "0", [])
    assert "1 papers match" in note and "in topic" in note and "Search again" not in note
    real = ex.engine.search
    ex.engine.search = lambda q, **kw: SearchResults([])
    _, note = ex.search_papers("parsing", "Relevance", 0.0, [], [], [], "0", [])
    assert note.startswith("0 papers match") and "in topic" in note
    assert "Search again (Enter) to look in all topics" in note
    ex.engine.search = real
    # A new search looks in every topic: the dropdown and the map are reset.
    res, note, topic, mp, acc = ex.new_search("parsing", "Relevance", 0.0, [], [], [], "0", [])
    assert "1 papers match" in note and "in topic" not in note and "px" in res
    assert topic.value == "" and "is-selected" not in mp
    assert acc.open is False  # the results come first
    # No topic set: nothing to reset; an empty query lists all and opens the map.
    _, note, topic, mp, acc = ex.new_search("", "Relevance", 0.0, [], [], [], "", [])
    assert note.startswith("3 papers") and acc.open is True
    assert topic == gr.skip() and mp == gr.skip()


def test_pick_topic_selects_and_lists_it():
    import gradio as gr

    ex = AqaUI(FakeEngine()).explorer
    drop, mp, res, note = ex.pick_topic("1|99", "", "Relevance", 0.35, [], [], [], [])
    assert drop.value == "1" and "in topic" in note and "px" in res
    assert 'class="aqa-cluster is-selected" data-cluster="1"' in mp
    assert ex.pick_topic("junk", "", "Relevance", 0.35, [], [], [], []) == (gr.skip(),) * 4


def test_topic_map_lists_topics_as_chips():
    svg = render.topic_map_svg(FakeEngine().topic_map(), {}, selected=0)
    chips = re.findall(r'<button type="button" class="aqa-chip([^"]*)" data-cluster="(\d)"', svg)
    assert chips == [(" is-selected", "0"), ("", "1")]
    assert "parsing &lt;b&gt; (1)</button>" in svg
    css = render.CSS
    narrow = css.split("@media (max-width:700px){", 1)[1]
    assert ".aqa-map .aqa-cluster{display:none}" in narrow and ".aqa-topic-chips{display:flex}" in narrow


def test_filters_with_one_value_are_hidden():
    ui = AqaUI(FakeEngine())  # one source, one venue, one year
    assert ui.filters_label(["icml2025"], ["ICML"], [2025]) == "Filters"
    assert ui.filters_label(["a", "b"], ["ICML"], [2024, 2025]) == "Filters: source, year"
    out = ui.refresh()
    p_sources, p_venues, p_years, acc = out[6], out[7], out[8], out[11]
    assert (p_sources.visible, p_venues.visible, p_years.visible) == (False, False, False)
    assert acc.visible is False
    app = build_app(FakeEngine())
    hidden = {b.elem_id for b in app.blocks.values()
              if getattr(b, "elem_id", None) and getattr(b, "visible", True) is False}
    assert {"aqa-p-sources", "aqa-p-venues", "aqa-p-years", "aqa-paper-filters"} <= hidden


class WarmingEngine(FakeEngine):
    """A fake engine whose ``warm`` takes a while, as loading the models does."""

    def __init__(self, hold: float = 0.0, fail: Exception | None = None) -> None:
        super().__init__()
        self.warm_calls: list[str] = []
        self.hold, self.warm_fail = hold, fail

    def warm(self, llm: bool = True) -> None:
        import threading
        import time

        self.warm_calls.append(threading.current_thread().name)
        time.sleep(self.hold)
        if self.warm_fail:
            raise self.warm_fail


def test_serve_warms_the_engine_in_a_background_thread(monkeypatch):
    import threading

    from ui import server

    launched: list[object] = []
    monkeypatch.setattr(server, "setup_offline_env", lambda: None)
    def fake_launch(app, settings, **kw) -> None:
        app.server_port = 0
        launched.append(app)

    monkeypatch.setattr(server, "launch", fake_launch)
    monkeypatch.setattr(server, "shutdown", lambda app: None)
    eng = WarmingEngine(hold=0.3)
    stop = threading.Event()
    searched: list[str] = []
    real_search = eng.search
    eng.search = lambda q, **kw: searched.append(q) or real_search(q, **kw)
    codes: list[int] = []
    runner = threading.Thread(target=lambda: codes.append(server.serve(engine=eng, stop=stop)))
    runner.start()
    try:
        for _ in range(100):
            if searched:
                break
            threading.Event().wait(0.05)
    finally:
        stop.set()
        runner.join(10)
    assert launched and eng.warm_calls == ["aqa-warmup"]  # after launch, off the main path
    assert searched == ["warm up"] and codes == [0]


def test_warmup_status_and_a_question_waits_for_it():
    import threading

    from ui.warmup import MESSAGE, Warmup

    w = Warmup()
    ui = AqaUI(WarmingEngine(hold=0.4), warmup=w)
    md, timer = ui.warmup_tick()
    assert md.visible is True and timer.active is True
    w.start(ui.engine)
    got: list[str] = []
    t = threading.Thread(target=lambda: got.extend(
        str(out[0]) for out in ui.respond("What does ShieldAgent do?", [], [], [], [], [], 5,
                                          [])))
    t.start()
    t.join(10)
    assert got[0] == f"_{render.md_escape(MESSAGE)}_"  # it said why it waits
    assert ui.engine.calls and not w.pending  # asked once the models were loaded
    md, timer = ui.warmup_tick()
    assert md.visible is False and timer.active is False
    # A failing warm-up never blocks: it is logged and the line goes away.
    w2 = Warmup()
    w2.run(WarmingEngine(fail=RuntimeError("no model")))
    assert not w2.pending and w2.error == "no model"
