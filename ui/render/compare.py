"""Compare rendering (re-exported by ``ui.render``): the aspect-by-paper
comparison table with each cell's verbatim quote, and the synthesis with its
unsupported or withdrawn sentences flagged.
"""

from __future__ import annotations

from rag.text import clean_latex
from rag.types import (
    ASPECT_LABELS,
    ASPECTS,
    Comparison,
)
from ui.render.base import (
    _abstract_details,
    _authors,
    esc,
    html_model_text,
    paper_heading,
    strip_markers,
)


def _synthesis_html(cmp: Comparison) -> str:
    if cmp.synthesis_sentences:
        parts = []
        for s in cmp.synthesis_sentences:
            body = html_model_text(strip_markers(s.text)) + "".join(
                f' <span class="aqa-num">[{n}]</span>' for n in s.citations
            )
            if getattr(s, "withdrawn", False):
                reason = esc(getattr(s, "withdrawn_reason", None) or "failed a check")
                body = f'<s>{body}</s> <em class="aqa-withdrawn">(withdrawn: {reason})</em>'
            elif not s.supported:
                body = f'<span class="aqa-unsupported" title="not supported by the abstracts">⚠️ {body}</span>'
            parts.append(body)
        return " ".join(parts)
    return html_model_text(cmp.synthesis)


def comparison_html(cmp: Comparison) -> str:
    """The comparison table: one column per paper, one row per aspect; each
    cell's verbatim quote on hover (title) and on click (<details>)."""
    head = "".join(
        f'<th><span class="aqa-num">[{i}]</span> {paper_heading(p)}'
        + (f'<div class="aqa-authors">{esc(_authors(p, 3))}</div>' if p.authors else "")
        + "</th>"
        for i, p in enumerate(cmp.papers, 1)
    )
    # Narrow screens stack the table: each cell then shows its paper's name.
    names = {p.paper_id: f"[{i}] {p.title}" for i, p in enumerate(cmp.papers, 1)}
    rows = []
    for aspect in ASPECTS:
        cells = []
        for p in cmp.papers:
            cell = cmp.cells.get(p.paper_id, {}).get(aspect)
            if cell is None or not cell.stated:
                text = cell.text if cell and cell.text else "Not stated"
                cells.append(f'<td class="aqa-not-stated" data-paper="{esc(names[p.paper_id])}">'
                             f"{esc(text)}</td>")
                continue
            quote = clean_latex(cell.quote or "")
            cells.append(
                f'<td title="{esc(quote)}" data-paper="{esc(names[p.paper_id])}">'
                f"{esc(clean_latex(cell.text))}"
                f'<details class="aqa-quote"><summary>full sentence</summary>'
                f"<q>{esc(quote)}</q></details></td>"
            )
        rows.append(f'<tr><th scope="row">{esc(ASPECT_LABELS[aspect])}</th>{"".join(cells)}</tr>')
    abstracts = "".join(f'<td data-paper="{esc(names[p.paper_id])}">{_abstract_details(p)}</td>'
                        for p in cmp.papers)
    rows.append(f'<tr><th scope="row">Abstract</th>{abstracts}</tr>')
    return (
        '<div class="aqa-compare">'
        f'<table><thead><tr><th>Aspect</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
        f'<div class="aqa-synthesis"><h4>Synthesis</h4><p>{_synthesis_html(cmp)}</p></div>'
        f'<div class="aqa-meta">model {esc(cmp.model)} · {cmp.timings.total_ms / 1000:.1f} s</div>'
        "</div>"
    )
