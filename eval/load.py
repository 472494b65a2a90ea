"""Load figure of the web app: N concurrent gradio_client sessions, each
asking Q questions, against a real `aqa serve` subprocess whose LLM is a fake
OpenAI-compatible HTTP server that answers every request in ``--llm-delay``
seconds (issue 8: 20 sessions x 3 questions, 0.5 s per LLM reply).

    python -m eval.load                          # the code in this checkout
    python -m eval.load --app-dir /tmp/before    # another checkout (e.g. before a change)
    python -m eval.load --sessions 20 --questions 3 --llm-delay 0.5 --json

Prints p50/p95/max latency per question (submit to final answer) and a
search probe: the latency of /search_papers requests made while the chat
load runs, which must not wait behind the LLM.

The fake LLM (``eval.fake_llm``) replies with a short cited sentence, or, when the request asks
for JSON (``response_format``), with a minimal instance of the schema.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from eval.fake_llm import FakeOpenAI

REPO = Path(__file__).resolve().parent.parent
QUESTIONS = [
    "What does ShieldAgent propose?",
    "What is MELON and what does it defend against?",
    "Which papers study prompt injection defenses for agents?",
    "What does RobustZero do?",
    "How is safety policy compliance verified for agent trajectories?",
    "Which methods improve reasoning of language models?",
]

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, proc: subprocess.Popen, timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"aqa serve exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"{url} did not come up within {timeout:g} s")


def split_cpus() -> tuple[set[int], set[int]] | None:
    """(server CPUs, load-generator CPUs): half each, so that the generator's
    own work (100 gradio clients cost about twice the server's CPU) does not
    count as the server's latency. None on a single CPU."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None
    half = len(cpus) // 2
    return set(cpus[half:]), set(cpus[:half])


def start_app(app_dir: Path, data_dir: Path, llm_url: str, port: int, log: Path,
              extra_env: dict[str, str] | None = None,
              cpus: set[int] | None = None) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(app_dir), "AQA_DATA_DIR": str(data_dir),
           "AQA_LLM_PROVIDER": "openai", "OPENAI_BASE_URL": llm_url, "OPENAI_API_KEY": "load",
           "AQA_OPENAI_MODEL": "fake", "AQA_LLM_RETRIES": "0",
           **(extra_env or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "aqa_cli", "serve", "--port", str(port)],
        cwd=app_dir, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
    )


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process and its finished children (Linux
    /proc), so a run can report the server's CPU per answer; None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # fields[0] is field 3 (state): utime, stime, cutime, cstime are fields 14-17
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def run_load(url: str, sessions: int, questions: int, seed: int = 0) -> dict[str, Any]:
    from gradio_client import Client

    rng = random.Random(seed)
    plans = [[rng.choice(QUESTIONS) for _ in range(questions)] for _ in range(sessions)]
    clients = [Client(url, verbose=False) for _ in range(sessions)]  # one per browser session
    lat: list[float] = []  # accepted answers: submit to final answer
    refused: list[float] = []  # refused at once by admission control ("Busy: … ask again")
    errors: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(sessions + 2)  # sessions, the search probe, this thread
    done = threading.Event()
    probes: list[float] = []

    def session(i: int) -> None:
        start.wait()
        for q in plans[i]:
            t0 = time.perf_counter()
            busy = False
            try:
                out = clients[i].submit(q, api_name="/chat").result(timeout=600)
                res = json.loads(out[-1])
                busy = str(res.get("error") or "").startswith("Busy:")
                if res.get("error"):
                    with lock:
                        errors.append(res["error"])
            except Exception as e:  # noqa: BLE001 - counted, the run goes on
                with lock:
                    errors.append(f"{type(e).__name__}: {e}")
            with lock:
                (refused if busy else lat).append(time.perf_counter() - t0)

    def probe() -> None:  # search while the chat load runs
        c = Client(url, verbose=False)
        start.wait()
        time.sleep(1.0)
        while not done.is_set():
            t0 = time.perf_counter()
            try:
                c.predict("prompt injection defenses", api_name="/search_papers")
            except Exception as e:  # noqa: BLE001
                errors.append(f"search: {type(e).__name__}: {e}")
            probes.append(time.perf_counter() - t0)
            time.sleep(0.5)

    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    t_start = time.perf_counter()
    with ThreadPoolExecutor(sessions) as pool:
        futs = [pool.submit(session, i) for i in range(sessions)]
        start.wait()
        for f in futs:
            f.result()
    wall = time.perf_counter() - t_start
    done.set()
    prober.join(timeout=30)
    return _summary(sessions, questions, lat, refused, errors, probes, wall)


