"""Corpus loading: formats, provenance/ids, bad input, dedup, derived labels."""

from __future__ import annotations

import json
import random
import shutil
import time
from dataclasses import replace
from pathlib import Path

import pytest

import rag.corpus as corpus
import rag.dedup as dedup
from rag.corpus import (
    content_hash,
    derive_label,
    load_corpus,
    load_file,
    merge_duplicates,
    provenance_id,
)
from rag.labels import label_candidates
from rag.types import Paper, Provenance

REPO = Path(__file__).resolve().parents[1]
BUNDLED = REPO / "data" / "icml2025"
FIX = Path(__file__).resolve().parent / "fixtures" / "corpus"
SHIELD_FILE = "icml2025/000_df6f3840f2208585.txt"


@pytest.fixture(scope="module")
def bundled() -> corpus.LoadResult:
    return load_corpus([BUNDLED])


@pytest.fixture(scope="module")
def bundled_plain(tmp_path_factory: pytest.TempPathFactory) -> corpus.LoadResult:
    """The bundled seed files WITHOUT their metadata sidecar: derived labels only."""
    d = tmp_path_factory.mktemp("plain") / "icml2025"
    d.mkdir()
    for f in BUNDLED.glob("*.txt"):
        shutil.copy(f, d / f.name)
    return load_corpus([d])


def by_id(papers: list[Paper]) -> dict[str, Paper]:
    return {p.paper_id: p for p in papers}


# --------------------------------------------------------------------------- loaders


def test_seed_file_heading_lines_ordinals_and_verbatim_text() -> None:
    res = load_corpus([FIX / "seed"])
    assert res.errors == []
    assert res.files == ["seed/neurips_seed.txt"]
    assert [p.paper_id for p in res.papers] == [
        "neurips_seed-1",
        "neurips_seed-2",
        "neurips_seed-3",
    ]
    # real 1-based line numbers (blank lines and the heading count), ordinals count abstracts
    assert [(p.provenance[0].ordinal, p.provenance[0].line) for p in res.papers] == [
        (1, 4),
        (2, 6),
        (3, 8),
    ]
    for p in res.papers:
        assert (p.venue, p.year, p.source) == (
            "NeurIPS",
            2024,
            "seed",
        )  # from "NeurIPS 2024 论文列表"
        assert p.title_derived and p.display_title.endswith("(derived label)")
        assert p.provenance[0].path == "seed/neurips_seed.txt"
    assert res.papers[0].title == "QuillNet"
    # plain-text abstracts keep markup verbatim (the UI escapes), trailing blanks trimmed
    assert '<script>alert("x")</script>' in res.papers[2].abstract
    assert res.papers[1].abstract.endswith("three climates.")


def test_seed_file_given_directly_is_its_own_source() -> None:
    res = load_corpus([FIX / "seed" / "neurips_seed.txt"])
    assert res.files == ["neurips_seed.txt"]
    assert {p.source for p in res.papers} == {"neurips_seed"}
    assert res.papers[0].provenance[0] == Provenance("neurips_seed.txt", 1, 4)


def test_seed_file_without_heading_loads_every_line(tmp_path: Path) -> None:
    first = (
        "We propose a method for ranking search results that learns from click logs and "
        "corrects position bias with inverse propensity weighting in production systems."
    )
    second = (
        "Coral reefs are monitored with underwater drones; we segment bleached coral in "
        "video with a small convolutional network trained on synthetic scenes."
    )
    (tmp_path / "noheading.txt").write_text(f"{first}\n{second}\n")
    res = load_corpus([tmp_path / "noheading.txt"])
    assert [p.provenance[0].line for p in res.papers] == [1, 2]
    assert res.papers[0].venue is None and res.papers[0].year is None


def test_jsonl_records() -> None:
    papers, errors = load_file(
        FIX / "records" / "lines.jsonl", rel="records/lines.jsonl", source="records"
    )
    assert errors == []
    first, second, third = papers
    assert first.paper_id == "rec-001" and not first.title_derived
    assert first.title == "Graph Sketches for Streaming Triangles"
    assert first.authors == ["Grace Hopper", "Edsger Dijkstra"]
    assert (first.url, first.venue, first.year) == ("https://example.org/rec-001", "KDD", 2023)
    assert second.paper_id == "lines-2"  # no own id -> "<stem>-<ordinal>"
    assert second.authors == ["Mary Somerville", "John Herschel"]  # "a; b"
    assert second.year == 2022 and second.links == {"pdf": "https://example.org/nowcast.pdf"}
    assert third.authors == ["Ada Lovelace", "Charles Babbage"]  # "a and b"
    assert third.title_derived and third.title == "Contrastive pretraining recipe for tabular data"
    # the blank line 3 is skipped: the third record sits on line 4
    assert third.provenance == [Provenance("records/lines.jsonl", 3, 4)]


