"""The metadata sidecar (data/icml2025/metadata.jsonl): real titles, authors and
links for the bundled seed abstracts, attached by content, never by position."""

from __future__ import annotations

import csv
import json
import random
import shutil
from pathlib import Path

import pytest

from rag.corpus import load_corpus, provenance_id
from rag.sidecar import fingerprint, normalise_text
from rag.types import Paper

REPO = Path(__file__).resolve().parents[1]
BUNDLED = REPO / "data" / "icml2025"
SIDECAR = BUNDLED / "metadata.jsonl"
MAP = REPO / "eval" / "distractors" / "seed_matches" / "MAP.tsv"
SHIELD_ID = "000_df6f3840f2208585-1"


def _entries() -> list[dict]:
    return [json.loads(ln) for ln in SIDECAR.read_text(encoding="utf-8").splitlines() if ln]


def _n_entries() -> int:
    """How many papers the sidecar covers: its own non-empty line count, so the
    tests follow the file as papers are added (the bundled set has 57)."""
    n = sum(1 for ln in SIDECAR.read_text(encoding="utf-8").splitlines() if ln.strip())
    assert 27 <= n <= 57
    return n


def _copy_bundled(dst: Path, *, sidecar: bool = True) -> Path:
    d = dst / "icml2025"
    d.mkdir(parents=True)
    for f in BUNDLED.glob("*.txt"):
        shutil.copy(f, d / f.name)
    if sidecar:
        shutil.copy(SIDECAR, d / SIDECAR.name)
    return d


@pytest.fixture(scope="module")
def loaded():
    return load_corpus([BUNDLED])


def test_sidecar_entries_are_well_formed_and_each_matches_one_bundled_abstract() -> None:
    entries = _entries()
    assert len(entries) == _n_entries()
    assert len({e["pmlr_id"] for e in entries}) == len(entries)
    abstracts = [
        ln.strip()
        for f in sorted(BUNDLED.glob("*.txt"))
        for ln in f.read_text(encoding="utf-8").split("\n")[1:]
        if ln.strip()
    ]
    assert len(abstracts) == 57
    for e in entries:
        assert e["venue"] == "ICML" and e["year"] == 2025
        assert e["url"] == f"https://proceedings.mlr.press/v267/{e['pmlr_id']}.html"
        assert e["pdf"].endswith(f"/{e['pmlr_id']}/{e['pmlr_id']}.pdf")
        assert e["source"].endswith(f"_posts/2025-10-06-{e['pmlr_id']}.md")
        assert e["authors"] and all(isinstance(a, str) and " " in a for a in e["authors"])
        assert len(e["match"]) >= 40
        hits = [a for a in abstracts if e["match"] in a]  # verbatim phrase of exactly one
        assert len(hits) == 1, e["pmlr_id"]
        assert fingerprint(hits[0]) == e["fingerprint"], e["pmlr_id"]


def test_sidecar_attaches_real_titles_and_authors_to_all_matched_papers(loaded) -> None:
    assert loaded.errors == [] and len(loaded.papers) == 57
    assert loaded.files == sorted(loaded.files) and len(loaded.files) == 3
    entries = {e["fingerprint"]: e for e in _entries()}
    titled = [p for p in loaded.papers if not p.title_derived]
    assert len(titled) == len(entries) == _n_entries()
    for p in loaded.papers:
        e = entries.get(fingerprint(p.abstract))
        if e is None:
            assert p.title_derived and not p.authors  # unmatched: derived label stays
            continue
        assert (p.title, p.authors, p.url) == (e["title"], e["authors"], e["url"])
        assert p.links["pdf"] == e["pdf"]
        assert p.links.get("openreview") == e.get("openreview")
        assert (p.venue, p.year, p.source) == ("ICML", 2025, "icml2025")
        assert p.paper_id == provenance_id(p.provenance[0])  # ids unchanged
    shield = next(p for p in loaded.papers if p.paper_id == SHIELD_ID)
    assert shield.title == "ShieldAgent: Shielding Agents via Verifiable Safety Policy Reasoning"
    assert shield.authors == ["Zhaorun Chen", "Mintong Kang", "Bo Li"]
    assert shield.links["openreview"] == "https://openreview.net/forum?id=DkRYImuQA9"


