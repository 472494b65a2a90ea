"""Gradio's own floor under the chat load of ``eval.load``: the same load
generator against a minimal Gradio chat app that does no retrieval and no
answer work. Each answer sleeps the fake model's time (three replies of
``--llm-delay`` s: choice, check, synthesis, as the real app asks) and streams
``--updates`` redraws of a chat history and an evidence panel of the real
app's size. What this app's accepted answers take beyond the model's time is
what Gradio's per-event work costs on the same CPUs; the real app cannot do
better than it.

    python -m eval.load_floor --sessions 100 --questions 2 --llm-delay 0.3
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eval.load import free_port, run_load_http, split_cpus, wait_http

# Replies the real app asks the model for per answer: choice, check, synthesis.
MODEL_REPLIES = 3
# Bytes of evidence panel HTML the real app redraws (three cards with quotes).
PANEL_BYTES = 6000


def serve(port: int, llm_delay: float, updates: int) -> None:
    """The minimal app: a ChatInterface with the real app's API name and a
    panel and result output; blocks until killed."""
    import gradio as gr

    panel_html = "<div>" + "x" * PANEL_BYTES + "</div>"

    def respond(message: str, history: list, turns: list):  # noqa: ANN202 - Gradio handler
        model_s = MODEL_REPLIES * llm_delay
        text = ""
        for i in range(updates):
            time.sleep(model_s / updates)
            text += f"Sentence {i} of the answer with a citation [1]. "
            yield text, panel_html, turns, json.dumps({"error": None})
        yield text, panel_html, turns + [message], json.dumps({"error": None, "answer": text})

    with gr.Blocks() as app:
        panel = gr.HTML(render=False)
        turns = gr.State([])
        result = gr.Textbox(render=False)
        gr.ChatInterface(respond, additional_inputs=[turns],
                         additional_outputs=[panel, turns, result], api_name="chat",
                         concurrency_limit=None)
        panel.render()
        result.render()
        q = gr.Textbox()
        out = gr.Textbox()
        q.submit(lambda s: s, q, out, api_name="search_papers")
    app.queue(default_concurrency_limit=None, max_size=None)
    app.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=False,
               show_error=False, share=False)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--questions", type=int, default=2)
    ap.add_argument("--llm-delay", type=float, default=0.3)
    ap.add_argument("--updates", type=int, default=10,
                    help="redraws per answer (the real app batches them to 10/s)")
    ap.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.serve:
        serve(args.serve, args.llm_delay, args.updates)
        return 0
    split = split_cpus()
    port = free_port()
    log = Path(tempfile.mkdtemp(prefix="aqa-floor-")) / "serve.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "eval.load_floor", "--serve", str(port),
         "--llm-delay", str(args.llm_delay), "--updates", str(args.updates)],
        stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
        preexec_fn=(lambda: os.sched_setaffinity(0, split[0])) if split else None)
    if split:
        os.sched_setaffinity(0, split[1])
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_http(url, proc, 120)
        run_load_http(url, 2, 1)  # warm-up
        res = run_load_http(url, args.sessions, args.questions)
    except Exception:
        print(log.read_text(errors="replace")[-3000:], file=sys.stderr)
        raise
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
    model_s = MODEL_REPLIES * args.llm_delay
    print(f"Gradio floor, server on CPUs {sorted(split[0]) if split else 'shared'}: "
          f"{res['sessions']} sessions x {res['questions_each']} questions, {model_s:.2f} s of "
          f"model per answer, {args.updates} redraws: {res['accepted']} accepted, p50 "
          f"{res['p50_s']} s (model + {res['p50_s'] - model_s:.2f} s), p95 {res['p95_s']} s, "
          f"max {res['max_s']} s; wall {res['wall_s']} s, errors {res['errors']} "
          f"{res['error_samples']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