def test_json_array_records_keep_their_lines() -> None:
    papers, errors = load_file(FIX / "records" / "array.json", rel="array.json", source="array")
    assert errors == []
    assert [(p.provenance[0].ordinal, p.provenance[0].line) for p in papers] == [(1, 2), (2, 10)]
    assert papers[0].paper_id == "j-1"
    assert papers[0].authors == ["Rosalind Franklin", "Francis Crick"]  # {given, family} + str
    assert papers[1].authors == ["Grace Hopper", "Ada Lovelace"]  # BibTeX "Last, First and ..."
    assert papers[1].paper_id == "array-2" and papers[1].title_derived


def test_csv_records_multiline_cell() -> None:
    papers, errors = load_file(FIX / "records" / "table.csv", rel="table.csv", source="table")
    assert errors == []
    assert papers[0].paper_id == "c-1" and papers[0].authors == ["Alice Smith", "Bob Jones"]
    assert (papers[0].venue, papers[0].year) == ("ICASSP", 2020)
    assert papers[1].provenance == [Provenance("table.csv", 2, 3)]
    assert papers[1].abstract.startswith("A multi-line abstract about")  # whitespace collapsed
    assert papers[1].paper_id == "table-2" and papers[1].title_derived


def test_pmlr_post_is_cleaned_and_linked() -> None:
    res = load_corpus([FIX / "pmlr"])
    assert res.errors == [] and len(res.papers) == 1
    p = res.papers[0]
    assert p.paper_id == "quill25a" and p.source == "pmlr"
    assert p.title == "Lanternfish: Sublinear Caching for Retrieval & Ranking"
    assert not p.title_derived
    assert p.authors == ["Petra Quill", "Ken Nakamura"]
    assert (p.venue, p.year) == ("ICML", 2025)
    assert p.url == "https://proceedings.mlr.press/v267/quill25a.html"
    assert p.links == {
        "pdf": "https://raw.githubusercontent.com/mlresearch/v267/main/assets/quill25a/quill25a.pdf",
        "software": "https://github.com/example/lanternfish",
        "openreview": "https://openreview.net/forum?id=Fx7Qp2LmZz",
    }
    a = p.abstract
    assert "<em>" not in a and "<strong>" not in a and "&" not in a
    assert "under adversarial query streams" in a
    assert "size O(\\log n) per shard" in a and "top-k queries" in a  # $ gone, LaTeX kept
    assert "costs $5 per query" in a  # an escaped \$ is a real dollar
    assert "\u2013" in a and "2\u00d7 speedup" in a  # entities unescaped
    assert "  " not in a and "\n" not in a
    assert p.provenance == [Provenance("pmlr/_posts/2025-07-13-quill25a.md", 1, 4)]


def test_pmlr_scalars_stay_text(tmp_path: Path) -> None:
    """YAML would read id ``8e10`` as a float and ``no`` as False."""
    post = (FIX / "pmlr" / "_posts" / "2025-07-13-quill25a.md").read_text()
    (tmp_path / "a.md").write_text(post.replace("id: quill25a", "id: 8e10"))
    (tmp_path / "b.md").write_text(
        post.replace("id: quill25a", "id: no").replace(
            "Lanternfish keeps", "Lanternfish (other paper) keeps a different"
        )
    )
    res = load_corpus([tmp_path], dedup_threshold=1.1)  # > 1 disables merging
    assert [p.paper_id for p in res.papers] == ["8e10", "no"]


# --------------------------------------------------------------------------- bundled corpus


