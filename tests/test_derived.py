"""The memo of derived labels and dedup groups (rag.derived): a hit gives exactly
what the computation gives, a change of content or rules misses, and an
unchanged re-ingest in a fresh engine derives nothing."""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import asdict, replace
from pathlib import Path

import pytest

import rag.dedup as dedup
import rag.derived as derived
import rag.labels as labels
from rag.config import BUNDLED_CORPUS, Settings
from rag.corpus import load_corpus
from rag.derived import DerivedCache
from rag.engine import Engine
from rag.store import Catalog
from rag.types import Paper, Provenance
from tests.conftest import FakeEmbedding

FIX = Path(__file__).resolve().parent / "fixtures" / "corpus"


def _plain_corpus(tmp_path: Path) -> list[Path]:
    """The bundled seed lines without their sidecar (derived labels, with a
    clash), plus the PMLR post that duplicates one of them (a merge)."""
    d = tmp_path / "icml2025"
    d.mkdir()
    for f in BUNDLED_CORPUS.glob("*.txt"):
        shutil.copy(f, d / f.name)
    (d / "zz_clash.txt").write_text(
        "Heading 2024\n"
        "We propose FooNet, a network for keyword spotting on tiny microcontrollers with little memory.\n"
        "We propose FooNet, a sensor fusion model for detecting floods from satellite radar images.\n",
        encoding="utf-8",
    )
    return [d, FIX / "dup"]


def _forbid_deriving(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: object, **k: object) -> None:
        raise AssertionError("derived again although the memo has it")

    monkeypatch.setattr(labels, "label_candidates", boom)
    monkeypatch.setattr(dedup, "duplicate_groups", boom)


def test_memo_hit_gives_identical_papers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = _plain_corpus(tmp_path)
    plain = load_corpus(paths)
    assert plain.duplicates_merged == 1 and sum(p.title_derived for p in plain.papers) > 50
    cat = Catalog(tmp_path / "catalog.sqlite")

    first = DerivedCache.load(cat)
    a = load_corpus(paths, cache=first)
    assert first.label_misses > 50 and first.dedup_hit is False and first.dirty
    first.save(cat)
    assert a.papers == plain.papers and a.duplicates_merged == 1

    _forbid_deriving(monkeypatch)
    second = DerivedCache.load(Catalog(tmp_path / "catalog.sqlite"))  # as a fresh process would
    b = load_corpus(paths, cache=second)
    assert second.label_misses == 0 and second.label_hits > 50 and second.dedup_hit is True
    assert not second.dirty  # nothing to write back
    # same labels (the clash resolved the same way), same ids, same merge
    assert b.papers == plain.papers and b.duplicates_merged == plain.duplicates_merged
    assert [str(e) for e in b.errors] == [str(e) for e in plain.errors]


def test_changed_abstract_misses_and_memo_keeps_only_what_is_used(tmp_path: Path) -> None:
    paths = _plain_corpus(tmp_path)
    cat = Catalog(tmp_path / "catalog.sqlite")
    c = DerivedCache.load(cat)
    load_corpus(paths, cache=c)
    c.save(cat)
    n_rows = len(cat.derived_rows(derived._kind(derived.LABELS)))

    f = sorted(paths[0].glob("*.txt"))[0]
    lines = f.read_text(encoding="utf-8").splitlines()
    lines[2] = "We present Zebranator, a zebra-striped widget for counting stripes on animals."
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    c2 = DerivedCache.load(cat)
    res = load_corpus(paths, cache=c2)
    assert c2.label_misses == 1 and c2.dedup_hit is False  # the corpus changed: regroup
    assert res.papers == load_corpus(paths).papers
    assert "Zebranator" in {p.title for p in res.papers}
    c2.save(cat)
    rows = cat.derived_rows(derived._kind(derived.LABELS))
    assert len(rows) == n_rows  # the old line's entry was dropped, the new one added
    assert len(cat.derived_rows(derived._kind(derived.DEDUP))) == 1


def test_changed_rules_drop_the_memo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = _plain_corpus(tmp_path)
    cat = Catalog(tmp_path / "catalog.sqlite")
    c = DerivedCache.load(cat)
    load_corpus(paths, cache=c)
    c.save(cat)
    old_kind = derived._kind(derived.LABELS)
    assert cat.derived_rows(old_kind)

    # an edit of rag/labels.py or rag/label_words.json changes the version
    monkeypatch.setattr(derived, "rules_version", lambda kind: "edited")
    c2 = DerivedCache.load(cat)
    load_corpus(paths, cache=c2)
    assert c2.label_misses == c.label_misses and c2.dedup_hit is False  # all derived afresh
    c2.save(cat)
    assert cat.derived_rows(old_kind) == {}  # stale versions are deleted, not kept beside
    assert cat.derived_rows(derived._kind(derived.LABELS))


def test_rules_version_hashes_the_rule_files() -> None:
    v = derived.rules_version(derived.LABELS)
    assert len(v) == 16 and v != derived.rules_version(derived.DEDUP)


def test_merge_with_given_groups_equals_computed() -> None:
    rng = random.Random(5)
    vocab = [f"w{i}" for i in range(800)]
    base = [" ".join(rng.choice(vocab) for _ in range(120)) for _ in range(200)]
    papers = [Paper(paper_id=f"p{i}", abstract=a, title=f"t{i}",
                    provenance=[Provenance("x.txt", i + 1, i + 1)]) for i, a in enumerate(base)]
    papers.insert(3, replace(papers[40], paper_id="d1", abstract=base[40][:-20]))
    papers.append(replace(papers[7], paper_id="d2", abstract="<p>" + base[7] + "</p>"))
    papers.append(replace(papers[7], paper_id="d3", abstract=base[7] + " and more"))
    groups = dedup.duplicate_groups([p.abstract for p in papers], 0.6)
    assert sorted(len(g) for g in groups) == [2, 3]
    assert all(g == sorted(g) for g in groups) and groups == sorted(groups)
    computed = dedup.merge_duplicates(papers, 0.6)
    assert dedup.merge_duplicates(papers, 0.6, groups=groups) == computed
    assert computed[1] == 3 and len(computed[0]) == len(papers) - 3
    assert dedup.duplicate_groups([p.abstract for p in papers], 0) == []


def test_paper_to_dict_is_asdict_plus_display_title() -> None:
    p = Paper(paper_id="x", abstract="An abstract.", title="T", title_derived=True,
              authors=["A", "B"], url="u", links={"pdf": "p"}, venue="ICML", year=2025,
              source="s", provenance=[Provenance("a.txt", 1, 2), Provenance("b.md", 1, 4)])
    d = p.to_dict()
    assert json.dumps(d) == json.dumps({**asdict(p), "display_title": p.display_title})
    d["authors"].append("C")
    d["links"]["x"] = "y"
    assert p.authors == ["A", "B"] and p.links == {"pdf": "p"}  # copies, as asdict made
    assert Paper.from_dict(d | {"authors": ["A", "B"], "links": {"pdf": "p"}}) == p


def test_unchanged_reingest_in_a_fresh_engine_derives_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = _plain_corpus(tmp_path)

    def engine() -> Engine:
        return Engine(Settings(_env_file=None, data_dir=tmp_path / "idx"),
                      embed_model=FakeEmbedding())

    first = engine().ingest(paths, progress=False)
    before = engine().papers()
    _forbid_deriving(monkeypatch)
    again = engine().ingest(paths, prune=True, progress=False)
    assert again.papers_unchanged == first.papers_added and again.chunks_embedded == 0
    after = engine().papers()
    assert [(p.paper_id, p.title) for p in after] == [(p.paper_id, p.title) for p in before]
