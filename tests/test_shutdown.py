"""`aqa serve` as a real subprocess (issue 8, items 7 and CLI): SIGINT and
SIGTERM end it promptly while an answer is in flight, and its
``aqa-exports-*`` temp folder is gone afterwards; a port already in use is
one line, not a traceback."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from eval.fake_llm import FakeOpenAI
from eval.load import wait_http

REPO = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

PAPERS = [
    {"id": "s1", "title": "ShieldAgent", "authors": ["A. Author"], "year": 2025,
     "abstract": "ShieldAgent enforces safety policy compliance for agent trajectories "
                 "through verifiable policy reasoning and outperforms prior methods by 11.3%."},
    {"id": "s2", "title": "MELON", "authors": ["B. Author"], "year": 2025,
     "abstract": "MELON defends language model agents against indirect prompt injection "
                 "attacks by masked re-execution and tool comparison."},
    {"id": "s3", "title": "RobustZero", "authors": ["C. Author"], "year": 2025,
     "abstract": "RobustZero learns robust policies for zero-shot reinforcement learning "
                 "under adversarial perturbations of the environment dynamics."},
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(tmp: Path, llm_url: str) -> dict[str, str]:
    corpus = tmp / "corpus"
    corpus.mkdir(exist_ok=True)
    (corpus / "papers.jsonl").write_text("\n".join(json.dumps(p) for p in PAPERS) + "\n")
    tmpdir = tmp / "tmp"
    tmpdir.mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(tmpdir), "GRADIO_TEMP_DIR": str(tmpdir / "gradio"),
            "AQA_DATA_DIR": str(tmp / "idx"), "AQA_CORPUS_PATHS": json.dumps([str(corpus)]),
            "AQA_LLM_PROVIDER": "openai", "OPENAI_BASE_URL": llm_url, "OPENAI_API_KEY": "t",
            "AQA_LLM_RETRIES": "0", "AQA_LLM_TIMEOUT": "120", "PYTHONUNBUFFERED": "1"}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_exits_fast_and_removes_exports(tmp_path, sig):
    from gradio_client import Client

    llm = FakeOpenAI(delay=60)  # the answer is still being generated when the signal comes
    threading.Thread(target=llm.serve_forever, daemon=True).start()
    env = _env(tmp_path, llm.url)
    port = free_port()
    out = (tmp_path / "serve.log").open("w+")
    proc = subprocess.Popen([sys.executable, "-m", "rag.cli", "serve", "--port", str(port)],
                            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_http(url, proc, 400)
        tmpdir = Path(env["TMPDIR"])
        assert list(tmpdir.glob("aqa-exports-*")), "no export folder was made"
        Client(url, verbose=False).submit("What does ShieldAgent do?", api_name="/chat")
        end = time.monotonic() + 120
        while llm.active == 0 and time.monotonic() < end:
            time.sleep(0.2)
        assert llm.active == 1, "the answer never reached the LLM"

        t0 = time.monotonic()
        proc.send_signal(sig)
        try:
            code = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError(f"{sig.name}: still running after 10 s") from None
        took = time.monotonic() - t0
        print(f"\n{sig.name}: aqa serve exited with {code} in {took:.2f} s")
        out.seek(0)
        log = out.read()
        assert "Traceback" not in log, log[-3000:]
        assert code == (130 if sig == signal.SIGINT else 0), log[-2000:]
        assert not list(tmpdir.glob("aqa-exports-*")), "export folder left behind"
        assert took < 5, f"{sig.name} took {took:.2f} s (the goal is < 2 s)"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        llm.shutdown()


def test_port_in_use_is_one_line(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "rag.cli", "serve", "--port", str(port)],
                           cwd=REPO, env=_env(tmp_path, "http://127.0.0.1:9/v1"),
                           capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and f"Port {port} on 127.0.0.1 is already in use" in lines[0], r.stderr
    assert "--port" in lines[0]
    assert time.monotonic() - t0 < 60  # refused before indexing or loading any model
