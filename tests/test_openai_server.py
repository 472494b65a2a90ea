"""The OpenAI path against a real OpenAI-compatible server: llama-cpp-python's
own ``python -m llama_cpp.server`` (the ``[server]`` extra) serving the bundled
SmolLM2-135M GGUF on a free local port.

The hand-written fake servers of tests/test_llm_errors.py stay: they produce
the faults a real server cannot (malformed events, HTTP codes, stalls). These
tests check what only a real one shows: its streaming, its structured-output
dialect (llama-cpp-python takes ``json_object`` with a ``schema``, and answers
OpenAI's ``json_schema`` with an HTTP 500), compare and a short eval over it,
and a server that dies mid-reply. The model's wording is never asserted.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rag.config import Settings
from rag.errors import LLMError
from rag.models import smollm_file

pytestmark = pytest.mark.slow

AQA = str(Path(sys.executable).parent / "aqa")
QUESTION = "What is ShieldAgent?"  # answered by SmolLM2 through the server (not declined)
TIMEOUT = 30.0  # AQA_LLM_TIMEOUT of these tests: a fault must end well within it


@dataclass
class Server:
    """A running ``llama_cpp.server`` process."""

    proc: subprocess.Popen
    url: str  # the OpenAI base URL, ".../v1"
    model: str  # the model id as the server reports it
    log: Path

    def settings(self, data_dir: Path, **over: object) -> Settings:
        """Settings for the app's OpenAI path against this server."""
        return Settings(_env_file=None, data_dir=data_dir, llm_provider="openai",
                        openai_base_url=self.url, openai_api_key="x", openai_model=self.model,
                        llm_timeout=TIMEOUT, **over)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(log: Path, *, ready_within: float = 120.0) -> Server:
    """Start ``python -m llama_cpp.server`` on a free port and wait until
    ``/v1/models`` answers; the process's output goes to ``log``."""
    import httpx

    pytest.importorskip("starlette_context", reason="llama-cpp-python[server] is not installed")
    port = _free_port()
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(smollm_file()),
             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096",
             "--n_threads", "2"],
            stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + ready_within
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited ({proc.returncode}):\n"
                               f"{log.read_text(errors='replace')[-2000:]}")
        try:
            r = httpx.get(f"{url}/models", timeout=2.0)
            if r.status_code == 200:
                return Server(proc, url, r.json()["data"][0]["id"], log)
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"llama_cpp.server did not answer {url}/models "
                               f"within {ready_within:g} s")
        time.sleep(0.25)


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    srv = start_server(tmp_path_factory.mktemp("llama_server") / "server.log")
    yield srv
    srv.stop()


@pytest.fixture
def index(real_index_dir: Path, tmp_path: Path) -> Path:
    """A private copy of the session's real-MiniLM index."""
    d = tmp_path / "idx"
    shutil.copytree(real_index_dir, d)
    return d


def _engine(server: Server, index: Path, **over: object):
    from rag.engine import Engine

    return Engine(server.settings(index, **over))


def test_ask_streams_tokens_over_the_wire(server: Server, index: Path):
    engine = _engine(server, index)
    t0 = time.perf_counter()
    events = list(engine.ask_stream(QUESTION))
    took = time.perf_counter() - t0
    tokens = [ev.text for ev in events if ev.kind == "token"]
    final = events[-1]
    assert final.kind == "answer" and final.answer is not None
    a = final.answer
    assert a.model == f"openai:{server.model}"
    assert len(tokens) > 1, "the synthesis did not stream token by token"
    assert a.decision is not None and a.decision["outcome"]
    if a.declined:
        assert a.decline_reason and a.decline_kind
    else:
        assert a.text.strip() and a.citations
    # The evidence choice and the check went through structured output the
    # server took (json_object with the schema), so both replies parsed.
    fired = {r.name for r in a.rules if r.fired}
    assert "choice_unparsed" not in fired
    print(f"\nask through llama_cpp.server: {took:.1f} s, {len(tokens)} tokens, "
          f"ttft {a.timings.ttft_ms} ms, outcome {a.decision['outcome']}")


