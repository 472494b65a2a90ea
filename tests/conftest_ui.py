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

# The small local model keeps the suite fast; AQA_UI_TEST_MODEL=qwen2.5-coder-1.5b
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
def serving(engine, settings: Settings) -> Iterator[Server]:
    """The real Gradio app around ``engine``, on ``settings.ui.port``, in a background thread."""
    from ui.app import build_app
    from ui.server import launch

    app = build_app(engine, settings)
    launch(app, settings, port=settings.ui.port, block=False)
    try:
        yield Server(f"http://127.0.0.1:{settings.ui.port}/", engine, settings)
    finally:
        app.close()


@contextmanager
def running_app(work: Path, real_index_dir: Path, **overrides) -> Iterator[Server]:
    """The real app over a copy of the session index plus the planted JSONL,
    served on a free local port in a background thread."""
    from rag.engine import Engine

    planted_dir = work / "planted"
    planted_dir.mkdir(parents=True)
    (planted_dir / "planted.jsonl").write_text(json.dumps(PLANTED) + "\n", encoding="utf-8")
    data_dir = work / "idx"
    shutil.copytree(real_index_dir, data_dir)
    port = free_port()
    if TEST_MODEL == "smollm2-135m":
        # The 135M test model cannot judge evidence, and the product's decision
        # is fit on the default model's signals. These tests are about the UI:
        # they use the hand-set unit decision; the decision is tested with the
        # default model in test_answer_real.py.
        overrides.setdefault("decision_file", Path(__file__).resolve().parent / "decision_unit.json")
        overrides.setdefault("evidence_check", False)
    settings = Settings(
        _env_file=None, data_dir=data_dir, local_model=TEST_MODEL,
        corpus_paths=[BUNDLED_CORPUS, planted_dir], port=port, ui_timeout=240.0,
        **overrides,
    )
    engine = Engine(settings)
    report = engine.ingest(progress=False)
    assert not report.errors, report.errors
    with serving(engine, settings) as server:
        yield server


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


# ------------------------------------------------------------- fake engine

def _hash_vec(text: str, dim: int = 64):
    import hashlib
    import re

    import numpy as np

    v = np.zeros(dim, dtype=np.float32)
    for w in re.findall(r"[a-z]{4,}", text.lower()):
        v[int(hashlib.md5(w.encode()).hexdigest(), 16) % dim] += 1.0
    n = np.linalg.norm(v)
    return v / n if n else v


_TOPICS = {
    "diffusion": "diffusion models denoising score sampling image generation",
    "agents": "language agents tool use prompt injection safety policies",
    "graphs": "graph neural networks message passing node classification molecules",
    "optimization": "stochastic gradient descent convergence rates decentralized optimization",
    "reinforcement": "reinforcement learning policy reward exploration offline datasets",
    "theory": "generalization bounds sample complexity kernels theory",
}


def synthetic_papers(n: int) -> list:
    """``n`` papers spread over six topics, with metadata (two venues, three years)."""
    from rag.types import Paper, Provenance

    names = list(_TOPICS)
    out = []
    for i in range(n):
        t = names[i % len(names)]
        words = _TOPICS[t].split()
        abstract = (f"We study {words[0]} {words[1]} for problem {i}. Our method uses "
                    f"{words[2]} and {words[3]} to improve {words[4]}. Experiments on "
                    f"{words[5]} benchmarks show gains of {i % 17 + 3}% over baselines.")
        out.append(Paper(
            paper_id=f"syn-{i:05d}", abstract=abstract,
            title=f"{words[0].title()} {words[1]} study {i}", authors=[f"Author {i}", "Coauthor"],
            url=f"https://example.org/syn/{i}", venue="ICML" if i % 3 else "NeurIPS",
            year=2023 + i % 3, source="synthetic",
            provenance=[Provenance(f"synthetic/{i}.jsonl", 1, 1)]))
    return out


