"""Engine: the one API that the CLI, the Gradio UI and the evals call.

It wires corpus loading, the index, hybrid retrieval, the LLM and answer
checking together; models load lazily, once, on first use.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from rag import topics
from rag.answer.pipeline import Answerer
from rag.attribution import Attributor
from rag.compare import extract_cells, synthesis_notes, synthesize
from rag.config import Settings, get_settings
from rag.corpus import provenance_id
from rag.embed import CachedEmbedder, EmbeddingCache, embed_model_name, make_embed_model
from rag.errors import AqaError, EmptyIndexError, LLMError, PaperNotFoundError
from rag.index import VectorIndex
from rag.llm import LLM, make_llm
from rag.prompts import render
from rag.retrieve import HybridRetriever
from rag.store import writable
from rag.text import name_markers, short_title
from rag.topics import TopicMap
from rag.types import (
    Answer,
    Comparison,
    CorpusStatus,
    Filters,
    IngestReport,
    Paper,
    SearchHit,
    SearchResults,
    StreamEvent,
    Timings,
)

log = logging.getLogger(__name__)
EXAMPLE_TOPIC_MAX_SHARE = 0.4  # a topic holding more of the corpus is a catch-all, not a topic
# A short name a researcher would type: one or two words with an inner capital,
# an acronym or a digit ("ShieldAgent", "MELON", "CoCoA-Mix", "LLaVA-ReID").
_SYSTEM_NAME = re.compile(r"(?=.*(?:[a-z][A-Z]|[A-Z]{2}|\d))[A-Za-z0-9][\w\-]*(?: [\w\-]+)?")


def _system_name(name: str) -> bool:
    return len(name) <= 24 and bool(_SYSTEM_NAME.fullmatch(name))
History = Sequence[dict]  # [{"role": "user"|"assistant", "content": str}, ...]


class Engine:
    """Usage::

        eng = Engine()                 # settings from env/.env
        eng.ingest()                   # bundled corpus; idempotent
        hits = eng.search("prompt injection defenses", k=5)
        ans = eng.ask("Which papers defend agents against prompt injection?")
        for ev in eng.ask_stream(q, history=[...]): ...
        cmp = eng.compare(["ShieldAgent", "paper-id-2"])
    """

    def __init__(self, settings: Settings | None = None, *, llm: LLM | None = None,
                 embed_model=None, create: bool = True) -> None:
        """``llm``: an object with the ``rag.llm.LLM`` protocol (tests pass a
        fake); ``None`` builds the configured one lazily on first use.
        ``create=False`` (read-only commands): a missing data dir is an error,
        not silently created."""
        self.settings = settings or get_settings()
        if not create and not self.settings.storage.data_dir.is_dir():
            raise EmptyIndexError(
                f"No index at {self.settings.storage.data_dir} (the folder does not exist): "
                "run `aqa ingest` first, or pass the --data-dir of an existing index."
            )
        data_dir = self.settings.storage.data_dir
        # An existing folder this process cannot write (a shared read-only
        # index): searching and answering work, ingest says why it cannot.
        self.read_only = data_dir.is_dir() and not writable(data_dir)
        if not self.read_only:
            data_dir.mkdir(parents=True, exist_ok=True)
        self._llm = llm
        self._embed_model = embed_model
        self._embedder: CachedEmbedder | None = None
        # Separate locks: loading the 1 GB LLM never blocks the first search.
        self._embed_lock = threading.Lock()
        self._llm_lock = threading.Lock()
        # A model passed in (tests, benchmarks) is recorded under its own name.
        self.embed_name = embed_model.model_name if embed_model else embed_model_name(self.settings)
        self.index = VectorIndex(self.settings, self._get_embedder, read_only=self.read_only)
        self.retriever = HybridRetriever(self.settings, self.index, _LazyEmbedder(self))
        self.attributor = Attributor(_LazyEmbedder(self), self.settings.answer.support_threshold)
        self.answerer = Answerer(self.settings, self.retriever, self._get_llm, _LazyEmbedder(self))

    # --- lazy parts ---
    def _get_embedder(self) -> CachedEmbedder:
        with self._embed_lock:
            if self._embedder is None:
                model = self._embed_model or make_embed_model(self.settings)
                cache = EmbeddingCache(self.settings.storage.data_dir / "embed_cache.sqlite",
                                       read_only=self.read_only)
                self._embedder = CachedEmbedder(model, self.embed_name, cache,
                                                query_cache=self.settings.embeddings.embed_query_cache)
            return self._embedder

    def _get_llm(self) -> LLM:
        with self._llm_lock:
            if self._llm is None:
                self._llm = make_llm(self.settings)
            return self._llm

    def warm(self, llm: bool = True) -> None:
        """Load the models now, so the first question's timings are honest."""
        self._ready()
        self._get_embedder().embed_query("warm up")
        if llm:
            load = getattr(self._get_llm(), "load", None)  # e.g. LocalLLM: the GGUF
            if callable(load):
                load()

    def warm_llm_in_background(self) -> threading.Thread:
        """Start loading the LLM on a thread and return it: the CLI searches
        and checks evidence meanwhile, and the first token waits only for
        what is left of the load (``_get_llm`` holds its lock while loading)."""
        def load() -> None:
            try:
                loader = getattr(self._get_llm(), "load", None)
                if callable(loader):
                    loader()
            except Exception:  # the answer path reports a broken model itself
                log.debug("background LLM load failed", exc_info=True)

        t = threading.Thread(target=load, name="aqa-llm-load", daemon=True)
        t.start()
        return t

    @property
    def llm_name(self) -> str:
        if self._llm is not None:
            return self._llm.name
        s = self.settings.llm
        if s.resolved_provider == "openai":
            return f"openai:{s.openai_model}"
        return f"local:{s.local_model_path.name if s.local_model_path else s.local_model}"

    def _ready(self) -> None:
        self.index.check_model(self.embed_name)
        if self.index.catalog.counts()[0] == 0:
            raise EmptyIndexError(
                f"No papers indexed in {self.settings.storage.data_dir}: run `aqa ingest` first."
            )

    # --- corpus ---
    def ingest(self, paths: Sequence[Path | str] | None = None, *, prune: bool = False,
               rebuild: bool = False, progress: bool = True) -> IngestReport:
        """Load, chunk, embed and index; unchanged papers cost nothing."""
        paths = list(paths) if paths else list(self.settings.corpus.corpus_paths)
        report = self.index.ingest(paths, model_name=self.embed_name, prune=prune,
                                   rebuild=rebuild, progress=progress)
        topics.at_ingest(self.index, self.embed_name)  # topic map: once, cached
        return report

    def topic_map(self) -> TopicMap:
        """2-D map of the corpus with labelled clusters (cached per catalog state)."""
        return topics.ensure(self.index, self.embed_name)

    def papers(self, query: str | None = None, *, limit: int | None = None,
               filters: Filters | None = None, min_score: float | None = None) -> list[Paper]:
        """All papers (sorted by title), or those matching ``query`` by hybrid search,
        best first, without those scoring below ``min_score`` (the explorer's cut-off)."""
        if query and query.strip():
            hits = self.search(query, k=limit or 20, filters=filters, min_score=min_score)
            return [h.paper for h in hits]
        snap = self.retriever.snapshot()
        out = [p for p in snap.papers.values() if HybridRetriever.paper_ok(p, filters)]
        out.sort(key=lambda p: p.title.lower())
        return out[:limit] if limit else out

    def get_paper(self, ref: str) -> Paper:
        """Resolve an id, provenance key, title, paper name or (fuzzy) title to one paper."""
        papers = self.retriever.snapshot().papers
        ref = ref.strip()
        if ref in papers:
            return papers[ref]
        low = ref.lower()
        for p in papers.values():
            aliases = {provenance_id(v).lower() for v in p.provenance}
            aliases |= {v.key.lower() for v in p.provenance}
            if low in aliases or p.title.lower() == low:
                return p
        # A paper's name ("MELON" of "MELON: Provable Defense …", "MeCo" from its
        # abstract) names it when no other paper has that name.
        named = [p for p in papers.values() if p.name.lower() == low]
        if len(named) == 1:
            return named[0]
        from rapidfuzz import fuzz, process, utils

        choices = {pid: p.title for pid, p in papers.items()}
        best = process.extract(ref, choices, scorer=fuzz.WRatio, processor=utils.default_process, limit=3)
        if best and best[0][1] >= 85 and (len(best) == 1 or best[0][1] - best[1][1] >= 3):
            return papers[best[0][2]]
        hint = "; ".join(f"{papers[b[2]].title} ({b[2]})" for b in best)
        raise PaperNotFoundError(f"No paper matches '{ref}'. Closest: {hint}")

    def status(self) -> CorpusStatus:
        """What is indexed, with which models, and whether the index is healthy
        (a damaged index is reported, not raised)."""
        health = self.index.health()
        st = CorpusStatus(papers=0, chunks=0, sources={}, embed_model=self.embed_name,
                          llm_model=self.llm_name, last_ingest=None,
                          data_dir=str(self.settings.storage.data_dir),
                          health={"ok": health.ok, "catalog": health.catalog,
                                  "vectors": health.vectors, "problems": list(health.problems)})
        if health.catalog == "damaged":
            return st
        cat = self.index.catalog
        st.papers, st.chunks = cat.counts()
        st.sources = cat.source_counts()
        st.embed_model = cat.get_meta("embed_model") or self.embed_name
        st.last_ingest = cat.get_meta("last_ingest")
        return st

    def example_questions(self, n: int = 4) -> list[str]:
        """Questions that show what the tool does, drawn from the loaded corpus:
        a cross-paper question on one topic of the map, a comparison of two of
        its papers, and questions about single papers, each paper called by
        the short name researchers use (``Paper.name``: "MELON", "ShieldAgent")."""
        papers = sorted(self.retriever.snapshot().papers.values(), key=lambda p: p.paper_id)
        # Names a title starts with first ("MELON: …"): a reader recognises them.
        ranked = sorted(papers, key=lambda p: not p.title.startswith(p.name))
        named = {p.paper_id: p.name for p in ranked if _system_name(p.name)}
        in_title = {p.paper_id for p in papers if p.title.startswith(p.name)}
        by_cluster: dict[int, list[str]] = {}
        try:
            tmap = self.topic_map()
            for pt in tmap.points:
                if pt.paper_id in named:
                    by_cluster.setdefault(pt.cluster, []).append(pt.paper_id)
            clusters = {c.cluster: c for c in tmap.clusters}
        except AqaError:  # no map (an empty or odd index): single-paper questions only
            clusters = {}
        # A topic (not the catch-all: at most 40% of the corpus) and the pair of its
        # named papers closest on the map, preferring names their titles start
        # with: a cross-paper question and a comparison that make sense.
        cap = max(3, int(EXAMPLE_TOPIC_MAX_SHARE * len(papers)))
        xy = {pt.paper_id: (pt.x, pt.y) for pt in tmap.points} if clusters else {}

        def dist(uv: tuple[str, str]) -> float:
            (x0, y0), (x1, y1) = xy[uv[0]], xy[uv[1]]
            return (x0 - x1) ** 2 + (y0 - y1) ** 2

        options = []
        for c in clusters.values():
            members = by_cluster.get(c.cluster, [])
            if not 3 <= c.size <= cap or len(members) < 2:
                continue
            if sum(m in in_title for m in members) >= 2:
                members = [m for m in members if m in in_title]
            pairs = [(u, v) for i, u in enumerate(members) for v in members[i + 1:]]
            best = min(pairs, key=lambda uv: (dist(uv), uv))
            options.append((not (best[0] in in_title and best[1] in in_title), dist(best),
                            c.cluster, best))
        out: list[str] = []
        used: list[str] = []
        if options:
            *_, cluster, (a, b) = min(options)
            terms = [x for x in clusters[cluster].terms[:2] if x]
            if terms:
                out.append(f"Which papers work on {' and '.join(terms)}, and how do their "
                           "approaches differ?")
            out.append(f"How do {named[a]} and {named[b]} differ in approach and results?")
            used += [a, b]
        rest = [pid for pid in named if pid not in used]
        templates = ["What does {n} propose, and what results does it report?",
                     "Which datasets or benchmarks is {n} evaluated on?",
                     "What problem does {n} address?"]
        for i, pid in enumerate(rest):
            if len(out) >= n:
                break
            out.append(templates[i % len(templates)].format(n=named[pid]))
        for p in papers:  # a corpus without short names: its titles, as written
            if len(out) >= n:
                break
            out.append(f"What does “{short_title(p.title, 80)}” propose?")
        return out[:n]

    # --- retrieval / answers ---
    def search(self, query: str, *, k: int | None = None, filters: Filters | None = None,
               mode: str | None = None, min_score: float | None = None) -> SearchResults:
        """The top ``k`` papers for ``query``; with ``min_score``, those scoring
        below it are left out and counted (``below_min_score``)."""
        self._ready()
        hits = self.retriever.search(query, k=k, filters=filters, mode=mode)
        if min_score is None:
            return SearchResults(hits)
        kept = [h for h in hits if h.score >= min_score]
        return SearchResults(kept, below_min_score=len(hits) - len(kept))

    def ask(self, question: str, *, history: History = (), k: int | None = None,
            filters: Filters | None = None) -> Answer:
        answer = None
        for ev in self.ask_stream(question, history=history, k=k, filters=filters):
            if ev.kind == "answer":
                answer = ev.answer
        assert answer is not None
        return answer

    def ask_stream(self, question: str, *, history: History = (), k: int | None = None,
                   filters: Filters | None = None) -> Iterator[StreamEvent]:
        """Yields status and token events, then one ``answer`` event with the
        validated text, citations and timings."""
        if not question or not question.strip():
            raise AqaError("Ask a question first.")
        limit = self.settings.llm.max_question_chars  # a 200 kB question must not overflow the LLM
        if limit and len(question.strip()) > limit:
            n, question = len(question.strip()), question.strip()[:limit]
            yield StreamEvent("status", f"Note: your question is {n:,} characters long; only "
                              f"its first {limit:,} are used (AQA_MAX_QUESTION_CHARS).")
        self._ready()
        yield from self.answerer.stream(question.strip(), history=history, k=k, filters=filters)

    def compare(self, papers: Sequence[str] | None = None, *, query: str | None = None,
                progress: Callable[[str], None] | None = None) -> Comparison:
        """Compare 2-4 papers given by id/label/title, or selected by ``query``;
        ``progress`` receives a line per step (the CLI prints them)."""
        import time

        say = progress or (lambda _msg: None)
        t0 = time.perf_counter()
        self._ready()
        if papers:
            chosen = list(dict.fromkeys(self.get_paper(r).paper_id for r in papers))
            snap = self.retriever.snapshot()
            selected = [snap.papers[pid] for pid in chosen]
        elif query:
            say(f"Finding papers about “{query}”…")
            hits = self.retriever.search(query, k=4)
            top = hits[0].score if hits else 0.0
            selected = [h.paper for i, h in enumerate(hits) if i < 2 or h.score >= 0.6 * top]
        else:
            raise AqaError("Give 2 to 4 papers or a query to compare.")
        if not 2 <= len(selected) <= 4:
            raise AqaError(f"Compare needs 2 to 4 distinct papers; got {len(selected)}.")
        say(f"Extracting problem, approach, data, results and limitations of {len(selected)} papers…")
        cells = {p.paper_id: extract_cells(p) for p in selected}
        hits = [SearchHit(paper=p, score=1.0, rank=i) for i, p in enumerate(selected, 1)]
        timings = Timings(retrieval_ms=round((time.perf_counter() - t0) * 1000, 1))
        prompt = render("compare_synthesis", n=len(selected),
                        notes=synthesis_notes(selected, cells))
        try:
            llm = self._get_llm()
            say(f"Writing the synthesis with {llm.name}…")
            raw = []
            for piece in llm.stream_chat([{"role": "user", "content": prompt}],
                                         max_tokens=self.settings.llm.max_tokens,
                                         temperature=self.settings.llm.temperature):
                if timings.ttft_ms is None:
                    timings.ttft_ms = round((time.perf_counter() - t0) * 1000, 1)
                raw.append(piece)
            raw_text = name_markers("".join(raw), [h.paper.title for h in hits])
            synthesis, sentences = synthesize(selected, cells, raw_text,
                                              self.attributor.attribute, hits)
            model = llm.name
        except LLMError as e:
            sentences, synthesis, model = [], f"(Synthesis unavailable: {e})", "none"
        timings.total_ms = round((time.perf_counter() - t0) * 1000, 1)
        return Comparison(papers=selected, cells=cells, synthesis=synthesis,
                          synthesis_sentences=sentences, model=model, timings=timings)


class _LazyEmbedder:
    """Defers loading the embedding model until a query needs it."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def embed_query(self, text: str):
        return self._engine._get_embedder().embed_query(text)

    def embed_texts(self, texts):
        return self._engine._get_embedder().embed_texts(texts)