def test_sidecar_titles_agree_with_the_independent_seed_match_map(loaded) -> None:
    """MAP.tsv (eval/distractors) was made separately, by seed file + ordinal."""
    by_id = {p.paper_id: p for p in loaded.papers}
    with MAP.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    assert len(rows) == 21
    for r in rows:
        p = by_id[f"{Path(r['seed_file']).stem}-{r['ordinal']}"]
        assert p.title == r["title"] and p.url.endswith(f"/{r['pmlr_id']}.html")


def test_matching_is_by_content_when_seed_lines_are_reordered(tmp_path: Path, loaded) -> None:
    d = _copy_bundled(tmp_path)
    rng = random.Random(7)
    files = sorted(d.glob("*.txt"))
    lines = {f: f.read_text(encoding="utf-8").split("\n") for f in files}
    pool = [ln for f in files for ln in lines[f][1:] if ln.strip()]
    rng.shuffle(pool)  # move abstracts across files and positions
    for i, f in enumerate(files):
        chunk = pool[i * 19 : (i + 1) * 19]
        f.write_text(lines[f][0] + "\n\n" + "\n".join(chunk) + "\n", encoding="utf-8")
    res = load_corpus([d])
    assert res.errors == [] and len(res.papers) == 57
    want = {normalise_text(p.abstract): (p.title, p.authors) for p in loaded.papers
            if not p.title_derived}
    got = {normalise_text(p.abstract): (p.title, p.authors) for p in res.papers
           if not p.title_derived}
    assert got == want and len(got) == _n_entries()
    # positions really changed: most titled papers now sit at another file/ordinal
    old_id = {normalise_text(p.abstract): p.paper_id for p in loaded.papers}
    moved = [p for p in res.papers if old_id[normalise_text(p.abstract)] != p.paper_id]
    assert sum(not p.title_derived for p in moved) >= 20


def test_stale_entry_warns_with_sidecar_file_and_line(tmp_path: Path) -> None:
    d = _copy_bundled(tmp_path)
    f = d / "000_df6f3840f2208585.txt"
    lines = f.read_text(encoding="utf-8").split("\n")
    assert lines[2].startswith("Autonomous agents powered by foundation models")
    lines[2] = "A rewritten abstract about something else entirely, long enough to keep."
    f.write_text("\n".join(lines), encoding="utf-8")
    res = load_corpus([d])
    assert len(res.papers) == 57
    shield_line = 1 + next(i for i, e in enumerate(_entries()) if e["pmlr_id"] == "chen25ae")
    assert [(e.path, e.line) for e in res.errors] == [("icml2025/metadata.jsonl", shield_line)]
    assert "chen25ae" in res.errors[0].message and "derived label" in res.errors[0].message
    assert str(res.errors[0]).startswith(f"icml2025/metadata.jsonl:{shield_line}: ")
    changed = next(p for p in res.papers if p.paper_id == SHIELD_ID)
    assert changed.title_derived and changed.authors == [] and changed.url is None
    assert sum(not p.title_derived for p in res.papers) == _n_entries() - 1


def test_edited_abstract_still_matches_by_phrase_and_bad_lines_are_reported(
    tmp_path: Path,
) -> None:
    d = _copy_bundled(tmp_path)
    f = d / "001_56956e2e39a79281.txt"
    text = f.read_text(encoding="utf-8")
    entry = next(e for e in _entries() if e["pmlr_id"] == "ashutosh25a")
    assert entry["match"] in text
    f.write_text(text.replace(entry["match"], entry["match"] + " (typo fixed)", 1), "utf-8")
    side = d / "metadata.jsonl"
    rows = side.read_text(encoding="utf-8").splitlines()
    rows.insert(3, '{"title": "no content key"}')
    rows.insert(5, "{not json")
    side.write_text("\n".join(rows) + "\n", encoding="utf-8")
    res = load_corpus([d])
    assert [(e.path, e.line) for e in res.errors] == [
        ("icml2025/metadata.jsonl", 4),
        ("icml2025/metadata.jsonl", 6),
    ]
    assert sum(not p.title_derived for p in res.papers) == _n_entries()
    p = next(p for p in res.papers if p.title == "LLMs can see and hear without any training")
    assert fingerprint(p.abstract) != entry["fingerprint"]  # matched by its phrase


