"""A fake OpenAI-compatible chat server for load and shutdown tests: it
answers every request after a fixed delay, with a short cited sentence, or,
when the request asks for JSON (``response_format``), with a minimal
instance of the schema; it counts requests and their peak concurrency."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

REPLY = "ShieldAgent enforces safety policy compliance for agent trajectories [1]."


def schema_instance(schema: dict[str, Any]) -> Any:
    """A minimal value that satisfies a (simple) JSON schema."""
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return schema_instance(schema[key][0])
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "null")
    if t == "object":
        props = schema.get("properties", {})
        keys = schema.get("required", list(props))
        return {k: schema_instance(props.get(k, {})) for k in keys}
    if t == "array":
        n = max(1, schema.get("minItems", 1))
        return [schema_instance(schema.get("items", {"type": "integer", "minimum": 1}))
                for _ in range(n)]
    if t == "integer":
        return int(schema.get("minimum", 1))
    if t == "number":
        return float(schema.get("minimum", 1))
    if t == "boolean":
        return True
    if t == "null":
        return None
    return "x"


class FakeOpenAI(ThreadingHTTPServer):
    """OpenAI-compatible chat-completions server: every reply takes ``delay`` s."""

    daemon_threads = True

    def __init__(self, delay: float, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.delay = delay
        self.requests = 0
        self.active = 0
        self.peak = 0
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client hanging up on a kept-alive connection is not news


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeOpenAI

    def log_message(self, *a: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server API
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        srv = self.server
        with srv._lock:
            srv.requests += 1
            srv.active += 1
            srv.peak = max(srv.peak, srv.active)
        done = False

        def finish() -> None:
            # Counted as done before its last bytes go out: once the client has
            # them it may start its next request before this handler returns.
            nonlocal done
            if not done:
                done = True
                with srv._lock:
                    srv.active -= 1

        try:
            rf = body.get("response_format") or {}
            if rf.get("type") == "json_schema":
                text = json.dumps(schema_instance(rf["json_schema"].get("schema", {})))
            elif rf.get("type") == "json_object":
                text = json.dumps(schema_instance(rf.get("schema", {"type": "object"})))
            else:
                text = REPLY
            # Half the time before the first token, the rest spread over the tokens.
            time.sleep(srv.delay / 2)
            pieces = [text[i:i + 8] for i in range(0, len(text), 8)]
            if body.get("stream"):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for i, p in enumerate(pieces):
                    time.sleep(srv.delay / 2 / len(pieces))
                    last = i == len(pieces) - 1
                    if last:
                        finish()
                    doc = {"id": "x", "object": "chat.completion.chunk", "created": 0,
                           "model": "fake", "choices": [{"index": 0, "delta": {"content": p},
                                                          "finish_reason": "stop" if last else None}]}
                    self._chunk(f"data: {json.dumps(doc)}\n\n".encode())
                self._chunk(b"data: [DONE]\n\n")
                self.wfile.write(b"0\r\n\r\n")
            else:
                time.sleep(srv.delay / 2)
                doc = {"id": "x", "object": "chat.completion", "created": 0, "model": "fake",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": text}}]}
                payload = json.dumps(doc).encode()
                finish()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
        except OSError:
            pass  # the client hung up (cancelled)
        finally:
            finish()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()
