"""Every LLM fault ends in one actionable ``LLMError`` line: never a traceback
and never an empty reply that reads as a decline (issue 8, items 4 and 6).

The faults are real: a local HTTP server speaks the OpenAI chat-completions
SSE protocol and misbehaves on purpose (stalls, cuts the stream, sends a
malformed event, answers 200 with a non-JSON page, fails with HTTP 500...).
The mode is the first path segment of the base URL: ``/<mode>/v1``.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rag.config import Settings
from rag.errors import LLMCancelled, LLMError
from rag.llm import LocalLLM, OpenAILLM, cancel_scope, make_llm

REPLY = ["Shield", "Agent ", "enforces ", "safety ", "policies ", "[1]."]


def _chunk(text: str | None, finish: str | None = None) -> bytes:
    delta = {"content": text} if text is not None else {}
    doc = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(doc)}\n\n".encode()


class FaultServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.hits: Counter[str] = Counter()
        self.bodies: list[dict] = []
        self.stop = threading.Event()
        self.disconnected = threading.Event()

    def url(self, mode: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/{mode}/v1"

    def handle_error(self, request, client_address) -> None:
        pass  # clients hang up on purpose here (cancel, timeout)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FaultServer

    def log_message(self, *a) -> None:
        pass

    def _json(self, status: int, doc: dict) -> None:
        payload = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _sse_head(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _send(self, data: bytes) -> None:  # one HTTP/1.1 chunk
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _stream(self, pieces: list[str], *, finish: bool = True, done: bool = True) -> None:
        self._sse_head()
        for p in pieces:
            self._send(_chunk(p))
        if finish:
            self._send(_chunk(None, "stop"))
        if done:
            self._send(b"data: [DONE]\n\n")
        self._end()

    def do_POST(self) -> None:  # noqa: N802 - http.server API
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        srv = self.server
        srv.bodies.append(body)
        mode = self.path.strip("/").split("/")[0]
        srv.hits[mode] += 1
        n = srv.hits[mode]
        if mode == "ok":
            self._stream(REPLY)
        elif mode == "stall":  # first chunk, then silence
            self._sse_head()
            self._send(_chunk(REPLY[0]))
            srv.stop.wait(15)
        elif mode == "stall_first":  # headers, then silence before any token
            self._sse_head()
            srv.stop.wait(15)
        elif mode == "malformed":
            self._sse_head()
            self._send(_chunk(REPLY[0]))
            self._send(b'data: {"choices": [{"delta": {"content": "x"\n\n')
            self._end()
        elif mode == "malformed_first":
            self._sse_head()
            self._send(b"data: {oops\n\n")
            self._end()
        elif mode == "cut":  # chunked body that ends mid-chunk: connection closed
            self._sse_head()
            self._send(_chunk(REPLY[0]))
            self.wfile.write(b"400\r\n" + _chunk(REPLY[1])[:20])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
        elif mode == "html200":
            page = b"<html><body>Welcome to nginx!</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)
        elif mode == "json200":  # a non-streaming completion: not an event stream
            self._json(200, {"choices": [{"message": {"content": "hi"}, "index": 0}]})
        elif mode == "nofinish":  # tokens, then the stream just ends
            self._stream(REPLY[:2], finish=False, done=False)
        elif mode == "error_event":
            self._sse_head()
            self._send(b'data: {"error": {"message": "CUDA out of memory", "type": "x"}}\n\n')
            self._end()
        elif mode.isdigit():
            self._json(int(mode), {"error": {"message": "nope", "type": "x"}})
        elif mode == "flaky":  # first try breaks before any token, the retry works
            if n == 1:
                self._sse_head()
                self._send(b"data: {oops\n\n")
                self._end()
            else:
                self._stream(REPLY)
        elif mode == "schema400":  # no structured output here
            if "response_format" in body:
                self._json(400, {"error": {"message": "response_format is not supported",
                                           "type": "invalid_request_error"}})
            else:
                self._stream(['{"ok": true}'])
        elif mode == "jsonobject500":  # llama_cpp.server: json_object + schema only, 500 otherwise
            rf = body.get("response_format") or {}
            if rf.get("type") == "json_schema":
                self._json(500, {"error": {"message": "1 validation error: response_format.type "
                                           "Input should be 'text' or 'json_object'"}})
            else:
                self._stream(['{"ok": true}'])
        elif mode == "overflow400":
            self._json(400, {"error": {
                "message": "This model's maximum context length is 4096 tokens. However, you "
                           "requested 31062 tokens.", "type": "invalid_request_error"}})
        elif mode == "slow":  # many tokens, slowly; notices when the client hangs up
            self._sse_head()
            try:
                for i in range(100):
                    self._send(_chunk(f"t{i} "))
                    time.sleep(0.1)
                self._end()
            except OSError:
                srv.disconnected.set()
        else:
            self._json(404, {"error": {"message": f"no mode {mode}"}})


@pytest.fixture(scope="module")
def server():
    srv = FaultServer()
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.stop.set()
    srv.shutdown()


def _llm(url: str, **over) -> OpenAILLM:
    over = {"llm_retries": 0, "llm_timeout": 2, **over}
    return OpenAILLM(Settings(_env_file=None, openai_base_url=url, openai_api_key="k", **over))


def _fail(url: str, **over) -> str:
    llm = _llm(url, **over)
    got: list[str] = []
    with pytest.raises(LLMError) as e:
        for piece in llm.stream_chat([{"role": "user", "content": "hi"}], max_tokens=5,
                                     temperature=0):
            got.append(piece)
    msg = str(e.value)
    assert "\n" not in msg and len(msg) < 400, msg
    return msg


def test_healthy_stream(server):
    llm = _llm(server.url("ok"))
    out = list(llm.stream_chat([{"role": "user", "content": "hi"}], max_tokens=5, temperature=0))
    assert out == REPLY


@pytest.mark.parametrize("mode,needle", [
    ("stall", "stalled: no data for 2 s"),
    ("stall_first", "stalled: no data for 2 s"),
    ("malformed", "malformed event"),
    ("malformed_first", "malformed event"),
    ("cut", "cut off mid-stream"),
    ("html200", "not an OpenAI-compatible event stream (Content-Type text/html)"),
    ("json200", "not an OpenAI-compatible event stream (Content-Type application/json)"),
    ("nofinish", "stopped before it was finished"),
    ("error_event", "CUDA out of memory"),
    ("500", "HTTP 500"),
    ("503", "HTTP 503"),
    ("overflow400", "does not fit its context window"),
])
def test_server_faults_are_one_line(server, mode, needle):
    t0 = time.monotonic()
    msg = _fail(server.url(mode))
    assert msg.startswith(f"The language model at {server.url(mode)} failed: "), msg
    assert needle in msg, msg
    assert time.monotonic() - t0 < 8


@pytest.mark.parametrize("status,needle", [(401, "API key"), (429, "Rate limited"),
                                           (404, "not found")])
def test_kept_messages(server, status, needle):
    assert needle in _fail(server.url(str(status)))


def test_connection_refused():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    msg = _fail(url)
    assert msg.startswith(f"The language model at {url} failed: Cannot reach the LLM server")
    assert "OPENAI_BASE_URL" in msg


def test_timeout_before_headers():
    """A server that accepts the connection and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(5)
        msg = _fail(f"http://127.0.0.1:{s.getsockname()[1]}/v1")
    assert "did not answer within 2 s" in msg


