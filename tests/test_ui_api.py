"""API-level tests of the launched app with ``gradio_client``: the /chat
endpoint, per-session histories under concurrent sessions, /compare and
/search_papers. Real engine (MiniLM + the small local model), one app per module."""

from __future__ import annotations

import csv
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from gradio_client import Client

from tests.conftest_ui import PLANTED_ID, running_app

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def server(real_index_dir, tmp_path_factory):
    with running_app(tmp_path_factory.mktemp("ui_api"), real_index_dir) as srv:
        yield srv


def client(server) -> Client:
    return Client(server.url, verbose=False, download_files=str(Path(server.settings.data_dir)))


def turns_of(result) -> list[dict]:
    """The session's conversation, read from the JSON export the call returned."""
    json_file = result[3]
    return json.loads(Path(json_file).read_text(encoding="utf-8"))["turns"]


def test_chat_endpoint_returns_cited_answer(server):
    c = client(server)
    info = c.view_api(print_info=False, return_format="dict")["named_endpoints"]["/chat"]
    assert [p["parameter_name"] for p in info["parameters"]] == [
        "message", "sources", "venues", "years", "paper_ids", "k"]
    result = c.predict("What does ShieldAgent propose?", api_name="/chat")
    message, panel, md_file, json_file, _bib = result
    assert r"\[1\]" in message and "Sources:" in message
    assert 'data-cite="1"' in panel and "support score" in panel
    assert Path(md_file).read_text(encoding="utf-8").startswith("# abstracts-qa conversation")
    (turn,) = turns_of(result)
    assert turn["question"] == "What does ShieldAgent propose?" and turn["citations"]


def test_chat_filters_restrict_the_answer(server):
    c = client(server)
    result = c.predict(
        "What does the sanitisation benchmark of escaping failures across web renderers find?",
        [], [], [], [PLANTED_ID], 3, api_name="/chat")
    (turn,) = turns_of(result)
    assert {h["paper"]["paper_id"] for h in turn["retrieved"]} == {PLANTED_ID}
    assert "&lt;script&gt;" in result[1] and "<script" not in result[1]


def test_concurrent_sessions_keep_separate_histories(server):
    topics = {
        "a": ("What does ShieldAgent propose?", "What results does it report?"),
        "b": ("What is MELON?", "Which benchmark is it evaluated on?"),
        "c": ("What does RobustZero do?", "What are its limitations?"),
    }

    def session(key: str) -> list[list[dict]]:
        c = client(server)  # one client = one browser session
        return [turns_of(c.submit(q, api_name="/chat").result(timeout=400))
                for q in topics[key]]

    with ThreadPoolExecutor(len(topics)) as pool:
        results = dict(zip(topics, pool.map(session, topics), strict=True))
    for key, (q1, q2) in topics.items():
        after_first, after_second = results[key]
        assert [t["question"] for t in after_first] == [q1]
        assert [t["question"] for t in after_second] == [q1, q2], key
    # A brand-new session starts with an empty history.
    fresh = client(server).predict("What is MELON?", api_name="/chat")
    assert [t["question"] for t in turns_of(fresh)] == ["What is MELON?"]


def test_compare_and_search_endpoints(server):
    c = client(server)
    html, note = None, None
    html, _select, note = c.predict("prompt injection defenses", api_name="/search_papers")
    assert "best matches" in note and "aqa-card" in html
    ids = [p.paper_id for p in server.engine.papers()
           if p.title in ("ShieldAgent", "MELON")]
    assert len(ids) == 2
    table, md_file, csv_file = c.predict(ids, "", api_name="/compare")
    assert table.count("<th scope=\"row\">") == 6  # five aspects + abstract
    rows = list(csv.reader(Path(csv_file).open(encoding="utf-8")))
    assert rows[1] == ["paper_id", *ids]
    assert "| Aspect |" in Path(md_file).read_text(encoding="utf-8")
    error, _, _ = c.predict(ids[:1], "", api_name="/compare")
    assert "Pick 2 to 4 papers" in error
