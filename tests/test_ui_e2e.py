"""End-to-end tests of the Gradio app in real headless Chromium, against the
real engine (MiniLM + the small local smollm2 model) over the bundled corpus
plus a planted abstract that carries ``<script>`` and ``<img onerror>``.

One app and one browser per module; screenshots go to tests/artifacts/. With
AQA_UI_README_SHOTS=1 the chat and compare ones are also copied to
docs/screenshots/ for the README (best taken with AQA_UI_TEST_MODEL=qwen2.5-1.5b).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
from pathlib import Path
from urllib.parse import urlparse

import pytest

from rag.types import ASPECT_LABELS, ASPECTS
from tests.conftest_ui import (
    ARTIFACTS,
    PLANTED_IMG,
    PLANTED_QUESTION,
    PLANTED_SCRIPT,
    PLANTED_TITLE,
    SCREENSHOTS,
    FakeEngine,
    chromium,
    running_app,
    running_fake_app,
    synthetic_papers,
)

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.timeout(600)]

LLM_WAIT_MS = 240_000


@pytest.fixture(scope="module")
def server(real_index_dir, tmp_path_factory):
    with running_app(tmp_path_factory.mktemp("ui_e2e"), real_index_dir) as srv:
        yield srv


@pytest.fixture(scope="module")
def browser():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with chromium() as b:
        yield b


def open_app(browser, server):
    page = browser.context.new_page()
    page.goto(server.url)
    page.wait_for_selector("#aqa-question textarea", timeout=60_000)
    return page


def shot(page, name: str, readme: bool = False, full_page: bool | None = None) -> Path:
    path = ARTIFACTS / f"{name}.png"
    # README: one screen, unless the view (a comparison and its synthesis) is taller
    page.screenshot(path=str(path), full_page=(not readme) if full_page is None else full_page)
    if readme and os.environ.get("AQA_UI_README_SHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, SCREENSHOTS / f"{name}.png")
    return path


def ask(page, question: str, n_bot: int) -> str:
    """Submit ``question``; wait until the n-th assistant message is final
    (the textbox is enabled again). Returns the chat's text."""
    box = page.locator("#aqa-question textarea")
    box.fill(question)
    box.press("Enter")
    page.wait_for_function(
        """n => document.querySelectorAll('#aqa-chatbot [data-testid=bot]').length >= n
              && !document.querySelector('#aqa-question textarea').disabled""",
        arg=n_bot, timeout=LLM_WAIT_MS,
    )
    return page.locator("#aqa-chatbot").inner_text()


def download(page, selector: str) -> str:
    with page.expect_download(timeout=30_000) as dl:
        page.locator(selector).click()
    return Path(dl.value.path()).read_text(encoding="utf-8")


def pick(page, dropdown: str, text: str) -> None:
    """Type into a Gradio multiselect dropdown and click the first match."""
    inp = page.locator(f"{dropdown} input")
    inp.click()
    inp.fill(text)
    page.locator("ul[role=listbox] li", has_text=text).first.click()
    # Close the option list (a click outside) so it does not cover the buttons.
    page.get_by_text("Pick 2–4 papers").click()
    page.locator("ul[role=listbox]").wait_for(state="detached")