def test_seed_file_given_directly_uses_the_sidecar_next_to_it() -> None:
    res = load_corpus([BUNDLED / "003_bad92bb04107af15.txt"])
    assert res.errors == [] and len(res.papers) == 19
    titled = [p for p in res.papers if not p.title_derived]
    own = {fingerprint(p.abstract) for p in res.papers} & {e["fingerprint"] for e in _entries()}
    assert len(titled) == len(own) >= 10  # the 003 file's entries; the others are not warned about
    assert all(p.paper_id.startswith("003_bad92bb04107af15-") for p in res.papers)


def test_without_a_sidecar_ids_are_the_same_and_labels_are_derived(tmp_path: Path, loaded) -> None:
    res = load_corpus([_copy_bundled(tmp_path, sidecar=False)])
    assert [p.paper_id for p in res.papers] == [p.paper_id for p in loaded.papers]
    assert all(p.title_derived for p in res.papers)


def _skipped_ids(text: str) -> list[str]:
    """Paper ids listed in a BibTeX export's '% Skipped' line ([] when absent)."""
    if "% Skipped" not in text:
        return []
    return text.rsplit("% Skipped", 1)[1].split(": ", 1)[1].strip().split(", ")


def test_bibtex_export_has_real_authors_for_bundled_papers(loaded) -> None:
    from ui.export import bibtex

    text = bibtex(loaded.papers)
    assert text.count("@inproceedings{") == _n_entries()
    assert "author = {Zhaorun Chen and Mintong Kang and Bo Li}" in text
    assert "title = {{ShieldAgent: Shielding Agents via Verifiable Safety Policy Reasoning}}" in text
    assert "url = {https://proceedings.mlr.press/v267/chen25ae.html}" in text
    # exactly the papers without a sidecar entry are listed as skipped (none once
    # all 57 are matched: then the export has no '% Skipped' line at all)
    want = sorted(p.paper_id for p in loaded.papers if p.title_derived)
    assert sorted(_skipped_ids(text)) == want and len(want) == 57 - _n_entries()
    assert ("% Skipped" in text) == bool(want)


def test_bibtex_export_lists_papers_without_a_sidecar_entry_as_skipped(tmp_path: Path) -> None:
    """The '% Skipped' section for derived-label papers, on the real bundled files:
    without the sidecar every paper is skipped; dropping some entries skips exactly
    those papers and keeps the rest citable."""
    from ui.export import bibtex

    res = load_corpus([_copy_bundled(tmp_path / "none", sidecar=False)])
    text = bibtex(res.papers)
    assert "@inproceedings{" not in text
    assert sorted(_skipped_ids(text)) == sorted(p.paper_id for p in res.papers)
    assert len(_skipped_ids(text)) == 57

    d = _copy_bundled(tmp_path / "some")
    rows = [ln for ln in (d / SIDECAR.name).read_text(encoding="utf-8").splitlines() if ln]
    dropped = {json.loads(ln)["fingerprint"] for ln in rows[:3]}
    (d / SIDECAR.name).write_text("\n".join(rows[3:]) + "\n", encoding="utf-8")
    res = load_corpus([d])
    assert res.errors == []
    text = bibtex(res.papers)
    want = sorted(p.paper_id for p in res.papers if fingerprint(p.abstract) in dropped)
    assert len(want) == 3 and sorted(_skipped_ids(text)) == want
    assert text.count("@inproceedings{") == _n_entries() - 3
    assert text.rstrip().splitlines()[-1].startswith("% Skipped (no known title")


def _paper(abstract: str) -> Paper:  # used by the unit test below
    return Paper(paper_id="x", abstract=abstract, title="x", title_derived=True)


def test_ambiguous_phrase_is_not_attached() -> None:
    from rag.sidecar import apply_sidecar

    a = _paper("Shared opening sentence about learning. Then the first paper goes its own way.")
    b = _paper("Shared opening sentence about learning. Then the second paper differs a lot.")
    entry = {"title": "T", "match": "Shared opening sentence about learning. Then the"}
    n, errors = apply_sidecar([a, b], [(3, entry)], "m.jsonl")
    assert n == 0 and [(e.path, e.line) for e in errors] == [("m.jsonl", 3)]
    assert "matches 2 abstracts" in errors[0].message and a.title_derived and b.title_derived
