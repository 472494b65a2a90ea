"""Each OpenAI-endpoint failure is one actionable line, not a traceback,
against real local HTTP servers that misbehave on purpose."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rag.config import Settings
from rag.errors import LLMError
from rag.llm import OpenAILLM, make_llm


def _server(status: int, body: dict | None = None, delay: float = 0.0):
    class H(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            time.sleep(delay)
            payload = json.dumps(body or {"error": {"message": "nope", "type": "x"}}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}/v1"


def _ask(base_url: str, **over) -> str:
    s = Settings(_env_file=None, openai_base_url=base_url, openai_api_key="k", llm_retries=0,
                 llm_timeout=2, **over)
    llm = OpenAILLM(s)
    with pytest.raises(LLMError) as e:
        list(llm.stream_chat([{"role": "user", "content": "hi"}], max_tokens=5, temperature=0))
    msg = str(e.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize(
    "status,needle", [(401, "API key"), (429, "Rate limited"), (404, "not found"), (500, "HTTP 500")]
)
def test_http_failures_map_to_one_line(status, needle):
    srv, url = _server(status)
    try:
        assert needle in _ask(url)
    finally:
        srv.shutdown()


def test_timeout():
    srv, url = _server(200, delay=5)
    try:
        assert "did not answer within 2 s" in _ask(url)
    finally:
        srv.shutdown()


def test_unreachable_server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert "Cannot reach" in _ask(f"http://127.0.0.1:{port}/v1")


def test_missing_key_is_explained():
    s = Settings(_env_file=None, llm_provider="openai", openai_api_key=None, openai_base_url=None)
    with pytest.raises(LLMError, match="OPENAI_API_KEY"):
        make_llm(s)


def test_provider_auto_switches_on_key():
    assert Settings(_env_file=None).resolved_llm_provider == "local"
    assert Settings(_env_file=None, openai_api_key="sk-x").resolved_llm_provider == "openai"