def test_json_schema_output_through_the_server(server: Server, index: Path, caplog):
    """The structured-output requests of the evidence step (``choice_schema``)
    and of the check (``CHECK_SCHEMA``): llama-cpp-python's server refuses
    OpenAI's ``json_schema`` form (HTTP 500), the client switches to the
    ``json_object`` + ``schema`` form once, and the replies are valid JSON of
    the schema (a grammar on the server constrains them)."""
    from rag.answer.evidence import CHECK_SCHEMA, choice_schema, parse_choice, parse_verdict
    from rag.engine import Engine
    from rag.llm import make_llm
    from rag.text import split_sentences

    settings = server.settings(index, llm_retries=0)
    paper = Engine(settings).papers()[0]
    sents = split_sentences(paper.abstract)[:6]
    numbered = "\n".join(f"[{i}] {t}" for i, t in enumerate(sents, 1))
    llm = make_llm(settings)
    ask = [{"role": "user", "content": f"Sentences:\n{numbered}\n\nWhich sentences say what "
            f"the paper proposes? Reply with JSON {{\"ids\": [...]}}."}]
    for _ in range(2):  # the second request goes straight to the form that worked
        raw = "".join(llm.stream_chat(ask, max_tokens=40, temperature=0.0,
                                      json_schema=choice_schema(len(sents), 3)))
        data = json.loads(raw)  # strict JSON, not just something parse_choice can read
        assert isinstance(data, dict) and isinstance(data["ids"], list)
        assert len(data["ids"]) <= 3
        assert all(isinstance(i, int) and 1 <= i <= len(sents) for i in data["ids"])
        assert parse_choice(raw, len(sents)) == list(dict.fromkeys(data["ids"]))
    check = [{"role": "user", "content": f"Does this sentence say what the paper proposes?\n"
              f"{sents[0]}\nReply with JSON {{\"answer\": \"yes\"}} or {{\"answer\": \"no\"}}."}]
    reply = "".join(llm.stream_chat(check, max_tokens=20, temperature=0.0,
                                    json_schema=CHECK_SCHEMA))
    assert json.loads(reply)["answer"] in ("yes", "no")
    assert parse_verdict(reply) is not None
    assert llm._schema_form == "json_object"  # type: ignore[attr-defined]
    rejected = [r for r in caplog.records if "rejected response_format" in r.getMessage()]
    assert len(rejected) == 1, "the refused form was not remembered"


def test_compare_two_papers_quotes_abstracts(server: Server, index: Path):
    engine = _engine(server, index)
    papers = engine.papers()
    a, b = papers[0], papers[len(papers) // 2]
    cmp = engine.compare([a.paper_id, b.paper_id])
    assert [p.paper_id for p in cmp.papers] == [a.paper_id, b.paper_id]
    assert cmp.model == f"openai:{server.model}", cmp.synthesis  # the synthesis ran
    stated = 0
    for p in cmp.papers:
        for aspect, cell in cmp.cells[p.paper_id].items():
            if cell.quote is not None:
                stated += 1
                assert cell.quote in p.abstract, (p.paper_id, aspect, cell.quote)
    assert stated > 0


def test_eval_run_through_the_server(server: Server, index: Path, tmp_path: Path):
    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AQA_", "OPENAI_"))}
    env.update(AQA_LLM_PROVIDER="openai", OPENAI_BASE_URL=server.url, OPENAI_API_KEY="x",
               AQA_OPENAI_MODEL=server.model, AQA_LLM_TIMEOUT=str(TIMEOUT),
               OMP_WAIT_POLICY="PASSIVE")
    t0 = time.perf_counter()
    r = subprocess.run([AQA, "eval", "run", "--limit", "2", "--no-ingest", "--data-dir",
                        str(index), "--out", str(out), "--label", "llama-server"],
                       capture_output=True, text=True, env=env, timeout=900,
                       cwd=tmp_path)  # outside the checkout: no .env there
    took = time.perf_counter() - t0
    assert r.returncode == 0, r.stderr[-3000:]
    from eval.runner import load_run

    summary, records = load_run(out)
    assert summary["n_questions"] == 2 and len(records) == 2
    assert summary["n_errors"] == 0, [rec.get("error") for rec in records]
    assert all(rec["answer"]["model"] == f"openai:{server.model}" for rec in records)
    assert (out / "report.md").is_file()
    assert str(out / "report.md") in r.stdout
    print(f"\neval run of 2 questions through llama_cpp.server: {took:.1f} s")


def test_server_killed_mid_stream_is_one_clear_error(index: Path, tmp_path: Path):
    """A second server, killed after the first token: the stream ends in one
    LLMError naming the server, well within the timeout, and no hang."""
    srv = start_server(tmp_path / "doomed.log")
    try:
        engine = _engine(srv, index, llm_retries=0)
        stream = engine.ask_stream(QUESTION)
        t_kill = None
        with pytest.raises(LLMError) as err:
            for ev in stream:
                if ev.kind == "token" and t_kill is None:
                    os.kill(srv.proc.pid, signal.SIGKILL)
                    srv.proc.wait(10)
                    t_kill = time.perf_counter()
        assert t_kill is not None, "no token arrived before the error"
        took = time.perf_counter() - t_kill
    finally:
        srv.stop()
    msg = str(err.value)
    assert "\n" not in msg and "Traceback" not in msg
    assert srv.url in msg, msg
    assert err.value.where == srv.url and err.value.reason
    assert took < TIMEOUT, f"the broken stream took {took:.1f} s to fail"
    print(f"\nkilled mid-stream: failed {took:.2f} s after the kill: {msg}")
