"""Every download the UI offers: a conversation as Markdown / JSON, its cited
papers as BibTeX, a comparison table as Markdown / CSV, and the saved-paper
list as BibTeX / CSV / Markdown.

``conversation_markdown``, ``conversation_json``, ``bibtex``,
``comparison_markdown``, ``comparison_csv``, ``saved_csv`` and
``saved_markdown`` return the file content (tested directly);
``write_export`` writes it to a fresh file under the process's one export
folder (``exports_root``, removed by ``cleanup_exports``) for a Gradio download.
Every export is safe to open even when abstracts or titles carry hostile
text (issue 8): Markdown escapes HTML and drops ``javascript:``/``data:``
links, CSV cells that a spreadsheet would run as a formula are prefixed with
a quote (OWASP CSV injection), and BibTeX escapes its own syntax. JSON is
data and is kept verbatim.
"""

from __future__ import annotations

import atexit
import csv
import html
import io
import json
import re
import shutil
import tempfile
import threading
import unicodedata
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path

from rag.types import ASPECT_LABELS, ASPECTS, Answer, Comparison, Paper


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


# ------------------------------------------------------------------- safety

# A Markdown link or image whose target uses a scheme that runs code or embeds
# content; whitespace and control characters inside the scheme are ignored by
# browsers, so they are ignored here too.
_GAP = r"[\s\x00-\x1f]*"
_SCHEME = "|".join(_GAP.join(word) for word in ("javascript", "vbscript", "data"))
_BAD_LINK = re.compile(r"(!?)\[([^\]]*)\]\(\s*<?" + _GAP + "(?:" + _SCHEME + ")" + _GAP
                       + r":[^)]*\)", re.IGNORECASE)
_BAD_REF = re.compile(r"^(\s*\[[^\]]*\]:\s*)<?" + _GAP + "(?:" + _SCHEME + ")" + _GAP + ":.*$",
                      re.IGNORECASE | re.MULTILINE)


def _md_text(text: str | None) -> str:
    """Text from the corpus or the model, safe inside a Markdown file: HTML is
    escaped (so ``<script>`` shows as text, never runs) and links to
    ``javascript:``/``data:``/``vbscript:`` targets are reduced to their text."""
    text = html.escape(text or "", quote=False)
    text = _BAD_LINK.sub(lambda m: f"{m.group(2)} (link removed)", text)
    return _BAD_REF.sub(lambda m: f"{m.group(1)}(link removed)", text)


def _md_line(text: str | None) -> str:
    """``_md_text`` on one line (a newline could start a heading or a list)."""
    return " ".join(_md_text(text).split())


def _safe_url(url: str | None) -> str | None:
    """Only http(s) URLs are exported; anything else is dropped."""
    u = (url or "").strip()
    return u if re.match(r"https?://", u, re.IGNORECASE) and not re.search(r"\s", u) else None


_CSV_TRIGGERS = ("=", "+", "-", "@", "\t", "\r", "\n")


def csv_cell(value: object) -> str:
    """A CSV cell that spreadsheets show as text, never run as a formula:
    cells starting with ``= + - @``, tab or CR (also after leading spaces) get
    a leading single quote, as OWASP recommends against CSV injection."""
    text = "" if value is None else str(value)
    if text.startswith(_CSV_TRIGGERS) or text.lstrip(" ").startswith(_CSV_TRIGGERS):
        return "'" + text
    return text


def paper_line(p: Paper) -> str:
    """One Markdown line naming a paper (escaped; only http(s) URLs kept)."""
    bits = [_md_line(p.display_title)]
    if p.authors:
        bits.append(_md_line(", ".join(p.authors)))
    if p.venue or p.year:
        bits.append(_md_line(" ".join(str(x) for x in (p.venue, p.year) if x)))
    url = _safe_url(p.url)
    if url:
        bits.append(_md_line(url))
    return ". ".join(bits)


# -------------------------------------------------------------- conversation