def test_chat_streams_cited_answer_follow_up_export_and_new_chat(server, browser):
    page = open_app(browser, server)
    q1, q2 = "What does ShieldAgent propose?", "Which benchmark does it introduce?"
    box = page.locator("#aqa-question textarea")
    box.fill(q1)
    box.press("Enter")
    # Streaming: a partial answer with the typing cursor shows before the end.
    page.wait_for_function(
        "document.querySelector('#aqa-chatbot').innerText.includes('▌')",
        timeout=LLM_WAIT_MS, polling=50,
    )
    page.wait_for_function("!document.querySelector('#aqa-question textarea').disabled",
                           timeout=LLM_WAIT_MS)
    text = page.locator("#aqa-chatbot").inner_text()
    assert "▌" not in text
    assert re.search(r"\[\d\]", text), text  # inline citation markers
    assert "Cited papers (quotes in the panel)" in text  # the quotes live in the panel only
    cards = page.locator("#aqa-citations [data-cite]")
    assert cards.count() >= 1
    first = cards.first
    assert "Answers the question:" in first.inner_text()  # relevance, in words
    assert first.locator("mark").count() >= 1  # cited words highlighted in the passage

    shot(page, "chat", readme=True)

    # Open a cited paper: its full abstract and provenance are one click away.
    first.locator("details summary").click()
    abstract = first.locator(".aqa-abstract-text")
    abstract.wait_for(state="visible")
    assert len(abstract.inner_text()) > 200
    assert "provenance" in first.locator(".aqa-meta").inner_text()
    shot(page, "chat-open-paper")

    text = ask(page, q2, n_bot=2)
    assert q2 in text and q1 in text

    md = download(page, "#aqa-export-md")
    assert f"## Q1. {q1}" in md and f"## Q2. {q2}" in md
    doc = json.loads(download(page, "#aqa-export-json"))
    assert [t["question"] for t in doc["turns"]] == [q1, q2]
    assert doc["turns"][0]["citations"], "first answer should cite papers"

    page.locator("#aqa-new-chat").click()
    page.wait_for_function(
        "document.querySelectorAll('#aqa-chatbot [data-testid=bot]').length === 0")
    assert "appear here" in page.locator("#aqa-citations").inner_text()
    assert page.locator("#aqa-export-md").is_disabled()

    # Example questions come from the corpus; clicking one asks it.
    example = page.locator("#aqa-chatbot button.example").first
    example_text = example.inner_text().strip()
    assert example_text
    example.click()
    page.wait_for_function(
        """() => document.querySelectorAll('#aqa-chatbot [data-testid=bot]').length >= 1
              && !document.querySelector('#aqa-question textarea').disabled
              && !document.querySelector('#aqa-chatbot').innerText.includes('▌')""",
        timeout=LLM_WAIT_MS,
    )
    text = page.locator("#aqa-chatbot").inner_text()
    assert example_text in text and q1 not in text  # the new chat starts empty
    doc = json.loads(download(page, "#aqa-export-json"))
    assert [t["question"] for t in doc["turns"]] == [example_text]
    page.close()


def test_planted_abstract_renders_as_text_and_ask_about_it(server, browser):
    page = open_app(browser, server)
    page.get_by_role("tab", name="Papers").click()
    status = page.locator("#aqa-status").inner_text()
    assert "58 papers" in status and "planted (1)" in status and "all-MiniLM-L6-v2" in status

    query = page.locator("#aqa-paper-query textarea")
    query.fill("escaping failures across web renderers")
    query.press("Enter")
    results = page.locator("#aqa-paper-results")
    page.wait_for_function(
        "document.querySelector('#aqa-paper-note').innerText.includes('papers match')",
        timeout=60_000,
    )
    card = results.locator(".aqa-card").first  # hybrid search ranks it first
    assert PLANTED_TITLE in card.inner_text()  # the title's <b> shows as text too
    card.locator("details summary").click()
    shown = card.locator(".aqa-abstract-text")
    shown.wait_for(state="visible")
    assert PLANTED_SCRIPT in shown.inner_text() and PLANTED_IMG in shown.inner_text()
    assert results.locator("script, img").count() == 0
    assert card.locator(".aqa-card-head b").count() == 0  # the title's <b> is text
    assert "planted/planted.jsonl#1" in card.inner_text()  # provenance
    shot(page, "papers")

    # Save it on its card and ask about it: the chat is restricted to that paper,
    # and the example questions turn to it.
    card.locator("[data-save]").click()
    page.locator("#aqa-saved li", has_text="Robust HTML").wait_for(timeout=10_000)
    page.locator("#aqa-to-chat").click()
    page.locator("#aqa-question textarea").wait_for(state="visible")
    assert "Robust HTML" in page.locator("#aqa-only-papers").inner_text()
    page.locator("#aqa-chatbot button.example", has_text="Summarize this paper").wait_for(
        timeout=10_000)
    ask(page, PLANTED_QUESTION, n_bot=1)
    panel = page.locator("#aqa-citations")
    cited = panel.locator("[data-cite]").first
    cited.wait_for(state="visible")
    assert PLANTED_TITLE in cited.inner_text()
    assert "Mallory Example, Trent Tester" in cited.inner_text()
    assert cited.locator("a[href='https://example.org/planted']").count() == 1
    cited.locator("details summary").click()
    assert PLANTED_IMG in cited.locator(".aqa-abstract-text").inner_text()
    assert panel.locator("script, img").count() == 0
    assert page.locator("#aqa-chatbot img, #aqa-chatbot script").count() == 0

    bib = download(page, "#aqa-export-bib")
    assert "author = {Mallory Example and Trent Tester}" in bib
    assert "url = {https://example.org/planted}" in bib
    shot(page, "chat-planted")
    assert not browser.dialogs, f"injected script ran: {browser.dialogs}"
    assert page.evaluate("document.querySelectorAll('img[src=\"x\"]').length") == 0
    page.close()


