"""Server lifecycle of ``aqa serve``: ``check_port``, ``launch`` (queue,
host, port, auth), and ``serve``, which runs the app until SIGINT/SIGTERM and
then shuts down within ``SHUTDOWN_BUDGET_S`` (``shutdown``: in-flight LLM work
stops, the export folder goes, the process exits even if a library thread
lingers). Right after launch it warms the engine in the background
(``ui.warmup``), the page saying so until the models are loaded. The layout
is ``ui.app``; nothing here runs at import.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import socket
import sys
import threading
import time
from typing import Any

import gradio as gr

from rag.api import EngineAPI
from rag.config import Settings, get_settings, setup_offline_env
from rag.errors import AqaError
from rag.llm import cancel_all, reset_cancel_all
from ui import render
from ui.app import build_app
from ui.export import cleanup_exports
from ui.warmup import Warmup


def check_port(host: str, port: int) -> None:
    """Raise a one-line ``AqaError`` when ``host:port`` can't be bound (in use)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return  # an unknown host: let the server report it
    family, _, _, _, addr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        try:
            sock.bind(addr)
        except OSError as e:
            raise AqaError(
                f"Port {port} on {host} is already in use ({e.strerror or e}): stop the other "
                f"server, or pick a free port with `aqa serve --port {port + 1}` (or AQA_PORT)."
            ) from None


def launch(app: gr.Blocks, settings: Settings, *, port: int | None = None,
           block: bool = True) -> None:
    """Queue + launch with the configured host, port and optional auth.

    Queue: answers and comparisons run ``settings.llm_concurrency`` at a time
    (their own limits, set on those events); every other event (search,
    browsing, exports) runs up to ``settings.ui.ui_workers`` at once, in its own
    group, so none of them waits behind LLM generation.
    """
    auth = None
    if settings.ui.auth_user and settings.ui.auth_password:
        auth = (settings.ui.auth_user, settings.ui.auth_password)
    port = port if port is not None else settings.ui.port
    check_port(settings.ui.host, port)
    app.queue(default_concurrency_limit=max(1, settings.ui.ui_workers),
              max_size=settings.ui.ui_queue_size)
    try:
        app.launch(
            server_name=settings.ui.host,
            server_port=port,
            auth=auth,
            prevent_thread_lock=not block,
            show_error=False,
            share=False,
            inbrowser=False,
            ssr_mode=False,
            mcp_server=False,
            footer_links=["api"],
            css=render.CSS,
            head=render.JS,  # clickable [n], Save toggles, topic-map clicks
            quiet=not block,
        )
    except OSError as e:  # lost a race for the port, or a bad host
        raise AqaError(f"Cannot serve on {settings.ui.host}:{port}: {e}. Pick another port with "
                       "`aqa serve --port N` (or AQA_PORT) or another AQA_HOST.") from None


SHUTDOWN_BUDGET_S = 1.8  # SIGINT/SIGTERM to process exit, at most


def shutdown(app: gr.Blocks | None) -> None:
    """Stop serving now: abandon in-flight LLM work at its next token, remove
    the export folder, then close the server without waiting for open
    connections (bounded, in a helper thread)."""
    cancel_all()
    cleanup_exports()
    if app is None:
        return
    server = getattr(app, "server", None)
    if server is not None:
        # uvicorn: open event streams (queued or streaming answers) are cancelled
        # after 0.5 s instead of being awaited, then the app's shutdown runs
        # (Gradio removes its file cache); its "cancel N tasks" log is expected.
        server.config.timeout_graceful_shutdown = 0.5
        logging.getLogger("uvicorn.error").setLevel(logging.CRITICAL)
    closer = threading.Thread(target=app.close, kwargs={"verbose": False},
                              name="aqa-close", daemon=True)
    closer.start()
    closer.join(timeout=1.2)


def serve(settings: Settings | None = None, engine: EngineAPI | None = None, *,
          stop: threading.Event | None = None) -> int:
    """Run the app until SIGINT or SIGTERM (ingests the configured corpus if
    the index is empty, so the first run works on the bundled corpus), or
    until ``stop`` is set (then it returns 0). Right after launch a
    background thread warms the engine (``ui.warmup.Warmup``: the models and
    the retriever's snapshot), so the first question is not the slowest.

    On either signal it shuts down within ``SHUTDOWN_BUDGET_S``: running
    answers stop at their next token, the export folder is removed, and the
    process exits even if some library thread would keep it alive. Returns
    the exit status (130 after SIGINT, 0 after SIGTERM).
    """
    setup_offline_env()  # offline hubs, no telemetry: before the engine loads its models
    reset_cancel_all()  # a server started again in this process may answer again
    settings = settings or (engine.settings if engine is not None else get_settings())
    main = threading.current_thread() is threading.main_thread()
    caught: list[int] = []
    stop = stop or threading.Event()

    def interrupt(signum: int, _frame: Any) -> None:  # before the app runs: like Ctrl-C
        raise KeyboardInterrupt

    def on_signal(signum: int, _frame: Any) -> None:
        if caught:  # a second signal: don't wait any longer
            os._exit(128 + signum)
        caught.append(signum)
        stop.set()

    if main:
        signal.signal(signal.SIGTERM, interrupt)
    if engine is None:
        from rag.engine import Engine

        engine = Engine(settings)
    if engine.status().papers == 0:
        print("Indexing the corpus (the first run embeds every abstract once)…", flush=True)
        rep = engine.ingest(progress=True)
        print(f"Indexed {rep.papers_total} papers.", flush=True)
    warmup = Warmup()
    app = build_app(engine, settings, warmup=warmup)
    if main:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, on_signal)
    try:
        launch(app, settings, block=False)  # a port in use ends here, in one line
        print(f"abstracts-qa is running on http://{settings.ui.host}:{app.server_port} "
              "(Ctrl-C to stop)", flush=True)
        warmup.start(engine)  # the page says "Loading the models…" until it is done
        while not stop.wait(0.2):
            pass
    except KeyboardInterrupt:
        caught.append(signal.SIGINT)
    finally:
        t_signal = time.monotonic()
        code = 130 if not caught or caught[0] == signal.SIGINT else 0
        if caught:
            # Whatever a library thread does meanwhile, the process ends in time.
            watchdog = threading.Timer(SHUTDOWN_BUDGET_S, _hard_exit, args=(code,))
            watchdog.daemon = True
            watchdog.start()
            print("Shutting down…", flush=True)
        shutdown(app)
        if caught:
            _exit_now(code, deadline=t_signal + SHUTDOWN_BUDGET_S)
    return 130 if caught and caught[0] == signal.SIGINT else 0


def _exit_now(code: int, deadline: float) -> None:
    """End the process after a signal: run the atexit handlers (bounded by
    ``deadline``), then exit without the interpreter's slow teardown of
    torch/chroma/gradio threads, which measured 2-4 s."""
    runner = threading.Thread(target=atexit._run_exitfuncs, name="aqa-atexit", daemon=True)
    runner.start()
    runner.join(timeout=max(0.0, deadline - time.monotonic()))
    _hard_exit(code)


def _hard_exit(code: int) -> None:
    cleanup_exports()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