def conversation_markdown(turns: Sequence[Answer]) -> str:
    out = ["# abstracts-qa conversation", "", f"_Exported {_now()}_", ""]
    for i, a in enumerate(turns, 1):
        out += [f"## Q{i}. {_md_line(a.question)}", ""]
        if a.standalone_question and a.standalone_question != a.question:
            out += [f"_Interpreted as:_ {_md_line(a.standalone_question)}", ""]
        if a.declined:
            reason = a.decline_reason or "the collection does not cover this."
            out += ["**Declined:** " + _md_line(reason), ""]
            if a.nearest:
                out += ["Nearest papers:", ""]
                out += [f"- {paper_line(h.paper)} (score {h.score:.2f})" for h in a.nearest]
                out.append("")
            continue
        out += [_md_text(a.text), ""]
        unsupported = [s.text for s in a.sentences if not s.supported]
        if unsupported:
            out += ["Unsupported sentences (no retrieved abstract backs them):", ""]
            out += [f"- {_md_line(s)}" for s in unsupported]
            out.append("")
        if a.citations:
            out += ["### Sources", ""]
            for c in a.citations:
                out.append(f"[{c.number}] {paper_line(c.paper)} (support {c.score:.2f})")
                out.append("")
                out.append("> " + _md_line(c.snippet))
                out.append("")
        out += [f"_Model: {_md_line(a.model)} · {a.timings.total_ms / 1000:.1f} s_", ""]
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
    # Backslashes first become a placeholder, so the braces of \textbackslash{}
    # are not escaped again by the special-character pass.
    text = text.replace("\x00", "").replace("\\", "\x00")
    text = _BIB_SPECIAL.sub(r"\\\1", text)
    text = text.replace("~", r"\textasciitilde{}").replace("^", r"\textasciicircum{}")
    return text.replace("\x00", r"\textbackslash{}")


def _ascii_word(text: str) -> str:
    norm = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^A-Za-z0-9]", "", norm)


def _unique(base: str, used: set[str]) -> str:
    key, n = base, 1
    while key in used:
        n += 1
        key = f"{base}{n}"
    used.add(key)
    return key


def _bib_key(p: Paper, used: set[str]) -> str:
    surname = _ascii_word(p.authors[0].split()[-1]) if p.authors else ""
    first = next((_ascii_word(w) for w in p.title.split() if len(_ascii_word(w)) > 3), "")
    return _unique((surname.lower() or "paper") + str(p.year or "") + first.lower(), used)


# PMLR's volumes (proceedings name, editors, dates) are data: rag/readers/pmlr_volumes.json.
PMLR_VOLUMES: dict[str, dict[str, object]] = json.loads(
    files("rag.readers").joinpath("pmlr_volumes.json").read_text(encoding="utf-8"))["volumes"]
_PMLR_PAGE = re.compile(r"^https?://proceedings\.mlr\.press/v(\d+)/([A-Za-z0-9_-]+)\.(?:html|pdf)$",
                        re.IGNORECASE)
_PMLR_PDF = re.compile(r"^https?://(?:raw\.githubusercontent\.com/mlresearch/v(\d+)/[^/]+/assets"
                       r"|proceedings\.mlr\.press/v(\d+))/(?:([A-Za-z0-9_-]+)/)?"
                       r"([A-Za-z0-9_-]+)\.pdf$", re.IGNORECASE)


def pmlr_ref(p: Paper) -> tuple[str, str] | None:
    """(volume, PMLR id) of a paper PMLR published, from its page URL
    (``https://proceedings.mlr.press/v267/zhu25z.html``) or its PDF link; else None."""
    m = _PMLR_PAGE.match((p.url or "").strip())
    if m:
        return m.group(1), m.group(2)
    m = _PMLR_PDF.match((p.links.get("pdf") or "").strip())
    if m:
        return m.group(1) or m.group(2), m.group(4)
    return None


def _clean_url(url: str) -> str:
    return url.replace("}", "").replace("{", "").replace("\\", "")


def _bib_fields(p: Paper) -> tuple[str, str | None, list[tuple[str, str]]]:
    """(entry type, PMLR id or None, fields in PMLR's order) for one paper.
    ``pages`` comes from the source (a PMLR post's ``page``, a sidecar's
    ``pages``); a paper without them gets none rather than a guess."""
    fields = [("title", "{" + _bib_value(p.title) + "}")]
    if p.authors:
        fields.append(("author", _bib_value(" and ".join(p.authors))))
    ref = pmlr_ref(p)
    if ref is None:
        if p.venue:
            fields.append(("booktitle", _bib_value(p.venue)))
        if p.year:
            fields.append(("year", str(p.year)))
        url = _safe_url(p.url)
        if url:
            fields.append(("url", _clean_url(url)))
        return ("inproceedings" if p.venue else "misc"), None, fields
    volume, pid = ref
    vol = PMLR_VOLUMES.get(volume, {})
    booktitle = str(vol.get("booktitle") or p.venue or "Proceedings of Machine Learning Research")
    fields.append(("booktitle", _bib_value(booktitle)))
    if p.pages:
        fields.append(("pages", _bib_value(p.pages)))
    year = p.year or vol.get("year")
    if year:
        fields.append(("year", str(year)))
    if vol.get("editor"):
        fields.append(("editor", _bib_value(str(vol["editor"]))))
    fields += [("volume", volume), ("series", "Proceedings of Machine Learning Research")]
    if vol.get("month"):
        fields.append(("month", _bib_value(str(vol["month"]))))
    fields.append(("publisher", "PMLR"))
    pdf = _safe_url(p.links.get("pdf"))
    if pdf:
        fields.append(("pdf", _clean_url(pdf)))
    fields.append(("url", f"https://proceedings.mlr.press/v{volume}/{pid}.html"))
    return "inproceedings", pid, fields