def test_compare_table_quotes_abstracts_and_export(server, browser):
    page = open_app(browser, server)
    page.get_by_role("tab", name="Compare").click()
    pick(page, "#aqa-compare-papers", "ShieldAgent")
    pick(page, "#aqa-compare-papers", "MELON")
    page.locator("#aqa-compare-btn").click()
    table = page.locator("#aqa-compare-out table")
    table.wait_for(state="visible", timeout=LLM_WAIT_MS)

    heads = table.locator("thead th")
    assert heads.count() == 3  # aspect column + one column per paper
    assert "ShieldAgent" in heads.nth(1).inner_text() and "MELON" in heads.nth(2).inner_text()
    rows = table.locator("tbody tr")
    assert [rows.nth(i).locator("th").inner_text() for i in range(rows.count())] == [
        *(ASPECT_LABELS[a] for a in ASPECTS), "Abstract"]
    quoted = table.locator("td[title]")
    assert quoted.count() >= 2  # supporting quote on hover...
    quoted.first.locator("details summary").click()  # ...and on click
    quote = quoted.first.locator("q")
    quote.wait_for(state="visible")
    assert quote.inner_text() == quoted.first.get_attribute("title")
    assert "Synthesis" in page.locator("#aqa-compare-out").inner_text()
    shot(page, "compare", readme=True, full_page=True)  # the synthesis under the table
    abstract_cell = rows.nth(rows.count() - 1).locator("td").first
    abstract_cell.locator("summary").click()
    assert len(abstract_cell.locator(".aqa-abstract-text").inner_text()) > 200
    shot(page, "compare-open-abstract")

    table_csv = list(csv.reader(io.StringIO(download(page, "#aqa-compare-csv"))))
    # One paper per row, one aspect per column, no "(quote)" rows.
    assert table_csv[0][-len(ASPECTS):] == [ASPECT_LABELS[a] for a in ASPECTS]
    assert len(table_csv) == 3 and "ShieldAgent" in ",".join(table_csv[1])
    assert not any("(quote)" in c for r in table_csv for c in r)
    md = download(page, "#aqa-compare-md")
    assert "| Aspect | [1] ShieldAgent" in md
    page.close()


def test_search_select_and_send_to_compare(server, browser):
    page = open_app(browser, server)
    page.get_by_role("tab", name="Papers").click()
    query = page.locator("#aqa-paper-query textarea")
    query.fill("prompt injection attacks on web agents")
    query.press("Enter")
    page.wait_for_function(
        "document.querySelector('#aqa-paper-note').innerText.includes('papers match')",
        timeout=60_000,
    )
    text = page.locator("#aqa-paper-results").inner_text()
    assert "MELON" in text or "AdvAgent" in text or "ShieldAgent" in text
    cards = page.locator("#aqa-paper-results .aqa-result")
    chosen = [cards.nth(i).locator(".aqa-card-head a, .aqa-card-head").first.inner_text()
              for i in range(2)]
    for i in range(2):
        cards.nth(i).locator("[data-save]").click()
        page.wait_for_function(
            "n => document.querySelectorAll('#aqa-saved li').length === n", arg=i + 1,
            timeout=10_000)
    assert cards.nth(0).locator("[data-save]").inner_text() == "★ Saved"
    page.locator("#aqa-to-compare").click()
    page.locator("#aqa-compare-btn").wait_for(state="visible")
    picked = page.locator("#aqa-compare-papers").inner_text()
    for c in chosen:
        title = c.replace("★ Saved", "").replace("☆ Save", "").replace("(derived label)", "").strip()
        assert title[:20] in picked, (title, picked)
    page.close()


