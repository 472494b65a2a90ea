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
    chromium,
    running_app,
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


def shot(page, name: str, readme: bool = False) -> Path:
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=not readme)  # README: one screen
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
    assert "Sources:" in text
    cards = page.locator("#aqa-citations [data-cite]")
    assert cards.count() >= 1
    first = cards.first
    assert "support score" in first.inner_text()
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
        "document.querySelector('#aqa-paper-note').innerText.includes('best matches')",
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

    # Select it and ask about it: the chat is restricted to that paper.
    page.locator("#aqa-paper-select label", has_text="Robust HTML").locator("input").check()
    page.locator("#aqa-to-chat").click()
    page.locator("#aqa-question textarea").wait_for(state="visible")
    assert "Robust HTML" in page.locator("#aqa-only-papers").inner_text()
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
    shot(page, "compare", readme=True)
    abstract_cell = rows.nth(rows.count() - 1).locator("td").first
    abstract_cell.locator("summary").click()
    assert len(abstract_cell.locator(".aqa-abstract-text").inner_text()) > 200
    shot(page, "compare-open-abstract")

    table_csv = list(csv.reader(io.StringIO(download(page, "#aqa-compare-csv"))))
    assert table_csv[0] == ["aspect", "ShieldAgent (derived label)", "MELON (derived label)"]
    assert [r[0] for r in table_csv[2::2]][: len(ASPECTS)] == [ASPECT_LABELS[a] for a in ASPECTS]
    md = download(page, "#aqa-compare-md")
    assert "| Aspect | [1] ShieldAgent (derived label) | [2] MELON (derived label) |" in md
    page.close()


def test_search_select_and_send_to_compare(server, browser):
    page = open_app(browser, server)
    page.get_by_role("tab", name="Papers").click()
    query = page.locator("#aqa-paper-query textarea")
    query.fill("prompt injection attacks on web agents")
    query.press("Enter")
    page.wait_for_function(
        "document.querySelector('#aqa-paper-note').innerText.includes('best matches')",
        timeout=60_000,
    )
    text = page.locator("#aqa-paper-results").inner_text()
    assert "MELON" in text or "AdvAgent" in text or "ShieldAgent" in text
    boxes = page.locator("#aqa-paper-select input[type=checkbox]")
    labels = page.locator("#aqa-paper-select label")
    chosen = [labels.nth(0).inner_text().strip(), labels.nth(1).inner_text().strip()]
    boxes.nth(0).check()
    boxes.nth(1).check()
    page.locator("#aqa-to-compare").click()
    page.locator("#aqa-compare-btn").wait_for(state="visible")
    picked = page.locator("#aqa-compare-papers").inner_text()
    assert all(c.split(" — ")[0] in picked for c in chosen)
    page.close()


def test_no_request_leaves_the_machine(server, browser):
    """Runs last: every request the browser made went to the local app."""
    hosts = {urlparse(u).hostname for u in browser.requests if u.startswith("http")}
    assert hosts == {"127.0.0.1"}, sorted(hosts)
    assert not browser.dialogs