def test_bundled_corpus_loads_57_distinct_labelled_papers(
    bundled: corpus.LoadResult, bundled_plain: corpus.LoadResult
) -> None:
    assert bundled.errors == []
    assert len(bundled.papers) == 57 and bundled.duplicates_merged == 0
    assert len(bundled.files) == 3  # the metadata.jsonl sidecar is not a corpus file
    assert [p.paper_id for p in bundled.papers] == [p.paper_id for p in bundled_plain.papers]
    assert len({p.title.casefold() for p in bundled.papers}) == 57
    bundled = bundled_plain  # derived labels: the fallback when a corpus has no titles
    assert bundled.errors == []
    labels = [p.title.casefold() for p in bundled.papers]
    assert len(set(labels)) == 57
    assert all(p.title_derived for p in bundled.papers)
    assert all(1 <= len(p.title.split()) <= 8 for p in bundled.papers)
    assert all(not p.title.lower().startswith(("a ", "an ", "the ")) for p in bundled.papers)
    assert {(p.venue, p.year, p.source) for p in bundled.papers} == {("ICML", 2025, "icml2025")}
    shield = bundled.papers[0]
    assert shield.title == "ShieldAgent" and shield.title_derived
    assert shield.paper_id == "000_df6f3840f2208585-1"
    assert shield.provenance == [Provenance(SHIELD_FILE, 1, 3)]
    assert len({p.paper_id for p in bundled.papers}) == 57


def test_bundled_labels_name_the_introduced_systems(bundled_plain: corpus.LoadResult) -> None:
    titles = {p.title for p in bundled_plain.papers}
    for name in (
        "DRAGO",
        "FlexTok",
        "EmbodiedBench",
        "MeCo",
        "NS-DPO",
        "ReVISE",
        "MELON",
        "LLaVA-ReID",
        "Angle Domain Guidance (ADG)",
        "BART Kernel (BARK)",
    ):
        assert name in titles


def test_ids_and_hashes_are_stable_across_loads(bundled: corpus.LoadResult) -> None:
    again = load_corpus([BUNDLED])
    assert [p.paper_id for p in again.papers] == [p.paper_id for p in bundled.papers]
    assert [content_hash(p) for p in again.papers] == [content_hash(p) for p in bundled.papers]
    assert [p.title for p in again.papers] == [p.title for p in bundled.papers]


def test_provenance_id_is_the_fallback_id(bundled: corpus.LoadResult) -> None:
    for p in bundled.papers:
        assert provenance_id(p.provenance[0]) == p.paper_id


# --------------------------------------------------------------------------- bad input


def test_bad_inputs_report_file_and_line_while_others_load() -> None:
    res = load_corpus([FIX / "bad", FIX / "seed"])
    got = {(e.path, e.line) for e in res.errors}
    assert got == {
        ("bad/bad_front_matter.md", 8),
        ("bad/broken.jsonl", 2),  # malformed JSON
        ("bad/broken.jsonl", 3),  # no abstract
        ("bad/broken.jsonl", 4),  # too short
        ("bad/empty.txt", None),
        ("bad/heading_only.txt", None),
    }
    msgs = {(e.path, e.line): str(e) for e in res.errors}
    assert msgs[("bad/broken.jsonl", 2)].startswith("bad/broken.jsonl:2: malformed JSON")
    assert "no 'abstract'" in msgs[("bad/broken.jsonl", 3)]
    assert "too short" in msgs[("bad/broken.jsonl", 4)]
    assert "bad YAML front matter" in msgs[("bad/bad_front_matter.md", 8)]
    assert "empty" in msgs[("bad/empty.txt", None)]
    assert "no abstracts" in msgs[("bad/heading_only.txt", None)]
    # the good record of the broken file and the other folder still load;
    # hidden files and unknown extensions inside a folder are skipped silently
    assert [p.paper_id for p in res.papers] == [
        "ok-1",
        "neurips_seed-1",
        "neurips_seed-2",
        "neurips_seed-3",
    ]
    assert "bad/.hidden.txt" not in res.files and "bad/notes.xyz" not in res.files