def test_explorer_cutoff_sort_filters_and_saved_exports(server, browser):
    page = open_app(browser, server)
    page.get_by_role("tab", name="Papers").click()
    query = page.locator("#aqa-paper-query textarea")
    query.fill("diffusion models")
    query.press("Enter")
    note = page.locator("#aqa-paper-note")
    page.wait_for_function(
        "document.querySelector('#aqa-paper-note').innerText.includes('match “diffusion')",
        timeout=60_000)
    results = page.locator("#aqa-paper-results .aqa-result")
    n_cut = results.count()
    scores = [float(re.search(r"match (\d\.\d\d)", results.nth(i).inner_text()).group(1))
              for i in range(n_cut)]
    assert n_cut >= 1 and min(scores) >= 0.35, scores  # the cut-off holds
    assert "weaker matches hidden" in note.inner_text()
    # Matched words are marked in the best-matching snippet.
    assert results.first.locator(".aqa-snippet mark").count() >= 1
    # Lowering the cut-off lists the weak matches too.
    slider = page.locator("#aqa-min-score input[type=number]")
    slider.fill("0")
    slider.press("Enter")
    page.wait_for_function(
        "n => document.querySelectorAll('#aqa-paper-results .aqa-result').length > n",
        arg=n_cut, timeout=30_000)
    # Sort by title.
    page.locator("#aqa-sort input").click()
    page.locator("ul[role=listbox] li", has_text="Title A–Z").click()
    page.wait_for_timeout(1500)
    heads = [results.nth(i).locator(".aqa-card-head").inner_text().replace("☆ Save", "")
             .replace("★ Saved", "").strip().lower() for i in range(results.count())]
    assert heads == sorted(heads), heads
    # Filter by source (no query): only the planted paper.
    query.fill("")
    query.press("Enter")
    page.wait_for_function(
        "document.querySelector('#aqa-paper-note').innerText.startsWith('58 papers')",
        timeout=30_000)
    page.locator("#aqa-paper-filters").get_by_text("Filters").click()
    page.locator("#aqa-p-sources label", has_text="planted").click()
    page.wait_for_function(
        "document.querySelectorAll('#aqa-paper-results .aqa-result').length === 1",
        timeout=30_000)
    assert "Robust HTML" in results.first.inner_text()
    shot(page, "explorer", readme=True)
    # Save it, plus one bundled paper; export the saved list three ways.
    results.first.locator("[data-save]").click()
    page.locator("#aqa-p-sources label", has_text="planted").click()  # filter off
    page.wait_for_function(
        "document.querySelectorAll('#aqa-paper-results .aqa-result').length > 1",
        timeout=30_000)
    other = results.filter(has_not_text="Robust HTML").first
    other.locator("[data-save]").click()
    page.wait_for_function("document.querySelectorAll('#aqa-saved li').length === 2",
                           timeout=10_000)
    rows = list(csv.DictReader(io.StringIO(download(page, "#aqa-saved-csv"))))
    assert len(rows) == 2 and rows[0]["title"].startswith("Robust HTML")
    md = download(page, "#aqa-saved-md")
    assert md.startswith("# Saved papers") and "Robust HTML" in md
    bib = download(page, "#aqa-saved-bib")
    assert "author = {Mallory Example and Trent Tester}" in bib
    # Remove one from the saved list itself.
    page.locator("#aqa-saved li", has_text="Robust HTML").locator("button").click()
    page.wait_for_function("document.querySelectorAll('#aqa-saved li').length === 1",
                           timeout=10_000)
    page.close()


def test_topic_map_click_filters_the_list(server, browser):
    page = open_app(browser, server)
    page.get_by_role("tab", name="Papers").click()
    dots = page.locator("#aqa-topic-map circle")
    dots.first.wait_for(timeout=60_000)
    assert dots.count() == 58
    labels = page.locator("#aqa-topic-map g[data-cluster]")
    assert labels.count() >= 3
    label = labels.first
    size = int(re.search(r"\((\d+)\)", label.text_content()).group(1))
    label.click()
    page.wait_for_function(
        "document.querySelector('#aqa-paper-note').innerText.includes('in topic')",
        timeout=30_000)
    assert page.locator("#aqa-paper-results .aqa-result").count() == size
    assert page.locator("#aqa-topic-map g.is-selected").count() == 1
    shot(page, "topic-map", readme=True)
    # The dropdown next to the map does the same; "All topics" lists everything.
    page.locator("#aqa-topic input").click()
    page.locator("ul[role=listbox] li", has_text="All topics").click()
    page.wait_for_function(
        "!document.querySelector('#aqa-paper-note').innerText.includes('in topic')",
        timeout=30_000)
    assert "58 papers" in page.locator("#aqa-paper-note").inner_text()
    page.close()


# ------------------------------------------------- fake engine (no models)


def _canned_answer(papers):
    """An answer citing 3 papers: a sentence and a quote with a URL, a withdrawn sentence."""
    from rag.types import Answer, Citation, Evidence, SearchHit, SentenceSupport, Timings

    a, b, c = papers[:3]
    b.abstract = (b.abstract + " Code is at https://shieldagent-aiguard.github.io/.")
    quote_b = "Code is at https://shieldagent-aiguard.github.io/."
    sents = [
        SentenceSupport(f"{a.title} studies diffusion models.", [1], 0.8, True, a.paper_id),
        SentenceSupport(f"{b.title} releases its code at https://shieldagent-aiguard.github.io/.",
                        [2], 0.7, True, b.paper_id),
        SentenceSupport(f"{c.title} proves a theorem.", [3], 0.6, True, c.paper_id),
        SentenceSupport("It also cures cancer.", [], 0.1, False, withdrawn=True,
                        withdrawn_reason="no abstract states this"),
    ]
    first = a.abstract.split(". ")[0] + "."
    cites = [Citation(1, a, a.abstract, 0.8, relevance=0.62, quotes=[first]),
             Citation(2, b, b.abstract, 0.7, relevance=0.41, quotes=[quote_b]),
             Citation(3, c, c.abstract, 0.6, relevance=0.3, quotes=[c.abstract.split(". ")[0]])]
    ev = [Evidence(1, a.paper_id, first, 0.62), Evidence(2, b.paper_id, quote_b, 0.41)]
    return lambda q: Answer(q, q, "text", sents, cites,
                            [SearchHit(p, 0.5, i) for i, p in enumerate(papers[:3], 1)], False,
                            None, "fake-llm", Timings(1, 2, 3), evidence=ev)