def bibtex(papers: Sequence[Paper]) -> str:
    """BibTeX for papers with a real title (derived labels are skipped: they
    are not citable titles). A paper PMLR published (its URL or PDF names the
    volume and id) gets PMLR's own entry: key = its PMLR id, the proceedings'
    name, editors and dates for a volume in ``PMLR_VOLUMES``, volume, series,
    publisher, pdf and url; any other paper an ``@inproceedings`` (a venue is
    known) or ``@misc`` from its authors, venue, year and url."""
    used: set[str] = set()
    entries, skipped = [], []
    for p in papers:
        if p.title_derived or not p.title.strip():
            skipped.append(p.paper_id)
            continue
        kind, pid, fields = _bib_fields(p)
        key = _unique(pid, used) if pid else _bib_key(p, used)
        body = ",\n".join(f"  {k} = {{{v}}}" for k, v in fields)
        entries.append(f"@{kind}{{{key},\n{body}\n}}")
    text = "\n\n".join(entries)
    if skipped:
        text += ("\n\n" if text else "") + (
            "% Skipped (no known title, only a derived label): " + ", ".join(skipped)
        )
    return text + "\n"


# ------------------------------------------------------------------ compare


def _md_cell(text: str) -> str:
    return _md_line(text.replace("\\", "\\\\").replace("|", "\\|"))


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
    out += ["", "## Synthesis", "", _md_text(cmp.synthesis), "", "## Papers", ""]
    out += [f"[{i}] {paper_line(p)}" for i, p in enumerate(cmp.papers, 1)]
    return "\n".join(out) + "\n"


def comparison_csv(cmp: Comparison) -> str:
    """Tidy CSV: one paper per row, one aspect per column (the cell's statement;
    the full quotes are in the Markdown export)."""
    buf = io.StringIO()
    raw = csv.writer(buf)

    def row(cells: Sequence[object]) -> None:
        raw.writerow([csv_cell(c) for c in cells])

    row(["n", "paper", "paper_id", *[ASPECT_LABELS[a] for a in ASPECTS]])
    for n, p in enumerate(cmp.papers, 1):
        cells = [cmp.cells.get(p.paper_id, {}).get(a) for a in ASPECTS]
        row([n, p.display_title, p.paper_id,
             *[c.text if c and c.stated else "not stated" for c in cells]])
    return buf.getvalue()


# -------------------------------------------------------------- saved list


def saved_csv(papers: Sequence[Paper]) -> str:
    """The saved list as CSV: one paper per row (cells neutralised by ``csv_cell``)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["paper_id", "title", "title_derived", "authors", "venue", "year", "source",
                "url", "abstract"])
    for p in papers:
        w.writerow([csv_cell(v) for v in (
            p.paper_id, p.title, p.title_derived, "; ".join(p.authors), p.venue or "",
            p.year or "", p.source, p.url or "", p.abstract)])
    return buf.getvalue()


def saved_markdown(papers: Sequence[Paper]) -> str:
    """The saved list as Markdown, one escaped ``paper_line`` each."""
    out = ["# Saved papers", ""]
    out += [f"{i}. {paper_line(p)}" for i, p in enumerate(papers, 1)]
    return "\n".join(out) + "\n"


# -------------------------------------------------------------------- files

_exports: Path | None = None
_exports_lock = threading.Lock()


def exports_root() -> Path:
    """This process's one ``aqa-exports-*`` temp folder, made on first use;
    ``cleanup_exports`` removes it (registered with atexit once, and called
    by ``ui.server`` on SIGINT/SIGTERM)."""
    global _exports
    with _exports_lock:
        if _exports is None or not _exports.is_dir():
            first = _exports is None
            _exports = Path(tempfile.mkdtemp(prefix="aqa-exports-"))
            if first:
                atexit.register(cleanup_exports)
        return _exports


def cleanup_exports() -> None:
    """Remove the export folder (idempotent; a later export makes a new one)."""
    with _exports_lock:
        root = _exports
    if root is not None:
        shutil.rmtree(root, ignore_errors=True)


def write_export(content: str, stem: str, suffix: str, directory: Path | None = None) -> str:
    """Write ``content`` to a new file named ``<stem>-<time><suffix>`` in
    ``directory`` (default: a fresh folder under ``exports_root``, so two
    sessions' downloads never clash); return its path."""
    directory = directory or Path(tempfile.mkdtemp(dir=exports_root()))
    directory.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    path = directory / f"{stem}-{stamp}{suffix}"
    path.write_text(content, encoding="utf-8")
    return str(path)