def test_retry_before_first_token(server):
    llm = _llm(server.url("flaky"), llm_retries=1)
    out = list(llm.stream_chat([{"role": "user", "content": "hi"}], max_tokens=5, temperature=0))
    assert out == REPLY and server.hits["flaky"] == 2


def test_no_retry_after_a_token(server):
    before = server.hits["malformed"]
    _fail(server.url("malformed"), llm_retries=2)
    assert server.hits["malformed"] == before + 1  # the token was shown: not repeated


def test_json_schema_falls_back_without_response_format(server):
    llm = _llm(server.url("schema400"))
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    for _ in range(2):
        out = "".join(llm.stream_chat([{"role": "user", "content": "hi"}], max_tokens=5,
                                      temperature=0, json_schema=schema))
        assert json.loads(out) == {"ok": True}
    sent = [b for b in server.bodies if b.get("messages") and "response_format" in b]
    assert len(sent) == 1  # asked once, then remembered that the server can't
    assert sent[0]["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}


def test_json_schema_falls_back_to_json_object_with_the_schema(server):
    """A server that refuses the json_schema form with a 500 naming json_object
    (llama-cpp-python's own) gets json_object + schema, once per client."""
    llm = _llm(server.url("jsonobject500"), llm_retries=0)
    start = len(server.bodies)  # the server is shared by the module's tests
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    for _ in range(2):
        out = "".join(llm.stream_chat([{"role": "user", "content": "hi"}], max_tokens=5,
                                      temperature=0, json_schema=schema))
        assert json.loads(out) == {"ok": True}
    mine = [b for b in server.bodies[start:] if b.get("messages") and "response_format" in b]
    assert [b["response_format"]["type"] for b in mine] == ["json_schema", "json_object",
                                                            "json_object"]
    last = mine[-1]["response_format"]
    assert last.get("schema") == schema


def test_close_stops_the_server_stream(server):
    llm = _llm(server.url("slow"), llm_timeout=5)
    gen = llm.stream_chat([{"role": "user", "content": "hi"}], max_tokens=5, temperature=0)
    assert next(gen).startswith("t0")
    gen.close()
    assert server.disconnected.wait(3), "the HTTP stream was not closed"


def test_cancel_scope_stops_at_next_token(server):
    llm = _llm(server.url("slow"), llm_timeout=5)
    ev = threading.Event()
    got: list[str] = []
    t0 = time.monotonic()
    with cancel_scope(ev), pytest.raises(LLMCancelled):
        for piece in llm.stream_chat([{"role": "user", "content": "hi"}], max_tokens=5,
                                     temperature=0):
            got.append(piece)
            if len(got) == 2:
                ev.set()
    assert len(got) == 2 and time.monotonic() - t0 < 3


def test_non_json_200_is_an_error_not_a_decline(server, fake_engine):
    """The issue's false decline: a 200 page that isn't JSON through the engine."""
    eng = fake_engine(llm=_llm(server.url("html200")))
    with pytest.raises(LLMError, match="failed: the reply is not an OpenAI-compatible"):
        eng.ask("What does ShieldAgent do?")


def test_missing_key_is_explained():
    s = Settings(_env_file=None, llm_provider="openai", openai_api_key=None, openai_base_url=None)
    with pytest.raises(LLMError, match="OPENAI_API_KEY"):
        make_llm(s)


def test_provider_auto_switches_on_key():
    assert Settings(_env_file=None).llm.resolved_provider == "local"
    assert Settings(_env_file=None, openai_api_key="sk-x").llm.resolved_provider == "openai"


def test_concurrency_defaults():
    assert Settings(_env_file=None).llm_concurrency == 1
    assert Settings(_env_file=None, openai_base_url="http://x/v1").llm_concurrency == 8
    assert Settings(_env_file=None, openai_base_url="http://x/v1",
                    ui_concurrency=3).llm_concurrency == 3


# ------------------------------------------------------------- local model


class _FakeLlama:
    """Stands in for ``llama_cpp.Llama``: streams tokens, or overflows."""

    def __init__(self) -> None:
        self.closed = 0
        self.kwargs: list[dict] = []

    def create_chat_completion(self, *, messages, max_tokens, temperature, stream, **kw):
        self.kwargs.append(kw)
        if len(messages[0]["content"]) > 1000:
            raise ValueError("Requested tokens (31062) exceed context window of 4096")

        def gen():
            try:
                for i in range(50):
                    yield {"choices": [{"delta": {"content": f"t{i} "}}]}
            finally:
                self.closed += 1
        return gen()


def _local(tmp_path, **over) -> LocalLLM:
    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF")
    over = {"llm_timeout": 1, **over}
    llm = LocalLLM(Settings(_env_file=None, local_model_path=f, **over))
    llm._llm = _FakeLlama()
    return llm


def test_local_context_overflow_is_one_line(tmp_path):
    llm = _local(tmp_path)
    with pytest.raises(LLMError) as e:
        list(llm.stream_chat([{"role": "user", "content": "x" * 200_000}], max_tokens=5,
                             temperature=0))
    assert str(e.value).startswith("The local model m.gguf failed: the prompt does not fit")
    assert "AQA_LLM_CONTEXT" in str(e.value) and "31062" in str(e.value)
    # ...and the model is free again
    assert len(list(llm.stream_chat([{"role": "user", "content": "hi"}], max_tokens=5,
                                    temperature=0))) == 50


def test_local_json_schema(tmp_path):
    llm = _local(tmp_path)
    list(llm.stream_chat([{"role": "user", "content": "hi"}], max_tokens=5, temperature=0,
                         json_schema={"type": "object"}))
    assert llm._llm.kwargs[-1] == {"response_format": {"type": "json_object",
                                                       "schema": {"type": "object"}}}


def test_local_close_releases_the_model(tmp_path):
    llm = _local(tmp_path)
    gen = llm.stream_chat([{"role": "user", "content": "hi"}], max_tokens=5, temperature=0)
    next(gen)
    gen.close()
    assert llm._llm.closed == 1  # llama.cpp stopped at this token
    t0 = time.monotonic()
    assert next(llm.stream_chat([{"role": "user", "content": "hi"}], max_tokens=5,
                                temperature=0)) == "t0 "
    assert time.monotonic() - t0 < 0.5


def test_local_abandoned_stream_is_reclaimed(tmp_path):
    """A stream parked at a token and never closed does not block others forever."""
    llm = _local(tmp_path, ui_timeout=5)
    stuck = llm.stream_chat([{"role": "user", "content": "hi"}], max_tokens=5, temperature=0)
    next(stuck)  # holds the model, then is abandoned (kept referenced, never closed)
    t0 = time.monotonic()
    out = list(llm.stream_chat([{"role": "user", "content": "hi"}], max_tokens=5,
                               temperature=0))
    assert len(out) == 50 and 0.9 < time.monotonic() - t0 < 4  # reclaimed after llm_timeout
    with pytest.raises(LLMCancelled):
        next(stuck)


def test_local_model_is_first_come_first_served(tmp_path):
    """Concurrent sessions take turns: a session that keeps asking does not
    take the model again ahead of one that has been waiting."""
    llm = _local(tmp_path, llm_timeout=30, ui_timeout=30)
    order: list[str] = []

    def run(name: str, times: int) -> None:
        for _ in range(times):
            gen = llm.stream_chat([{"role": "user", "content": "hi"}], max_tokens=5,
                                  temperature=0)
            next(gen)
            order.append(name)
            list(gen)

    holder = llm.stream_chat([{"role": "user", "content": "hi"}], max_tokens=5, temperature=0)
    next(holder)
    eager = threading.Thread(target=run, args=("eager", 5))
    eager.start()
    time.sleep(0.3)
    waiting = threading.Thread(target=run, args=("waiting", 1))
    waiting.start()
    time.sleep(0.3)
    holder.close()
    eager.join(10)
    waiting.join(10)
    assert order.index("waiting") == 1, order


def test_local_waiter_honours_cancel(tmp_path):
    llm = _local(tmp_path, llm_timeout=30, ui_timeout=30)
    holder = llm.stream_chat([{"role": "user", "content": "hi"}], max_tokens=5, temperature=0)
    next(holder)
    ev = threading.Event()
    threading.Timer(0.3, ev.set).start()
    t0 = time.monotonic()
    with pytest.raises(LLMCancelled):
        next(llm.stream_chat([{"role": "user", "content": "hi"}], max_tokens=5, temperature=0,
                             cancel=ev))
    assert time.monotonic() - t0 < 2
    holder.close()


# ------------------------------------------------- engine and UI integration


def test_long_question_is_cut_with_a_note(fake_engine):
    from tests.fakes import FakeLLM

    llm = FakeLLM("ShieldAgent enforces safety policies [1].")
    eng = fake_engine(llm=llm, max_question_chars=2000)
    question = "What does ShieldAgent do? " + "padding " * 25_000  # ~200 kB
    events = list(eng.ask_stream(question))
    notes = [e.text for e in events if e.kind == "status" and "AQA_MAX_QUESTION_CHARS" in e.text]
    assert notes and "first 2,000" in notes[0]
    assert events[-1].kind == "answer"
    for messages in llm.calls:  # nothing longer than the cut question reached the model
        assert sum(len(m["content"]) for m in messages) < 2000 + 20_000


def test_timed_out_compare_releases_the_llm(server, fake_engine):
    """run_with_deadline around a single engine.compare call: at the deadline
    the LLM stream stops at its next token (the HTTP stream is closed)."""
    from ui.worker import UITimeout, run_with_deadline

    server.disconnected.clear()
    eng = fake_engine(llm=_llm(server.url("slow"), llm_timeout=30))
    t0 = time.monotonic()
    with pytest.raises(UITimeout):
        list(run_with_deadline(lambda: [eng.compare(query="agents safety")], 1.0,
                               what="The comparison"))
    assert server.disconnected.wait(5), "the comparison kept the LLM busy after its deadline"
    assert time.monotonic() - t0 < 6  # the slow reply alone would take 10 s


@pytest.mark.slow
def test_real_local_model_context_overflow():
    """The real llama.cpp error ('Requested tokens (N) exceed context window')
    becomes one line, and the model answers the next request."""
    llm = make_llm(Settings(_env_file=None, local_model="smollm2-135m", llm_context=512,
                            llm_provider="local"))
    with pytest.raises(LLMError) as e:
        list(llm.stream_chat([{"role": "user", "content": "word " * 5000}], max_tokens=5,
                             temperature=0))
    msg = str(e.value)
    assert "does not fit its context window" in msg and "\n" not in msg, msg
    assert "".join(llm.stream_chat([{"role": "user", "content": "Say hi."}], max_tokens=5,
                                   temperature=0))


def test_server_concurrency_is_capped():
    """However many callers, at most llm_concurrency streams reach the server."""
    from concurrent.futures import ThreadPoolExecutor

    from eval.fake_llm import FakeOpenAI

    srv = FakeOpenAI(delay=0.4)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        llm = _llm(srv.url, ui_concurrency=2, llm_timeout=10)

        def ask(_: int) -> str:
            return "".join(llm.stream_chat([{"role": "user", "content": "hi"}], max_tokens=5,
                                           temperature=0))

        with ThreadPoolExecutor(6) as pool:
            replies = list(pool.map(ask, range(6)))
        assert all(r for r in replies) and srv.requests == 6
        assert srv.peak == 2
    finally:
        srv.shutdown()


def test_http_error_shows_the_servers_message(server):
    msg = _fail(server.url("500"))
    assert msg.endswith("failed: HTTP 500: nope"), msg


def test_loading_the_llm_never_blocks_search(fake_engine, monkeypatch):
    """Building the LLM (joining and loading a 1 GB GGUF) holds its own lock only."""
    import rag.engine
    from tests.fakes import FakeLLM

    eng = fake_engine()
    eng._embedder = None  # the first search after start builds the embedder too
    loading = threading.Event()

    def slow_make_llm(settings):
        loading.set()
        time.sleep(3)
        return FakeLLM("x")

    monkeypatch.setattr(rag.engine, "make_llm", slow_make_llm)
    threading.Thread(target=eng._get_llm, daemon=True).start()
    assert loading.wait(5)
    t0 = time.monotonic()
    assert eng.search("agent safety policies", k=3)
    assert time.monotonic() - t0 < 2.5


def test_the_request_body_carries_the_messages_and_schema_as_given(server):
    # They travel in extra_body (not re-walked by the client's type
    # transform): the server must still see exactly the chat request.
    llm = _llm(server.url("ok"))
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi ✓"}]
    start = len(server.bodies)
    "".join(llm.stream_chat(msgs, max_tokens=7, temperature=0))
    body = server.bodies[start]
    assert body["messages"] == msgs
    assert body["max_tokens"] == 7 and body["stream"] is True and "response_format" not in body