@pytest.fixture(scope="module")
def fake_server():
    papers = synthetic_papers(3300)
    eng = FakeEngine(papers, answer=_canned_answer(papers))
    with running_fake_app(eng) as srv:
        yield srv


def test_citation_markers_scroll_to_cards_and_links_are_clean(fake_server, browser):
    page = open_app(browser, fake_server)
    ask(page, "What do these papers do?", n_bot=1)
    chat = page.locator("#aqa-chatbot")
    text = chat.inner_text()
    assert "\\-" not in text and "\\." not in text, text  # no stray backslashes
    link = chat.locator("a[href^='https://shieldagent-aiguard.github.io']")
    assert link.count() >= 1 and link.first.inner_text() == "https://shieldagent-aiguard.github.io/"
    # Withdrawn sentence: still visible, struck through, with its reason.
    assert chat.locator("del, s").filter(has_text="cures cancer").count() == 1
    assert "withdrawn: no abstract states this" in text
    # Evidence once: the chat lists the cited papers, the panel holds the quotes.
    assert "Cited papers (quotes in the panel)" in text and "Code is at" not in text
    panel = page.locator("#aqa-citations")
    assert "Code is at" in panel.inner_text()
    card1 = panel.locator("#aqa-cite-1")
    assert "Answers the question: strong match" in card1.inner_text()
    assert "Quote backs the claim: strong" in card1.inner_text()
    assert "weak match" in panel.locator("#aqa-cite-3").inner_text()
    # The matched evidence span is marked, not every shared word.
    assert card1.locator("mark").count() == 1
    # Clicking [3] scrolls to card 3 and flashes it.
    page.set_viewport_size({"width": 1400, "height": 500})
    chat.locator("a[href$='#aqa-cite-3']").first.click()
    page.wait_for_function(
        "document.querySelector('#aqa-cite-3').classList.contains('aqa-flash')", timeout=5000)
    page.wait_for_timeout(800)
    box = page.locator("#aqa-cite-3").bounding_box()
    assert box and 0 <= box["y"] < 500, box
    assert page.url.startswith(fake_server.url)  # no navigation
    # Follow-ups carry the cited papers, in citation order.
    ask(page, "What about the second one?", n_bot=2)
    hist = fake_server.engine.calls[-1]["history"]
    assert hist[1]["role"] == "assistant" and hist[1]["papers"] == [
        "syn-00000", "syn-00001", "syn-00002"]
    page.close()


def _long_markdown_answer(base):
    """The canned answer, made longer than the chat box, with model Markdown
    (emphasis, code) and model-written HTML in its first sentence."""
    from rag.types import SentenceSupport

    def make(q):
        a = base(q)
        first = SentenceSupport("An *actionable* rule sets `top_k` <img src=x onerror=alert(1)>.",
                                [1], 0.8, True, a.citations[0].paper.paper_id)
        a.sentences = [first, *a.sentences[:3] * 8, *a.sentences[3:]]
        return a

    return make


@pytest.fixture
def long_answers(fake_server):
    eng = fake_server.engine
    old = eng._answer
    eng._answer = _long_markdown_answer(old)
    try:
        yield fake_server
    finally:
        eng._answer = old


CHAT_GEOMETRY = """() => {
    const wrap = document.querySelector('#aqa-chatbot .bubble-wrap').getBoundingClientRect();
    const bots = document.querySelectorAll('#aqa-chatbot [data-testid=bot]');
    const box = (el) => { if (!el) return null; const r = el.getBoundingClientRect();
      const cs = getComputedStyle(el);
      return (cs.display === 'none' || cs.visibility === 'hidden' || !r.width) ? null
        : {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; };
    const el = document.querySelector('#aqa-chatbot .bubble-wrap');
    return {wrap: box(el), scrollable: el.scrollHeight > el.clientHeight + 50,
            lastBot: box(bots[bots.length - 1]),
            label: box(document.querySelector('#aqa-chatbot [data-testid=block-label]')),
            panel: box(document.querySelector('#aqa-chatbot .top-panel')),
            arrow: box(document.querySelector('#aqa-chatbot .scroll-down-button-container'))};
}"""


