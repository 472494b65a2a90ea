"""What the engine's ``aqa`` commands print for people (``--json`` prints the
engine's ``to_dict()`` instead): search hits, an answer's evidence and its
synthesis with citations and timings, a comparison table, and ``aqa status``.
Printing only: ``rag.cli`` runs the commands and calls these.
"""

from __future__ import annotations

from rag.types import Answer, Comparison, SearchHit


def _print_hits(hits: list[SearchHit]) -> None:
    if not hits:
        print("No matching papers.")
    for h in hits:
        p = h.paper
        print(f"{h.rank}. {p.display_title}  [{p.paper_id}]  score={h.score:.3f}")
        if p.authors:
            print(f"   {', '.join(p.authors[:6])}{' et al.' if len(p.authors) > 6 else ''}")
        if p.url:
            print(f"   {p.url}")
        print(f"   “{h.snippet[:240]}”")


def _print_evidence(citations) -> None:
    """Each cited paper with its verbatim quotes: what the answer may say."""
    print("Evidence:")
    for c in citations:
        p = c.paper
        prov = p.provenance[0] if p.provenance else None
        where = f" — {prov.path}#{prov.ordinal} (line {prov.line})" if prov else ""
        print(f"[{c.number}] {p.display_title}{where}")
        if p.authors:
            print(f"    {', '.join(p.authors[:6])}{' et al.' if len(p.authors) > 6 else ''}")
        if p.url:
            print(f"    {p.url}")
        for quote in c.quotes or [c.snippet]:
            print(f"    “{quote}”")
        print(f"    answers the question: {c.relevance_words} ({c.relevance:.2f})")
    print()


def _print_answer(a: Answer, *, streamed: bool = False, evidence_shown: bool = False) -> None:
    """An answer, once, quotes first: the evidence (unless it was shown as
    soon as it was chosen), the synthesis (unless it was streamed), then
    withdrawn sentences, the papers the answer cites, and the timings."""
    if a.declined:
        if streamed:
            print()
        print(a.text)
        return
    if not evidence_shown and not streamed:
        _print_evidence(a.citations)
    if not streamed:
        body = [s.text + " " + "".join(f"[{n}]" for n in s.citations)
                for s in a.sentences if not s.withdrawn]
        if body:
            print("Answer: " + " ".join(body))
    else:
        print()
    for s in a.sentences:
        if s.withdrawn:
            print(f"Withdrawn: “{s.text}” ({s.withdrawn_reason})")
    cited = sorted({n for s in a.sentences if not s.withdrawn for n in s.citations})
    by_number = {c.number: c for c in a.citations}
    if cited:
        print("Cited: " + "; ".join(f"[{n}] {by_number[n].paper.display_title}"
                                    for n in cited if n in by_number))
    t = a.timings
    ttft = f"{t.ttft_ms / 1000:.1f}s" if t.ttft_ms else "-"
    ev = f"{t.evidence_ms / 1000:.1f}s" if t.evidence_ms else "-"
    print(f"\n({a.model}; retrieval {t.retrieval_ms:.0f} ms, evidence {ev}, first token {ttft}, "
          f"total {t.total_ms / 1000:.1f}s)")



def _print_comparison(c: Comparison) -> None:
    from rag.types import ASPECT_LABELS

    for n, p in enumerate(c.papers, 1):
        print(f"[{n}] {p.display_title} ({p.paper_id})")
        for aspect, label in ASPECT_LABELS.items():
            cell = c.cells[p.paper_id][aspect]
            print(f"    {label}: {cell.text if cell.stated else 'not stated'}")
    print(f"\nSynthesis: {c.synthesis}")



def status_text(st) -> str:
    """`aqa status` for people."""
    sources = ", ".join(f"{k} ({v})" for k, v in sorted(st.sources.items())) or "none"
    lines = [
        f"Index:       {st.data_dir}",
        f"Papers:      {st.papers} ({st.chunks} chunks)",
        f"Sources:     {sources}",
        f"Embeddings:  {st.embed_model}",
        f"LLM:         {st.llm_model}",
        f"Last ingest: {st.last_ingest or 'never'}",
    ]
    h = st.health or {}
    if h:
        lines.append(f"Health:      {'ok' if h.get('ok') else 'DAMAGED'}")
        lines.append(f"  catalog:   {h.get('catalog')}")
        lines.append(f"  vectors:   {h.get('vectors')}")
        lines += [f"  problem:   {p}" for p in h.get("problems") or []]
    if not st.papers and h.get("ok", True):
        lines.append("Nothing is indexed yet: run `aqa ingest`.")
    return "\n".join(lines)
