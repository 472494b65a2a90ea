"""Exports offered by the UI: a conversation as Markdown / JSON, its cited
papers as BibTeX, and a comparison table as Markdown / CSV.

Each ``*_text`` function returns the file content (tested directly); each
``write_*`` helper writes it to a fresh temp file for a Gradio download.
Exports are plain data files, not rendered by the app, so text is not
HTML-escaped; only the target format's own syntax is escaped.
"""

from __future__ import annotations

import csv
import io
import json
import re
import tempfile
import unicodedata
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from rag.types import ASPECT_LABELS, ASPECTS, Answer, Comparison, Paper


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _paper_line(p: Paper) -> str:
    bits = [p.display_title]
    if p.authors:
        bits.append(", ".join(p.authors))
    if p.venue or p.year:
        bits.append(" ".join(str(x) for x in (p.venue, p.year) if x))
    if p.url:
        bits.append(p.url)
    return ". ".join(bits)


# -------------------------------------------------------------- conversation


def conversation_markdown(turns: Sequence[Answer]) -> str:
    out = ["# abstracts-qa conversation", "", f"_Exported {_now()}_", ""]
    for i, a in enumerate(turns, 1):
        out += [f"## Q{i}. {a.question}", ""]
        if a.standalone_question and a.standalone_question != a.question:
            out += [f"_Interpreted as:_ {a.standalone_question}", ""]
        if a.declined:
            out += ["**Declined:** " + (a.decline_reason or "the collection does not cover this."), ""]
            if a.nearest:
                out += ["Nearest papers:", ""]
                out += [f"- {_paper_line(h.paper)} (score {h.score:.2f})" for h in a.nearest]
                out.append("")
            continue
        out += [a.text, ""]
        unsupported = [s.text for s in a.sentences if not s.supported]
        if unsupported:
            out += ["Unsupported sentences (no retrieved abstract backs them):", ""]
            out += [f"- {s}" for s in unsupported]
            out.append("")
        if a.citations:
            out += ["### Sources", ""]
            for c in a.citations:
                out.append(f"[{c.number}] {_paper_line(c.paper)} (support {c.score:.2f})")
                out.append("")
                out.append("> " + c.snippet.replace("\n", " "))
                out.append("")
        out += [f"_Model: {a.model} · {a.timings.total_ms / 1000:.1f} s_", ""]
    return "\n".join(out).rstrip() + "\n"


def conversation_json(turns: Sequence[Answer]) -> str:
    doc = {"exported_at": _now(), "turns": [a.to_dict() for a in turns]}
    return json.dumps(doc, ensure_ascii=False, indent=2)


def cited_papers(turns: Sequence[Answer]) -> list[Paper]:
    """Distinct cited papers, in first-cited order."""
    seen: dict[str, Paper] = {}
    for a in turns:
        for c in a.citations:
            seen.setdefault(c.paper.paper_id, c.paper)
    return list(seen.values())


# ------------------------------------------------------------------- BibTeX

_BIB_SPECIAL = re.compile(r"([&%$#_{}])")


def _bib_value(text: str) -> str:
    text = text.replace("\\", r"\textbackslash{}")
    text = _BIB_SPECIAL.sub(r"\\\1", text)
    return text.replace("~", r"\textasciitilde{}").replace("^", r"\textasciicircum{}")


def _ascii_word(text: str) -> str:
    norm = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^A-Za-z0-9]", "", norm)


def _bib_key(p: Paper, used: set[str]) -> str:
    surname = _ascii_word(p.authors[0].split()[-1]) if p.authors else ""
    first = next((_ascii_word(w) for w in p.title.split() if len(_ascii_word(w)) > 3), "")
    base = (surname.lower() or "paper") + str(p.year or "") + first.lower()
    key, n = base, 1
    while key in used:
        n += 1
        key = f"{base}{n}"
    used.add(key)
    return key


def bibtex(papers: Sequence[Paper]) -> str:
    """BibTeX for papers with a real title (derived labels are skipped: they
    are not citable titles). Authors, venue, year, url when known."""
    used: set[str] = set()
    entries, skipped = [], []
    for p in papers:
        if p.title_derived or not p.title.strip():
            skipped.append(p.paper_id)
            continue
        fields = [("title", "{" + _bib_value(p.title) + "}")]
        if p.authors:
            fields.append(("author", _bib_value(" and ".join(p.authors))))
        if p.venue:
            fields.append(("booktitle", _bib_value(p.venue)))
        if p.year:
            fields.append(("year", str(p.year)))
        if p.url:
            fields.append(("url", p.url.replace("}", "").replace("{", "")))
        fields.append(("note", _bib_value(f"abstracts-qa id {p.paper_id}")))
        kind = "inproceedings" if p.venue else "misc"
        body = ",\n".join(f"  {k} = {{{v}}}" for k, v in fields)
        entries.append(f"@{kind}{{{_bib_key(p, used)},\n{body}\n}}")
    text = "\n\n".join(entries)
    if skipped:
        text += ("\n\n" if text else "") + (
            "% Skipped (no known title, only a derived label): " + ", ".join(skipped)
        )
    return text + "\n"


# ------------------------------------------------------------------ compare


def _md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()


def comparison_markdown(cmp: Comparison) -> str:
    titles = [f"[{i}] {p.display_title}" for i, p in enumerate(cmp.papers, 1)]
    out = [
        "# Paper comparison",
        "",
        "| Aspect | " + " | ".join(_md_cell(t) for t in titles) + " |",
        "|---|" + "---|" * len(titles),
    ]
    for aspect in ASPECTS:
        cells = []
        for p in cmp.papers:
            cell = cmp.cells.get(p.paper_id, {}).get(aspect)
            if cell is None or not cell.stated:
                cells.append("_not stated_")
            else:
                cells.append(f"{_md_cell(cell.text)} — “{_md_cell(cell.quote or '')}”")
        out.append(f"| {ASPECT_LABELS[aspect]} | " + " | ".join(cells) + " |")
    out += ["", "## Synthesis", "", cmp.synthesis, "", "## Papers", ""]
    out += [f"[{i}] {_paper_line(p)}" for i, p in enumerate(cmp.papers, 1)]
    return "\n".join(out) + "\n"


def comparison_csv(cmp: Comparison) -> str:
    """Wide CSV: one column per paper; a statement row and a quote row per aspect."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["aspect", *[p.display_title for p in cmp.papers]])
    w.writerow(["paper_id", *[p.paper_id for p in cmp.papers]])
    for aspect in ASPECTS:
        cells = [cmp.cells.get(p.paper_id, {}).get(aspect) for p in cmp.papers]
        w.writerow(
            [ASPECT_LABELS[aspect], *[c.text if c and c.stated else "not stated" for c in cells]]
        )
        w.writerow([f"{ASPECT_LABELS[aspect]} (quote)", *[(c.quote or "") if c else "" for c in cells]])
    w.writerow(["synthesis", cmp.synthesis, *[""] * (len(cmp.papers) - 1)])
    return buf.getvalue()


# -------------------------------------------------------------------- files


def write_export(content: str, stem: str, suffix: str, directory: Path | None = None) -> str:
    """Write ``content`` to a new file named ``<stem>-<time><suffix>``; return its path."""
    directory = directory or Path(tempfile.mkdtemp(prefix="aqa-export-"))
    directory.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    path = directory / f"{stem}-{stamp}{suffix}"
    path.write_text(content, encoding="utf-8")
    return str(path)