def test_non_utf8_line_costs_only_its_own_record(tmp_path: Path) -> None:
    d = tmp_path / "mixed"
    d.mkdir()
    (d / "latin1.txt").write_bytes(
        b"ICML 2025 Papers\nA fine first abstract line with enough characters.\n"
        b"Caf\xe9 abstracts written in Latin-1 are not UTF-8 at all.\n"
    )
    shutil.copy(FIX / "seed" / "neurips_seed.txt", d / "good.txt")
    res = load_corpus([d])
    assert [(e.path, e.line) for e in res.errors] == [("mixed/latin1.txt", 3)]
    assert "UTF-8" in res.errors[0].message and "0xe9" in res.errors[0].message
    assert len(res.papers) == 5
    latin = [p for p in res.papers if p.provenance[0].path == "mixed/latin1.txt"]
    assert [p.paper_id for p in latin] == ["latin1-1", "latin1-2"]
    assert latin[0].abstract == "A fine first abstract line with enough characters."
    assert latin[1].abstract.startswith("Caf\ufffd abstracts")


ENC = FIX / "encoding"


def test_seed_file_with_a_bad_byte_on_line_5_keeps_its_good_abstracts() -> None:
    papers, errors = load_file(ENC / "seed_badbyte.txt", rel="enc/seed_badbyte.txt", source="enc")
    assert [(e.path, e.line) for e in errors] == [("enc/seed_badbyte.txt", 5)]
    assert "byte 0xef at column 5" in errors[0].message and "U+FFFD" in errors[0].message
    assert [(p.paper_id, p.provenance[0].line) for p in papers] == [
        ("seed_badbyte-1", 3),
        ("seed_badbyte-2", 4),
        ("seed_badbyte-3", 5),
        ("seed_badbyte-4", 6),
        ("seed_badbyte-5", 7),
    ]
    assert papers[0].abstract.startswith("We propose GlowNet")
    assert papers[2].abstract.startswith("A na\ufffdve Bayes baseline")
    assert papers[4].abstract.endswith("drift slowly over time.")


def test_jsonl_line_with_a_bad_byte_is_flagged_others_intact() -> None:
    papers, errors = load_file(ENC / "records_badbyte.jsonl", rel="r.jsonl", source="r")
    assert [(e.path, e.line) for e in errors] == [("r.jsonl", 2)]
    assert "0x93" in errors[0].message
    assert [p.paper_id for p in papers] == ["enc-1", "enc-2", "enc-3"]
    assert "\ufffdsmart quotes\ufffd" in papers[1].abstract
    assert papers[0].abstract.endswith("graph coarsening.") and papers[2].title == "Another clean one"


def test_csv_row_with_a_bad_byte_is_flagged_others_intact() -> None:
    papers, errors = load_file(ENC / "table_badbyte.csv", rel="t.csv", source="t")
    assert [(e.path, e.line) for e in errors] == [("t.csv", 3)]
    assert [p.paper_id for p in papers] == ["csv-1", "csv-2", "csv-3"]
    assert papers[1].abstract.startswith("Stra\ufffdenverkehr")