class FakeEngine:
    """Stand-in for ``rag.Engine`` implementing ``rag.api.EngineAPI`` (the same
    public methods and signatures: tests/test_ui_unit.py checks that), over given papers; answers
    are canned ``Answer`` objects, the topic map is the real ``rag.topics``
    computation over hashed bag-of-words vectors."""

    def __init__(self, papers: list, *, answer=None, settings: Settings | None = None,
                 delay: float = 0.0) -> None:
        self.settings = settings or Settings(_env_file=None, ui_timeout=30.0)
        self._papers = {p.paper_id: p for p in papers}
        self._answer = answer
        self.delay = delay
        self.calls: list[dict] = []
        self._tmap = None

    def papers(self, query=None, *, limit=None, filters=None, min_score=None):
        if query and query.strip():
            hits = self.search(query, k=limit or 20, filters=filters, min_score=min_score)
            return [h.paper for h in hits]
        out = sorted((p for p in self._papers.values() if self._ok(p, filters)),
                     key=lambda p: p.title.lower())
        return out[:limit] if limit else out

    @staticmethod
    def _ok(p, f) -> bool:
        if f is None:
            return True
        return ((not f.sources or p.source in f.sources) and (not f.venues or p.venue in f.venues)
                and (not f.years or p.year in f.years)
                and (not f.paper_ids or p.paper_id in f.paper_ids))

    def search(self, query, *, k=None, filters=None, mode=None, min_score=None):
        from rag.types import Passage, SearchHit, SearchResults

        q = set(w for w in query.lower().split() if len(w) > 3)
        scored = []
        for p in self._papers.values():
            if not self._ok(p, filters):
                continue
            words = set((p.title + " " + p.abstract).lower().replace(".", " ").split())
            score = len(q & words) / max(1, len(q))
            if score > 0:
                scored.append((score, p))
        scored.sort(key=lambda x: (-x[0], x[1].paper_id))
        hits = []
        for i, (sc, p) in enumerate(scored[: k or 5], 1):
            first = p.abstract.split(". ")[0] + "."
            hits.append(SearchHit(p, round(sc, 3), i, [Passage(f"{p.paper_id}#0", p.paper_id,
                                                                 first)]))
        kept = [h for h in hits if min_score is None or h.score >= min_score]
        return SearchResults(kept, below_min_score=len(hits) - len(kept))

    def get_paper(self, ref):
        return self._papers[ref]

    def status(self):
        from rag.types import CorpusStatus

        srcs: dict[str, int] = {}
        for p in self._papers.values():
            srcs[p.source] = srcs.get(p.source, 0) + 1
        return CorpusStatus(len(self._papers), len(self._papers), srcs, "fake-embed", "fake-llm",
                            None, str(self.settings.storage.data_dir))

    def example_questions(self, n=4):
        return ["Which papers study prompt injection?", "What do diffusion papers report?"][:n]

    def topic_map(self):
        import numpy as np

        from rag.topics import compute

        if self._tmap is None:
            ps = sorted(self._papers.values(), key=lambda p: p.paper_id)
            vecs = np.stack([_hash_vec(p.title + " " + p.abstract) for p in ps])
            self._tmap = compute([p.paper_id for p in ps], vecs,
                                 [p.title + ". " + p.abstract for p in ps], key="fake")
        return self._tmap

    def ask_stream(self, question, *, history=(), k=None, filters=None):
        import time

        from rag.types import StreamEvent

        self.calls.append({"question": question, "history": list(history), "k": k,
                           "filters": filters})
        yield StreamEvent("status", "Searching the abstracts…")
        answer = self._answer(question) if callable(self._answer) else self._answer
        if answer is None:
            raise RuntimeError("FakeEngine has no canned answer")
        yield StreamEvent("evidence", answer=answer)
        for s in answer.sentences:
            time.sleep(self.delay)
            yield StreamEvent("token", s.text + " ")
        yield StreamEvent("answer", answer=answer)

    def ask(self, question, *, history=(), k=None, filters=None):
        out = None
        for ev in self.ask_stream(question, history=history, k=k, filters=filters):
            if ev.kind == "answer":
                out = ev.answer
        return out

    def compare(self, papers=None, *, query=None, progress=None):
        from rag.compare import extract_cells
        from rag.types import Comparison, SentenceSupport, Timings

        self.calls.append({"papers": papers, "query": query})
        chosen = [self._papers[p] for p in (papers or [])][:4]
        cells = {p.paper_id: extract_cells(p) for p in chosen}
        sents = [SentenceSupport(f"{p.title} is paper {i}.", [i], 1.0, True, p.paper_id)
                 for i, p in enumerate(chosen, 1)]
        return Comparison(chosen, cells, " ".join(s.text for s in sents), sents, "fake-llm",
                          Timings(1, 2, 3))

    def ingest(self, paths=None, *, prune=False, rebuild=False, progress=True):
        from rag.types import IngestReport

        return IngestReport(papers_total=len(self._papers))


@contextmanager
def running_fake_app(engine: FakeEngine) -> Iterator[Server]:
    """The real app around a FakeEngine, served on a free local port."""
    with serving(engine, engine.settings.updated(port=free_port())) as server:
        yield server
