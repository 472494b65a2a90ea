"""Chunking: what one paper becomes in the index. Sentence-boundary chunks
(LlamaIndex ``SentenceSplitter``), the text embedded for each, its stable id
and its Chroma metadata. ``rag.index`` writes them; ``rag.retrieve`` and the
benchmarks embed queries and texts the same way.
"""

from __future__ import annotations

from rag.config import Settings
from rag.types import Paper


class Chunker:
    """Sentence-boundary chunks of at most ``chunk_tokens`` tiktoken tokens
    (LlamaIndex SentenceSplitter). 128 tiktoken tokens stay well under
    MiniLM's 256 word-piece limit even for symbol-heavy abstracts."""

    def __init__(self, settings: Settings) -> None:
        from llama_index.core.node_parser import SentenceSplitter

        self._splitter = SentenceSplitter(
            chunk_size=settings.corpus.chunk_tokens, chunk_overlap=settings.corpus.chunk_overlap
        )

    def split(self, text: str) -> list[str]:
        return [c.strip() for c in self._splitter.split_text(text) if c.strip()]


def embed_text(paper: Paper, chunk: str) -> str:
    """What gets embedded and BM25-indexed: a real title adds signal; a label
    derived from the abstract itself adds none."""
    return chunk if paper.title_derived else f"{paper.title}. {chunk}"


def chunk_id(paper: Paper, h: str, i: int) -> str:
    # Content hash in the id: a changed abstract gets fresh ids, so the old
    # chunks can be deleted only after the new ones are committed.
    return f"{paper.paper_id}::{h[:12]}::{i}"


def chunk_metadata(paper: Paper, idx: int) -> dict:
    # Chroma metadata values cannot be None: leave missing fields out.
    m: dict = {"paper_id": paper.paper_id, "source": paper.source, "idx": idx}
    if paper.venue:
        m["venue"] = paper.venue
    if paper.year:
        m["year"] = int(paper.year)
    return m