def test_answer_renders_markdown_and_the_view_shows_its_start(long_answers, browser):
    page = open_app(browser, long_answers)
    ask(page, "What do these papers do?", n_bot=1)
    ask(page, "And in more detail?", n_bot=2)
    page.wait_for_timeout(500)
    chat = page.locator("#aqa-chatbot")
    # Model Markdown renders; model-written HTML stays text.
    assert chat.locator("em", has_text="actionable").count() == 2
    assert chat.locator("code", has_text="top_k").count() == 2
    text = chat.inner_text()
    assert "*actionable*" not in text and "<img src=x onerror=alert(1)>" in text
    assert chat.locator("img").count() == 0 and not browser.dialogs
    # The answer is longer than the box, and the view shows its start, not its end.
    g = page.evaluate(CHAT_GEOMETRY)
    assert g["scrollable"], g
    assert g["wrap"]["top"] - 2 <= g["lastBot"]["top"] < g["wrap"]["top"] + 120, g
    shot(page, "chat-answer-start")
    page.close()


def test_phone_label_and_scroll_arrow_never_cover_the_text(long_answers, browser):
    page = browser.context.new_page()
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(long_answers.url)
    page.wait_for_selector("#aqa-question textarea", timeout=60_000)
    ask(page, "What do these papers do?", n_bot=1)
    # Mid-answer, where Gradio would show its scroll-down arrow.
    page.evaluate("document.querySelector('#aqa-chatbot .bubble-wrap').scrollTop = 300")
    page.wait_for_timeout(600)
    g = page.evaluate(CHAT_GEOMETRY)
    assert g["label"] and g["label"]["bottom"] <= g["wrap"]["top"] + 1, g  # above the text
    assert g["panel"] is None or g["panel"]["bottom"] <= g["wrap"]["top"] + 1, g
    assert g["arrow"] is None, g  # hidden on a phone: the text scrolls by touch
    assert g["lastBot"]["top"] < g["wrap"]["top"]  # really scrolled into the answer
    shot(page, "chat-phone")
    page.close()


def test_stop_leaves_a_marker_not_a_ghost_answer(fake_server, browser):
    eng = fake_server.engine
    page = open_app(browser, fake_server)
    eng.delay = 2.0
    try:
        box = page.locator("#aqa-question textarea")
        box.fill("What do these papers do?")
        box.press("Enter")
        page.wait_for_function("document.querySelector('#aqa-chatbot').innerText.includes('▌')",
                               timeout=30_000, polling=50)
        assert "being written" in page.locator("#aqa-citations").inner_text()
        page.locator("#aqa-question button.stop-button").click()
        page.wait_for_function(
            "document.querySelector('#aqa-chatbot').innerText.includes('Stopped — no answer "
            "was checked') && !document.querySelector('#aqa-question textarea').disabled",
            timeout=10_000)
        page.wait_for_timeout(3000)  # the cancelled answer does not come back
        text = page.locator("#aqa-chatbot").inner_text()
        assert "▌" not in text and "studies diffusion models" not in text, text
        panel = page.locator("#aqa-citations").inner_text()
        assert "Stopped" in panel and "being written" not in panel, panel
        shot(page, "chat-stopped")
    finally:
        eng.delay = 0.0
    ask(page, "What about the second one?", n_bot=2)
    assert eng.calls[-1]["history"] == []  # the stopped turn is no history
    page.close()


def test_explorer_and_topic_map_at_3300_papers(fake_server, browser):
    page = open_app(browser, fake_server)
    page.get_by_role("tab", name="Papers").click()
    page.locator("#aqa-topic-map circle").first.wait_for(timeout=60_000)
    assert page.locator("#aqa-topic-map circle").count() == 3300
    page.wait_for_function(
        "document.querySelector('#aqa-paper-note').innerText.includes('3300 papers')",
        timeout=30_000)
    label = page.locator("#aqa-topic-map g[data-cluster]").nth(1)
    size = int(re.search(r"\((\d+)\)", label.text_content()).group(1))
    label.click()
    page.wait_for_function(
        "document.querySelector('#aqa-paper-note').innerText.includes('in topic')",
        timeout=30_000)
    assert f"{size} papers in topic" in page.locator("#aqa-paper-note").inner_text()
    page.locator("#aqa-topic input").click()
    page.locator("ul[role=listbox] li", has_text="All topics").click()
    page.wait_for_function(
        "!document.querySelector('#aqa-paper-note').innerText.includes('in topic')",
        timeout=30_000)
    query = page.locator("#aqa-paper-query textarea")
    query.fill("diffusion denoising")
    query.press("Enter")
    page.wait_for_function(
        "document.querySelector('#aqa-paper-note').innerText.includes('match “diffusion')",
        timeout=30_000)
    cards = page.locator("#aqa-paper-results .aqa-result")
    for i in range(2):
        cards.nth(i).locator("[data-save]").click()
        page.wait_for_function("n => document.querySelectorAll('#aqa-saved li').length === n",
                               arg=i + 1, timeout=10_000)
    bib = download(page, "#aqa-saved-bib")
    assert bib.count("@inproceedings{") == 2 and "note = " not in bib
    page.locator("#aqa-to-compare").click()
    page.locator("#aqa-compare-btn").wait_for(state="visible")
    assert "Diffusion" in page.locator("#aqa-compare-papers").inner_text()
    page.close()


