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

from tests.conftest_ui import PLANTED_ID, free_port, running_app

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def server(real_index_dir, tmp_path_factory):
    with running_app(tmp_path_factory.mktemp("ui_api"), real_index_dir) as srv:
        yield srv


def client(server) -> Client:
    return Client(server.url, verbose=False,
                  download_files=str(Path(server.settings.storage.data_dir)))


def result_of(outputs) -> dict:
    """The JSON /chat returns last: the answer and this session's questions."""
    return json.loads(outputs[-1])


def file_of(output) -> Path:
    """A download button's output: an update whose value is the fetched file."""
    return Path(output["value"] if isinstance(output, dict) else output)


def test_chat_endpoint_returns_cited_answer(server):
    c = client(server)
    info = c.view_api(print_info=False, return_format="dict")["named_endpoints"]["/chat"]
    assert [p["parameter_name"] for p in info["parameters"]] == [
        "message", "sources", "venues", "years", "paper_ids", "k"]
    outputs = c.predict("What does ShieldAgent propose?", api_name="/chat")
    message, panel = outputs[0], outputs[1]
    assert "(#aqa-cite-1)" in message and "Cited papers" in message
    assert 'data-cite="1"' in panel and "Answers the question" in panel
    result = result_of(outputs)
    assert result["conversation"] == ["What does ShieldAgent propose?"]
    answer = result["answer"]
    assert answer["citations"] and not answer["declined"]
    assert {c["paper"]["title"].split(":")[0] for c in answer["citations"]} & {"ShieldAgent"}


def test_chat_filters_restrict_the_answer(server):
    c = client(server)
    outputs = c.predict(
        "What does the sanitisation benchmark of escaping failures across web renderers find?",
        [], [], [], [PLANTED_ID], 3, api_name="/chat")
    answer = result_of(outputs)["answer"]
    assert {h["paper"]["paper_id"] for h in answer["retrieved"]} == {PLANTED_ID}
    assert "&lt;script&gt;" in outputs[1] and "<script" not in outputs[1]


def test_concurrent_sessions_keep_separate_histories(server, monkeypatch):
    seen: dict[str, list[str]] = {}  # question -> user turns of the history the engine got
    real_stream = server.engine.ask_stream

    def spy(question, **kw):
        seen[question] = [m["content"] for m in kw.get("history", ()) if m["role"] == "user"]
        return real_stream(question, **kw)

    monkeypatch.setattr(server.engine, "ask_stream", spy)
    topics = {
        "a": ("What does ShieldAgent propose?", "What results does it report?"),
        "b": ("What is MELON?", "Which benchmark is it evaluated on?"),
        "c": ("What does RobustZero do?", "What are its limitations?"),
    }

    def session(key: str) -> list[list[str]]:
        c = client(server)  # one client = one browser session
        out = []
        for q in topics[key]:
            res = result_of(c.submit(q, api_name="/chat").result(timeout=400))
            out.append(res["conversation"])
            # Each reply answers this session's own question (a failed turn
            # carries its error instead: say which, so a failure can be read).
            assert res["answer"] is not None, f"{key}: {q!r} failed: {res['error']}"
            assert res["answer"]["question"] == q
        return out

    with ThreadPoolExecutor(len(topics)) as pool:
        results = dict(zip(topics, pool.map(session, topics), strict=True))
    for key, (q1, q2) in topics.items():
        after_first, after_second = results[key]
        assert after_first == [q1]
        assert after_second == [q1, q2], key
        assert seen[q1] == [] and seen[q2] == [q1], key
    # A brand-new session starts with an empty history.
    fresh = client(server).predict("What is MELON?", api_name="/chat")
    assert result_of(fresh)["conversation"] == ["What is MELON?"]


def test_compare_and_search_endpoints(server):
    c = client(server)
    html, note = c.predict("prompt injection defenses", api_name="/search_papers")
    assert "papers match" in note and "aqa-result" in html
    ids = [p.paper_id for p in server.engine.papers()
           if p.title.startswith(("ShieldAgent", "MELON"))]
    assert len(ids) == 2
    table, md_file, csv_file = c.predict(ids, "", api_name="/compare")
    assert table.count("<th scope=\"row\">") == 6  # five aspects + abstract
    rows = list(csv.reader(file_of(csv_file).open(encoding="utf-8")))
    assert [r[2] for r in rows[1:]] == ids  # one paper per row
    assert "| Aspect |" in file_of(md_file).read_text(encoding="utf-8")
    error, _, _ = c.predict(ids[:1], "", api_name="/compare")
    assert "Pick 2 to 4 papers" in error


def test_unreachable_llm_is_a_clear_chat_message(real_index_dir, tmp_path):
    """A configured LLM endpoint that refuses connections: the chat says so
    in one line, with no traceback, and the session keeps working."""
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with running_app(tmp_path, real_index_dir, llm_provider="openai", openai_base_url=dead,
                     openai_api_key="test", llm_retries=0, llm_timeout=5.0) as srv:
        c = client(srv)
        outputs = c.predict("What does ShieldAgent propose?", api_name="/chat")
        assert "Could not answer" in outputs[0] and "Traceback" not in outputs[0]
        assert "aqa-error" in outputs[1]
        result = result_of(outputs)
        assert result["answer"] is None and result["error"]
        html_out, note = c.predict("prompt injection", api_name="/search_papers")
        assert "papers match" in note  # retrieval still works without the LLM
