"""Helpers shared by the slow UI tests (imported by test_ui_e2e / test_ui_api;
not a pytest conftest): a planted hostile abstract, launching the real app on
a free port, and headless Chromium driven by Playwright."""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from rag.config import BUNDLED_CORPUS, Settings

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "tests" / "artifacts"
SCREENSHOTS = REPO / "docs" / "screenshots"

PLANTED_ID = "planted-xss-1"
PLANTED_TITLE = "Robust HTML sanitisation for <b>scientific</b> text"
PLANTED_SCRIPT = "<script>alert(1)</script>"
PLANTED_IMG = "<img src=x onerror=alert(1)>"
PLANTED = {
    "id": PLANTED_ID,
    "title": PLANTED_TITLE,
    "authors": ["Mallory Example", "Trent Tester"],
    "venue": "TestConf",
    "year": 2025,
    "url": "https://example.org/planted",
    "abstract": (
        f"We study how research abstracts containing markup such as {PLANTED_SCRIPT} and "
        f"{PLANTED_IMG} must be displayed as literal text by reading interfaces. Our "
        "sanitisation benchmark measures escaping failures across twelve web renderers and "
        "finds that escaping before markdown conversion prevents every injected script from "
        "running."
    ),
}
# A question the small local model answers from the planted abstract alone.
PLANTED_QUESTION = (
    "What does the sanitisation benchmark of escaping failures across web renderers find?"
)

# The small local model keeps the suite fast; AQA_UI_TEST_MODEL=qwen2.5-1.5b
# re-takes the README screenshots with the default model.
TEST_MODEL = os.environ.get("AQA_UI_TEST_MODEL", "smollm2-135m")

CHROMIUM_ARGS = [
    "--no-sandbox", "--headless", "--disable-gpu", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    url: str
    engine: object
    settings: Settings


@contextmanager
def running_app(work: Path, real_index_dir: Path, **overrides) -> Iterator[Server]:
    """The real app over a copy of the session index plus the planted JSONL,
    served on a free local port in a background thread."""
    from rag.engine import Engine
    from ui.app import build_app, launch

    planted_dir = work / "planted"
    planted_dir.mkdir(parents=True)
    (planted_dir / "planted.jsonl").write_text(json.dumps(PLANTED) + "\n", encoding="utf-8")
    data_dir = work / "idx"
    shutil.copytree(real_index_dir, data_dir)
    port = free_port()
    settings = Settings(
        _env_file=None, data_dir=data_dir, local_model=TEST_MODEL,
        corpus_paths=[BUNDLED_CORPUS, planted_dir], port=port, ui_timeout=240.0,
        **overrides,
    )
    engine = Engine(settings)
    report = engine.ingest(progress=False)
    assert not report.errors, report.errors
    app = build_app(engine, settings)
    launch(app, settings, port=port, block=False)
    try:
        yield Server(f"http://127.0.0.1:{port}/", engine, settings)
    finally:
        app.close()


@dataclass
class Browser:
    context: object
    requests: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)


@contextmanager
def chromium() -> Iterator[Browser]:
    """Debian's /usr/bin/chromium, headless, with a fresh profile; records
    every request and every JS dialog (an alert would mean injected script ran)."""
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="aqa-chromium-")
    try:
        with sync_playwright() as p:
            ctx = p.chromium.launch_persistent_context(
                profile, executable_path="/usr/bin/chromium", headless=True,
                args=CHROMIUM_ARGS, viewport={"width": 1400, "height": 1000},
                accept_downloads=True,
            )
            b = Browser(ctx)
            ctx.on("request", lambda r: b.requests.append(r.url))

            def on_page(page) -> None:
                def on_dialog(d) -> None:
                    b.dialogs.append(d.message)
                    d.dismiss()

                page.on("dialog", on_dialog)

            ctx.on("page", on_page)
            try:
                yield b
            finally:
                ctx.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