def test_mobile_420px(fake_server, browser):
    page = browser.context.new_page()
    page.set_viewport_size({"width": 420, "height": 900})
    page.goto(fake_server.url)
    page.wait_for_selector("#aqa-question textarea", timeout=60_000)
    # Cited papers come before the export buttons.
    panel_y = page.locator("#aqa-citations").bounding_box()["y"]
    assert panel_y < page.locator("#aqa-export-md").bounding_box()["y"]
    # Compare: a dropdown closes after a pick; row headers never overlap cell text.
    page.get_by_role("tab", name="Compare").click()
    for text in ("study 0", "study 1"):
        inp = page.locator("#aqa-compare-papers input")
        inp.click()
        inp.fill(text)
        page.locator("ul[role=listbox] li", has_text=text).first.click()
        page.locator("ul[role=listbox]").wait_for(state="detached", timeout=3000)
    page.locator("#aqa-compare-btn").click()
    table = page.locator("#aqa-compare-out table")
    table.wait_for(state="visible", timeout=30_000)
    overlaps = page.evaluate("""() => {
        const bad = [];
        for (const tr of document.querySelectorAll('#aqa-compare-out tbody tr')) {
          const th = tr.querySelector('th').getBoundingClientRect();
          for (const td of tr.querySelectorAll('td')) {
            const r = td.getBoundingClientRect();
            const x = Math.min(th.right, r.right) - Math.max(th.left, r.left);
            const y = Math.min(th.bottom, r.bottom) - Math.max(th.top, r.top);
            if (x > 1 && y > 1) bad.push(tr.querySelector('th').innerText);
          }
          if (tr.scrollWidth > tr.clientWidth + 1) bad.push('overflow');
        }
        return bad;
    }""")
    assert overlaps == [], overlaps
    shot(page, "compare-mobile")
    page.close()


# ------------------------------------ issue 29: Papers tab layout, warm-up


def _note(page) -> str:
    return page.locator("#aqa-paper-note").inner_text()


def test_papers_results_come_first_and_a_new_search_clears_the_topic(fake_server, browser):
    page = browser.context.new_page()
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(fake_server.url)
    page.wait_for_selector("#aqa-question textarea", timeout=60_000)
    page.get_by_role("tab", name="Papers").click()
    page.locator("#aqa-topic-map circle").first.wait_for(timeout=60_000)
    # Browsing: a topic label narrows the list.
    page.locator("#aqa-topic-map g[data-cluster]").nth(1).click()
    page.wait_for_function(
        "document.querySelector('#aqa-paper-note').innerText.includes('in topic')",
        timeout=30_000)
    # A new query searches every topic, and the results come before the map.
    query = page.locator("#aqa-paper-query textarea")
    query.fill("diffusion denoising")
    query.press("Enter")
    page.wait_for_function(
        "document.querySelector('#aqa-paper-note').innerText.includes('match “diffusion')",
        timeout=30_000)
    assert "in topic" not in _note(page), _note(page)
    assert page.locator("#aqa-topic input").input_value() == "All topics"
    page.wait_for_timeout(500)  # the accordion's fold
    first = page.locator("#aqa-paper-results .aqa-result").first.bounding_box()
    assert first and first["y"] + 60 < 1000, first  # visible without scrolling
    assert not page.locator("#aqa-topic-map svg").is_visible()
    shot(page, "explorer-search-1400", full_page=False)
    # Reopening the map shows it, compact: at most about half the view.
    page.locator("#aqa-topic-acc").get_by_text("Topic map").click()
    svg = page.locator("#aqa-topic-map svg")
    svg.wait_for(state="visible", timeout=10_000)
    assert svg.bounding_box()["height"] <= 0.5 * 1000 + 2
    # Labels stay readable at this width (their rendered font size).
    sizes = page.evaluate("""() => [...document.querySelectorAll('#aqa-topic-map g text')]
        .map(t => t.getBoundingClientRect().height)""")
    assert sizes and min(sizes) >= 11, sizes
    page.close()


