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
    SentenceSupport,
    StreamEvent,
    Timings,
)
from ui import export, render
from ui.app import AqaUI, Turn, build_app, make_filters, message_text, run_with_deadline

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
    """Duck-typed stand-in for rag.Engine."""

    def __init__(self, *, fail: Exception | None = None, delay: float = 0.0) -> None:
        from rag.config import Settings

        self.settings = Settings(_env_file=None, ui_timeout=5.0)
        self.fail, self.delay = fail, delay
        self.calls: list[dict] = []
        self.closed = False

    def papers(self, query=None, *, limit=None, filters=None):
        ps = [P1, P2, PX]
        if query:
            ps = [p for p in ps if query.lower() in (p.abstract + p.title).lower()]
        return ps[:limit] if limit else ps

    def search(self, query, *, k=None, filters=None):
        return [SearchHit(p, 1.0 / i, i) for i, p in enumerate(self.papers(query, limit=k), 1)]

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

    def compare(self, papers=None, *, query=None):
        self.calls.append({"papers": papers, "query": query})
        if self.fail:
            raise self.fail
        return make_comparison()


# ------------------------------------------------------------------ escaping


def test_md_escape_neutralises_html_and_markdown():
    out = render.md_escape("<script>alert(1)</script> [x](javascript:y) *b* $x$")
    assert "<script" not in out and "&lt;script&gt;" in out
    assert "](" not in out  # link syntax broken up by escapes
    assert r"\*b\*" in out and r"\$x\$" in out


def test_model_bold_survives_but_html_does_not():
    md = render.md_model_text("**Problem**: <img src=x onerror=alert(1)> uses *a* [x](y)")
    assert md.startswith("**Problem**:") and "<img" not in md and r"\*a\*" in md
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


def test_highlight_marks_shared_words_and_escapes():
    out = render.highlight("Safety <rules> for agents.", ["Agents follow safety rules [1]."])
    assert "<mark>Safety</mark>" in out and "<mark>agents</mark>" in out
    assert "&lt;<mark>rules</mark>&gt;" in out
    assert "<mark>for</mark>" not in out  # stop word


# -------------------------------------------------------------------- chat


def test_answer_markdown_markers_and_unsupported():
    md = render.answer_markdown(make_answer())
    assert r"\[1\]" in md  # rendered as a literal [1]
    assert "(unsupported)" in md and "⚠️" in md
    assert "<script" not in md
    assert "ShieldAgent" in md.split("**Sources:**")[1]


def test_rewritten_follow_up_is_shown():
    a = make_answer()
    assert "understood as" not in render.answer_markdown(a)
    a.question, a.standalone_question = "And its results?", "What results does <ShieldAgent> report?"
    md = render.answer_markdown(a)
    assert md.startswith("_Follow-up understood as: What results does &lt;ShieldAgent&gt;")


def test_declined_answer_lists_nearest_papers():
    md = render.answer_markdown(make_answer(declined=True))
    assert "does not cover" in md
    assert "ShieldAgent" in md and "derived label" in md  # P2's label is marked
    panel = render.citations_panel(make_answer(declined=True))
    assert "Nearest papers" in panel and "<script" not in panel


def test_citations_panel_card():
    panel = render.citations_panel(make_answer())
    assert 'data-cite="1"' in panel
    assert "Zhaorun Chen, Bo Li" in panel
    assert 'href="https://example.org/p1"' in panel
    assert "support score 0.80" in panel
    assert "<mark>ShieldAgent</mark>" in panel and "<mark>compliance</mark>" in panel
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
    assert table[0] == ["aspect", "ShieldAgent", "Robust <b>parsing</b> & more"]
    assert table[1] == ["paper_id", "p1", "px"]
    assert ["Problem", "problem of one", "parsing | tables"] in table
    assert table[-1][0] == "synthesis"


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
                               {"role": "assistant", "content": first.text}]
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
    eng.settings.ui_timeout = 0.3
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
    html_out, select, note = ui.search_papers("parsing")
    assert "&lt;script&gt;" in html_out and "<script" not in html_out
    assert [c[1] for c in select.choices] == ["px"] and "1 best matches" in note
    assert "score 1.00" in html_out
    html_all, select_all, note_all = ui.search_papers("")
    assert len(select_all.choices) == 3 and note_all.startswith("3 papers")


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
    from ui.app import launch

    eng = FakeEngine()
    port = free_port()
    s = eng.settings.model_copy(update={"auth_user": "ann", "auth_password": "s3cret"})
    assert s.host == "127.0.0.1"
    app = build_app(eng, s)
    assert app.analytics_enabled is False
    launch(app, s, port=port, block=False)
    try:
        url = f"http://127.0.0.1:{port}/"
        assert httpx.get(url + "config", timeout=10).status_code == 401
        c = Client(url, auth=("ann", "s3cret"), verbose=False)
        html_out, _select, note = c.predict("parsing", api_name="/search_papers")
        assert "1 best matches" in note and "&lt;script&gt;" in html_out
    finally:
        app.close()