def test_many_bad_lines_are_summarised_and_utf16_is_a_file_error(tmp_path: Path) -> None:
    f = tmp_path / "latin.txt"
    f.write_bytes(b"Heading 2025\n" + b"".join(b"Abstract n\xba %d about something long enough.\n" % i
                                              for i in range(15)))
    papers, errors = load_file(f, rel="latin.txt", source="latin")
    assert len(papers) == 15
    assert [e.line for e in errors] == [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
    assert errors[-1].message.startswith("5 more lines (up to line 16)")
    u16 = tmp_path / "u16.txt"
    u16.write_bytes("Heading\nSome abstract that is long enough.\n".encode("utf-16"))
    papers, errors = load_file(u16, rel="u16.txt", source="u16")
    assert papers == [] and [(e.line, "UTF-16" in e.message) for e in errors] == [(None, True)]


def test_unknown_extension_given_directly_is_an_error(tmp_path: Path) -> None:
    f = tmp_path / "notes.xyz"
    f.write_text("whatever")
    res = load_corpus([f, FIX / "seed"])
    assert [(e.path, e.line) for e in res.errors] == [("notes.xyz", None)]
    assert "unsupported file type" in str(res.errors[0])
    assert len(res.papers) == 3


def test_missing_path_empty_folder_and_unreadable_file(tmp_path: Path) -> None:
    empty = tmp_path / "nothing"
    empty.mkdir()
    res = load_corpus([tmp_path / "absent", empty])
    assert [e.message for e in res.errors] == ["no such file or folder", res.errors[1].message]
    assert "no corpus files" in res.errors[1].message
    unreadable = tmp_path / "dir.txt"  # a directory where a file is expected
    unreadable.mkdir()
    papers, errors = load_file(unreadable, rel="dir.txt", source="x")
    assert papers == [] and "cannot read file" in str(errors[0])
    assert str(errors[0]).startswith("dir.txt:")


def test_json_array_syntax_error_keeps_earlier_records(tmp_path: Path) -> None:
    f = tmp_path / "arr.json"
    good = {"abstract": "An abstract that is long enough to be a valid record."}
    f.write_text("[\n" + json.dumps(good) + ",\n" + '{"abstract": "broken\n]\n')
    papers, errors = load_file(f, rel="arr.json", source="arr")
    assert len(papers) == 1 and papers[0].provenance[0].line == 2
    assert len(errors) == 1 and errors[0].line == 3 and "malformed JSON" in errors[0].message


def test_csv_without_abstract_column(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("title,summary\nA,Something long enough to be an abstract here.\n")
    papers, errors = load_file(f, rel="t.csv", source="t")
    assert papers == [] and errors[0].line == 1 and "'abstract' column" in errors[0].message


def test_post_without_front_matter_or_abstract(tmp_path: Path) -> None:
    (tmp_path / "plain.md").write_text("# Just markdown\n\nNo front matter here.\n")
    (tmp_path / "noabs.md").write_text("---\ntitle: No abstract\nid: x25a\n---\n")
    res = load_corpus([tmp_path])
    errs = {(e.path, e.line): e.message for e in res.errors}
    assert "no YAML front matter" in errs[(f"{tmp_path.name}/plain.md", 1)]
    assert "no 'abstract'" in errs[(f"{tmp_path.name}/noabs.md", 1)]
    assert res.papers == []


def test_short_seed_abstract_is_an_error_with_its_line(tmp_path: Path) -> None:
    f = tmp_path / "s.txt"
    f.write_text("ICLR 2024 Papers\nshort one\nA long enough abstract sits on the third line.\n")
    papers, errors = load_file(f, rel="s.txt", source="s")
    assert [(e.line, "too short" in e.message) for e in errors] == [(2, True)]
    # the bad line still takes ordinal 1, so later ids don't shift when it is fixed
    assert papers[0].paper_id == "s-2" and papers[0].provenance[0].line == 3
    assert (papers[0].venue, papers[0].year) == ("ICLR", 2024)


def test_same_stem_in_two_files_gets_unique_ids_and_a_warning(tmp_path: Path) -> None:
    d = tmp_path / "c"
    d.mkdir()
    (d / "papers.jsonl").write_text(
        json.dumps({"abstract": "First paper: graph sketches for streaming triangle counting."})
        + "\n"
    )
    (d / "papers.csv").write_text(
        "abstract\nSecond paper: calibrated rainfall nowcasting with conformal prediction.\n"
    )
    res = load_corpus([d])
    assert sorted(p.paper_id for p in res.papers) == ["papers-1", "papers-1~2"]
    assert len(res.errors) == 1 and "already used" in res.errors[0].message


def test_file_reached_twice_is_read_once() -> None:
    res = load_corpus([FIX / "seed", FIX / "seed" / "neurips_seed.txt"])
    assert res.files == ["seed/neurips_seed.txt"] and len(res.papers) == 3


# --------------------------------------------------------------------------- dedup


def test_seed_line_and_pmlr_post_of_same_paper_merge(bundled: corpus.LoadResult) -> None:
    res = load_corpus([BUNDLED, FIX / "dup"])
    assert res.errors == []
    assert len(res.papers) == 57 and res.duplicates_merged == 1
    merged = res.papers[1]  # keeps the seed's position
    assert merged.paper_id == "fixture25a"  # the record's own id wins
    assert merged.title == "Token Orders for Masked Diffusions: A Fixture Paper"
    assert not merged.title_derived
    assert merged.authors == ["Erin Example", "Sam Sample"]
    assert merged.url == "https://proceedings.mlr.press/v267/fixture25a.html"
    assert "pdf" in merged.links and "openreview" in merged.links
    assert merged.provenance == [
        Provenance(SHIELD_FILE, 2, 5),
        Provenance("dup/2025-07-13-fixture25a.md", 1, 4),
    ]
    # the cleaner (PMLR) abstract is kept, and the old id still resolves via provenance
    assert "<em>" not in merged.abstract and "$" not in merged.abstract
    assert provenance_id(merged.provenance[0]) == bundled.papers[1].paper_id
    assert merged.source == "icml2025"  # the first-loaded source, so filters keep working
    # every other bundled paper is untouched
    others = [p for p in res.papers if p is not merged]
    assert [p.paper_id for p in others] == [
        p.paper_id for i, p in enumerate(bundled.papers) if i != 1
    ]


def test_related_but_different_papers_do_not_merge(bundled_plain: corpus.LoadResult) -> None:
    titles = {
        "ShieldAgent",
        "AdvAgent",
        "MELON",  # all on LLM-agent security
        "MDMs train on intractable subproblems",
        "Framework for analyzing W_2-convergence in SGMs",
    }
    related = [p for p in bundled_plain.papers if p.title in titles]
    assert len(related) == 5
    out, merged = merge_duplicates(related, 0.6)
    assert merged == 0 and len(out) == 5
    # ... even at a much lower threshold
    assert merge_duplicates(related, 0.2)[1] == 0


def test_merge_prefers_real_title_and_unions_provenance() -> None:
    abstract = (
        "We introduce FooBarNet, a compact network for keyword spotting on microcontrollers "
        "that reaches state-of-the-art accuracy with a fraction of the memory."
    )
    seed = Paper(
        paper_id="s-1",
        abstract=abstract,
        title="FooBarNet",
        title_derived=True,
        source="seed",
        provenance=[Provenance("seed/s.txt", 1, 2)],
    )
    rich = Paper(
        paper_id="foo25a",
        abstract=abstract.replace("compact", "tiny"),
        title="FooBarNet",
        authors=["A B"],
        url="https://x/foo",
        links={"pdf": "https://x/foo.pdf"},
        venue="ICML",
        year=2025,
        source="pmlr",
        provenance=[Provenance("pmlr/foo25a.md", 1, 4)],
    )
    other = replace(
        seed,
        paper_id="s-2",
        abstract="A completely different abstract about "
        "ocean temperature sensors and buoy networks.",
        title="Ocean",
        provenance=[Provenance("seed/s.txt", 2, 3)],
    )
    out, merged = merge_duplicates([seed, other, rich], 0.6)
    assert merged == 1 and [p.paper_id for p in out] == ["foo25a", "s-2"]
    assert out[0].abstract == rich.abstract and out[0].authors == ["A B"]
    assert out[0].source == "seed" and len(out[0].provenance) == 2
    assert merge_duplicates([seed, rich], 0)[1] == 0  # threshold 0 disables merging


def _random_abstract(rng: random.Random, vocab: list[str], n: int = 150) -> str:
    return " ".join(rng.choice(vocab) for _ in range(n))


def test_dedup_uses_an_index_not_all_pairs(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7)
    vocab = [f"w{i}" for i in range(2000)]
    base = [_random_abstract(rng, vocab) for _ in range(1500)]
    papers = [
        Paper(
            paper_id=f"p{i}",
            abstract=a,
            title=f"t{i}",
            provenance=[Provenance("x.txt", i + 1, i + 1)],
        )
        for i, a in enumerate(base)
    ]
    # three planted near-duplicates: a typo, a dropped half, and markup
    papers.append(replace(papers[10], paper_id="d1", abstract=base[10].replace("w1", "w1x", 1)))
    papers.append(replace(papers[20], paper_id="d2", abstract=base[20][: len(base[20]) * 2 // 3]))
    papers.append(replace(papers[30], paper_id="d3", abstract="<p>" + base[30] + "</p>"))
    calls = 0
    real = dedup._similar

    def counting(*args: object) -> bool:
        nonlocal calls
        calls += 1
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(dedup, "_similar", counting)
    out, merged = merge_duplicates(papers, 0.6)
    assert merged == 3 and len(out) == 1500
    assert calls < 50  # ~1.1M pairs; only real candidates get the exact check


@pytest.mark.slow  # writes 3,333 files: a scale check, not the inner loop
def test_loading_3333_pmlr_posts_takes_seconds(tmp_path: Path) -> None:
    rng = random.Random(3)
    vocab = [f"term{i}" for i in range(5000)]
    posts = tmp_path / "v999" / "_posts"
    posts.mkdir(parents=True)
    template = (FIX / "pmlr" / "_posts" / "2025-07-13-quill25a.md").read_text()
    for i in range(3333):
        body = _random_abstract(rng, vocab, 120)
        text = template.replace("quill25a", f"p{i}x").replace(
            "We study retrieval caches", f"We study {body} retrieval caches"
        )
        (posts / f"2025-07-13-p{i}x.md").write_text(text)
    start = time.perf_counter()
    res = load_corpus([tmp_path / "v999"])
    elapsed = time.perf_counter() - start
    assert len(res.papers) == 3333 and res.errors == [] and res.duplicates_merged == 0
    assert elapsed < 20, f"took {elapsed:.1f}s"  # ~3 s on a shared 2-core machine


# --------------------------------------------------------------------------- labels, hash


@pytest.mark.parametrize(
    ("abstract", "label"),
    [
        (
            "Agents are risky. To tackle this, we propose ShieldAgent, the first guardrail agent "
            "for other agents.",
            "ShieldAgent",
        ),
        (
            "Data is diverse. We propose a new method, termed Metadata Conditioning then Cooldown "
            "(MeCo), to add cues.",
            "MeCo",
        ),
        (
            "Guidance matters. We propose an Angle Domain Guidance (ADG) algorithm for sampling.",
            "Angle Domain Guidance (ADG)",
        ),
        ("We present Packrat, a new serving system for online inference on CPUs.", "Packrat"),
        (
            "Labels are noisy. In this work, we propose, theoretically justify, and empirically "
            "validate LEMoN, a method to find label errors.",
            "LEMoN",
        ),
        (
            "Drift hurts alignment. We propose Non-Stationary Direct Preference Optimisation "
            "(NS-DPO) that models time.",
            "NS-DPO",
        ),
    ],
)
def test_derive_label_finds_introduced_names(abstract: str, label: str) -> None:
    assert derive_label(abstract) == label


def test_derive_label_falls_back_to_a_short_contribution_phrase() -> None:
    abstract = (
        "Many problems are hard. In this paper, we study the generalization behavior of "
        "decentralized SGD for both smooth and nonsmooth problems by leveraging stability."
    )
    label = derive_label(abstract)
    assert label == "Generalization behavior of decentralized SGD"
    no_contribution = "The weather in spring is variable and hard to predict for farmers."
    assert 1 <= len(derive_label(no_contribution).split()) <= 8
    assert not derive_label(no_contribution).lower().startswith(("the ", "a ", "an "))
    # known acronyms already used earlier in the abstract are not taken as new names
    assert derive_label("LLMs are large. We propose LLM-based routing for queries.") != "LLM-based"


def test_clashing_derived_labels_are_disambiguated(tmp_path: Path) -> None:
    f = tmp_path / "two.txt"
    f.write_text(
        "Heading 2024\n"
        "We propose FooNet, a network for keyword spotting on tiny microcontrollers with little memory.\n"
        "We propose FooNet, a sensor fusion model for detecting floods from satellite radar images.\n"
    )
    res = load_corpus([f])
    a, b = res.papers
    assert a.title == "FooNet" and b.title != "FooNet" and b.title_derived
    assert b.title in label_candidates(b.abstract)


def test_content_hash_covers_indexed_fields_only() -> None:
    p = Paper(
        paper_id="x",
        abstract="An abstract long enough.",
        title="T",
        authors=["A"],
        provenance=[Provenance("a.txt", 1, 2)],
    )
    h = content_hash(p)
    assert len(h) == 64 and content_hash(replace(p)) == h
    assert content_hash(replace(p, provenance=[Provenance("b.txt", 3, 4)], url="u")) == h
    assert content_hash(replace(p, abstract=p.abstract + "!")) != h
    assert content_hash(replace(p, title="T2")) != h
    assert content_hash(replace(p, authors=["B"])) != h


def test_every_format_has_one_reader_behind_the_protocol() -> None:
    from rag.readers import READERS, SUPPORTED_EXTENSIONS, reader_for

    assert SUPPORTED_EXTENSIONS == (".txt", ".jsonl", ".json", ".csv", ".md", ".markdown")
    for ext in SUPPORTED_EXTENSIONS:
        r = reader_for(ext.upper())
        assert r in READERS and ext in r.extensions and callable(r.read)
    assert reader_for(".pdf") is None