def test_single_value_filters_are_hidden(fake_server, browser):
    """Synthetic corpus: one source, two venues, three years."""
    page = open_app(browser, fake_server)
    page.get_by_role("tab", name="Papers").click()
    acc = page.locator("#aqa-paper-filters")
    acc.wait_for(state="visible", timeout=30_000)
    assert "Filters: venue, year" in acc.inner_text()
    acc.get_by_text("Filters: venue, year").click()
    page.locator("#aqa-p-venues").wait_for(state="visible", timeout=10_000)
    assert page.locator("#aqa-p-years").is_visible()
    assert not page.locator("#aqa-p-sources").is_visible()
    page.close()


def test_phone_topic_map_lists_readable_topic_chips(fake_server, browser):
    page = browser.context.new_page()
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(fake_server.url)
    page.wait_for_selector("#aqa-question textarea", timeout=60_000)
    page.get_by_role("tab", name="Papers").click()
    page.locator("#aqa-topic-map circle").first.wait_for(timeout=60_000)
    # No SVG label shrunk to a few pixels: they give way to chips.
    assert page.evaluate("""() => [...document.querySelectorAll('#aqa-topic-map g.aqa-cluster')]
        .every(g => getComputedStyle(g).display === 'none')""")
    chips = page.locator("#aqa-topic-map .aqa-chip")
    assert chips.count() == page.locator("#aqa-topic-map g.aqa-cluster").count() >= 3
    assert chips.first.is_visible()
    font = page.evaluate("""() => Math.min(...[...document.querySelectorAll(
        '#aqa-topic-map .aqa-chip')].map(c => parseFloat(getComputedStyle(c).fontSize)))""")
    assert font >= 11, font
    box = chips.first.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390 + 1, box
    size = int(re.search(r"\((\d+)\)", chips.nth(1).inner_text()).group(1))
    chips.nth(1).click()
    page.wait_for_function(
        "document.querySelector('#aqa-paper-note').innerText.includes('in topic')",
        timeout=30_000)
    assert f"{size} papers in topic" in _note(page)
    assert page.locator("#aqa-topic-map .aqa-chip.is-selected").count() == 1
    shot(page, "topic-chips-phone", full_page=False)
    page.close()


class _WarmingEngine(FakeEngine):
    """Its ``warm`` (loading the models) holds until the test releases it."""

    def __init__(self, papers, **kw) -> None:
        import threading

        super().__init__(papers, **kw)
        self.release = threading.Event()
        self.warmed: list[str] = []

    def warm(self, llm: bool = True) -> None:
        import threading

        self.warmed.append(threading.current_thread().name)
        self.release.wait(60)


def test_start_up_warm_up_shows_a_status_and_a_question_waits(browser):
    import threading

    from rag.llm import reset_cancel_all
    from tests.conftest_ui import free_port
    from ui.server import serve

    papers = synthetic_papers(60)
    eng = _WarmingEngine(papers, answer=_canned_answer(papers))
    settings = eng.settings.updated(port=free_port())
    stop = threading.Event()
    runner = threading.Thread(target=serve, args=(settings, eng), kwargs={"stop": stop},
                              name="serve", daemon=True)
    runner.start()
    try:
        page = browser.context.new_page()
        for _ in range(120):  # the server comes up
            try:
                page.goto(f"http://127.0.0.1:{settings.ui.port}/")
                break
            except Exception:  # noqa: BLE001 - not listening yet
                page.wait_for_timeout(250)
        page.wait_for_selector("#aqa-question textarea", timeout=60_000)
        status = page.locator("#aqa-warmup")
        status.wait_for(state="visible", timeout=10_000)
        assert "Loading the models… (first start)" in status.inner_text()
        assert eng.warmed == ["aqa-warmup"]
        # A question asked meanwhile waits, saying why.
        box = page.locator("#aqa-question textarea")
        box.fill("What do these papers do?")
        box.press("Enter")
        page.wait_for_function(
            "document.querySelector('#aqa-chatbot').innerText.includes('Loading the models')",
            timeout=30_000)
        assert eng.calls == []
        shot(page, "warm-up", full_page=False)
        eng.release.set()
        status.wait_for(state="hidden", timeout=10_000)
        page.wait_for_function(
            "document.querySelector('#aqa-chatbot').innerText.includes('studies diffusion')",
            timeout=30_000)
        assert len(eng.calls) == 1
        page.close()
    finally:
        eng.release.set()
        stop.set()
        runner.join(10)
        reset_cancel_all()  # serve's shutdown stopped generations process-wide


def test_no_request_leaves_the_machine(server, browser):
    """Runs last: every request the browser made went to the local app."""
    hosts = {urlparse(u).hostname for u in browser.requests if u.startswith("http")}
    assert hosts == {"127.0.0.1"}, sorted(hosts)
    assert not browser.dialogs