def _api_args(url: str, api: str, first: Any) -> list[Any]:
    """Positional data for ``api``: ``first``, then each parameter's default."""
    with urllib.request.urlopen(f"{url}gradio_api/info", timeout=30) as r:
        params = json.load(r)["named_endpoints"][f"/{api}"]["parameters"]
    return [first] + [p.get("parameter_default") for p in params[1:]]


async def _call(client: Any, url: str, api: str, data: list[Any],
                session: str | None = None) -> list[Any]:
    """One call over Gradio's HTTP API (POST, then the SSE stream of its event);
    ``session``: a session hash, so that a browser session's state carries over."""
    body: dict[str, Any] = {"data": data}
    if session:
        body["session_hash"] = session
    r = await client.post(f"{url}gradio_api/call/{api}", json=body)
    if r.status_code != 200:
        raise RuntimeError(f"HTTP {r.status_code}: {r.text[:200]}")
    event_id = r.json()["event_id"]
    last: list[Any] | None = None
    kind = ""
    async with client.stream("GET", f"{url}gradio_api/call/{api}/{event_id}") as resp:
        async for line in resp.aiter_lines():
            if line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:") and kind in ("generating", "complete"):
                last = json.loads(line[5:])
            elif line.startswith("data:") and kind == "error":
                raise RuntimeError(f"error event: {line[5:].strip()[:200]}")
            if kind == "complete" and last is not None:
                break
    if last is None:
        raise RuntimeError("no data")
    return last


def run_load_http(url: str, sessions: int, questions: int, seed: int = 0) -> dict[str, Any]:
    """``run_load`` over raw HTTP from one asyncio loop: a light load generator
    (gradio_client's one-thread-per-client costs about twice the server's
    CPU, which on 2 cores is then measured as the server's latency)."""
    import asyncio

    import httpx

    rng = random.Random(seed)
    plans = [[rng.choice(QUESTIONS) for _ in range(questions)] for _ in range(sessions)]
    chat_args = _api_args(url, "chat", "")
    search_args = _api_args(url, "search_papers", "prompt injection defenses")
    lat: list[float] = []
    refused: list[float] = []
    errors: list[str] = []
    probes: list[float] = []

    async def main() -> float:
        limits = httpx.Limits(max_connections=2 * sessions + 8)
        async with httpx.AsyncClient(timeout=600, limits=limits) as client:
            done = asyncio.Event()

            async def session(i: int) -> None:
                for q in plans[i]:
                    t0 = time.perf_counter()
                    busy = False
                    try:
                        out = await _call(client, url, "chat", [q, *chat_args[1:]],
                                          session=f"load{seed}-{i}")
                        res = json.loads(out[-1])
                        busy = str(res.get("error") or "").startswith("Busy:")
                        if res.get("error"):
                            errors.append(res["error"])
                    except Exception as e:  # noqa: BLE001 - counted, the run goes on
                        errors.append(f"{type(e).__name__}: {e}")
                    (refused if busy else lat).append(time.perf_counter() - t0)

            async def probe() -> None:
                await asyncio.sleep(1.0)
                while not done.is_set():
                    t0 = time.perf_counter()
                    try:
                        await _call(client, url, "search_papers", search_args)
                    except Exception as e:  # noqa: BLE001
                        errors.append(f"search: {type(e).__name__}: {e}")
                    probes.append(time.perf_counter() - t0)
                    await asyncio.sleep(0.5)

            prober = asyncio.create_task(probe())
            t_start = time.perf_counter()
            await asyncio.gather(*(session(i) for i in range(sessions)))
            wall = time.perf_counter() - t_start
            done.set()
            await prober
            return wall

    wall = asyncio.run(main())
    return _summary(sessions, questions, lat, refused, errors, probes, wall)


