"""Is the first answer after `aqa serve` starts slower than the later ones?
(Issue #29, item 9: it was 31 s against 17 s before the start-up warm-up.)

    python -m eval.first_answer                    # the bundled index, the default model
    python -m eval.first_answer --data-dir DIR --wait 0

Starts a real `aqa serve`, sends three questions one after another through
Gradio's HTTP API as soon as the server answers (the warm-up still running,
as for a user who asks at once), and prints each answer's time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eval.load import _api_args, _call, free_port, wait_http

QUESTIONS = [
    "Which paper proposes a guardrail agent for LLM agents?",
    "What is MELON and what does it defend against?",
    "What does RobustZero do?",
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, help="index (default: a new one of the bundled corpus)")
    ap.add_argument("--wait", type=float, default=0.0,
                    help="seconds to wait after the server is up before the first question")
    args = ap.parse_args(argv)
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="aqa-first-")) / "idx"
    port = free_port()
    log = Path(tempfile.mkdtemp(prefix="aqa-first-log-")) / "serve.log"
    cmd = [sys.executable, "-m", "aqa_cli", "serve", "--port", str(port), "--data-dir",
           str(data_dir)] + ([] if data_dir.is_dir() else ["--ingest"])
    proc = subprocess.Popen(cmd, env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"},
                            stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        t0 = time.monotonic()
        wait_http(url, proc, 900)
        print(f"server up after {time.monotonic() - t0:.1f} s", flush=True)
        time.sleep(args.wait)
        chat = _api_args(url, "chat", "")

        async def ask_all() -> list[float]:
            import httpx

            took = []
            async with httpx.AsyncClient(timeout=900) as client:
                for q in QUESTIONS:
                    t = time.perf_counter()
                    out = await _call(client, url, "chat", [q, *chat[1:]], session="first")
                    took.append(time.perf_counter() - t)
                    err = json.loads(out[-1]).get("error")
                    print(f"{took[-1]:6.1f} s{f' ({err})' if err else ''}: {q}", flush=True)
            return took

        took = asyncio.run(ask_all())
        later = sum(took[1:]) / len(took[1:])
        print(f"first {took[0]:.1f} s, later mean {later:.1f} s: the first is "
              f"{100 * (took[0] / later - 1):+.0f}% (target: at most +20%)")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