def _summary(sessions: int, questions: int, lat: list[float], refused: list[float],
             errors: list[str], probes: list[float], wall: float) -> dict[str, Any]:
    return {
        "sessions": sessions, "questions_each": questions, "requests": len(lat) + len(refused),
        "accepted": len(lat), "refused": len(refused),
        "refused_p50_s": round(pct(refused, 0.5), 2) if refused else None,
        "errors": len(errors) - len(refused),
        "error_samples": sorted({e for e in errors if not e.startswith("Busy:")})[:3],
        "refusal_sample": next((e for e in errors if e.startswith("Busy:")), None),
        "p50_s": round(pct(lat, 0.5), 2), "p95_s": round(pct(lat, 0.95), 2),
        "max_s": round(max(lat), 2) if lat else None,
        "mean_s": round(statistics.mean(lat), 2) if lat else None, "wall_s": round(wall, 1),
        "search_probe_p50_s": round(pct(probes, 0.5), 2) if probes else None,
        "search_probe_max_s": round(max(probes), 2) if probes else None,
        "search_probes": len(probes),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--app-dir", type=Path, default=REPO, help="checkout to serve (default: this)")
    ap.add_argument("--data-dir", type=Path, help="index to use (default: a temp dir; "
                    "the app indexes the bundled corpus on first start)")
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--questions", type=int, default=3)
    ap.add_argument("--llm-delay", type=float, default=0.5)
    ap.add_argument("--startup-timeout", type=float, default=900)
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                    help="extra environment for aqa serve (repeatable)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--client", choices=("http", "gradio"), default="http",
                    help="load generator: raw HTTP from one asyncio loop (default, light) or "
                         "one gradio_client per session (heavy: about 2x the server's CPU)")
    ap.add_argument("--shared-cpus", action="store_true",
                    help="run the server and the load generator on the same CPUs (default: "
                         "half the CPUs each, so the generator's own work is not measured)")
    args = ap.parse_args(argv)
    split = None if args.shared_cpus else split_cpus()

    llm = FakeOpenAI(args.llm_delay)
    threading.Thread(target=llm.serve_forever, daemon=True).start()
    tmp = Path(tempfile.mkdtemp(prefix="aqa-load-"))
    data_dir = args.data_dir or tmp / "idx"
    port = free_port()
    log = tmp / "serve.log"
    extra = dict(kv.split("=", 1) for kv in args.env)
    proc = start_app(args.app_dir.resolve(), data_dir, llm.url, port, log, extra,
                     cpus=split[0] if split else None)
    if split:
        os.sched_setaffinity(0, split[1])
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_http(url, proc, args.startup_timeout)
        load = run_load_http if args.client == "http" else run_load
        load(url, 2, 1)  # warm-up: models loaded, first-request costs paid
        llm.requests = llm.peak = 0
        cpu0 = cpu_seconds(proc.pid)
        res = load(url, args.sessions, args.questions)
        cpu1 = cpu_seconds(proc.pid)
        res["server_cpu_s"] = round(cpu1 - cpu0, 1) if cpu0 is not None and cpu1 is not None else None
        res["server_cpu_per_answer_s"] = (round(res["server_cpu_s"] / res["accepted"], 3)
                                          if res["server_cpu_s"] and res["accepted"] else None)
        res.update(llm_delay_s=args.llm_delay, llm_requests=llm.requests,
                   server_cpus=sorted(split[0]) if split else "shared",
                   llm_peak_concurrency=llm.peak, app_dir=str(args.app_dir))
    except Exception:
        print(log.read_text(errors="replace")[-3000:], file=sys.stderr)
        raise
    finally:
        try:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
        llm.shutdown()
    if args.json:
        print(json.dumps(res))
    else:
        model_s = args.llm_delay * res["llm_requests"] / max(1, res["accepted"])
        print(f"server on CPUs {res['server_cpus']}: "
              f"{res['sessions']} sessions x {res['questions_each']} questions, LLM "
              f"{args.llm_delay:g} s/reply ({model_s:.2f} s of model per answer): "
              f"{res['accepted']} accepted, p50 {res['p50_s']} s, p95 {res['p95_s']} s, "
              f"max {res['max_s']} s; {res['refused']} refused at once (p50 "
              f"{res['refused_p50_s']} s); wall {res['wall_s']} s, errors {res['errors']}; "
              f"search during load p50 {res['search_probe_p50_s']} s, max "
              f"{res['search_probe_max_s']} s; LLM requests {res['llm_requests']}, peak "
              f"concurrency {res['llm_peak_concurrency']}; server CPU {res['server_cpu_s']} s "
              f"({res['server_cpu_per_answer_s']} s an answer)")
        for e in res["error_samples"]:
            print("  error:", e)
        if res["refusal_sample"]:
            print("  refusal:", res["refusal_sample"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
