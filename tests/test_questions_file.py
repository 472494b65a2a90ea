"""Static checks of the eval question set ``eval/questions.jsonl``.

Fast and model-free: reads the JSONL file and the bundled abstracts with the
standard library only, and checks the rules written down in
``eval/QUESTIONS.md`` (schema, gold/pinned references, must_include against the
gold abstracts, follow-up histories, the tune/heldout split).
"""

from __future__ import annotations

import collections
import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
QFILE = REPO / "eval" / "questions.jsonl"
CORPUS = REPO / "data" / "icml2025"

TYPES = {"fact", "which", "paraphrase", "compare", "topic", "unanswerable", "followup", "pinned"}
BASE_KEYS = {"id", "question", "type", "gold", "must_include", "notes", "split"}
OPTIONAL_KEYS = {"answered_by", "history", "pinned", "answerable"}
# q001-q120 were used while tuning the engine's rules: they must stay in "tune".
ORIGINAL_MAX_ID = 120
MIN_HELDOUT_SHARE = 0.4
STRATUM_TOLERANCE = 0.15


def _abstracts() -> dict[tuple[str, int], str]:
    recs: dict[tuple[str, int], str] = {}
    for f in sorted(CORPUS.glob("*.txt")):
        rows = [ln.strip() for ln in f.read_text(encoding="utf-8").splitlines()[1:] if ln.strip()]
        recs.update({(f"icml2025/{f.name}", i): r.lower() for i, r in enumerate(rows, 1)})
    return recs


def _questions() -> list[dict]:
    out = []
    for n, line in enumerate(QFILE.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip() and not line.lstrip().startswith("#"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as e:  # pragma: no cover - reported by the assert
                pytest.fail(f"questions.jsonl:{n}: invalid JSON ({e.msg})")
    return out


RECS = _abstracts()
QS = _questions()


def _key(ref: dict) -> tuple[str, int]:
    assert set(ref) == {"path", "ordinal"}, ref
    assert isinstance(ref["path"], str) and isinstance(ref["ordinal"], int), ref
    return ref["path"], ref["ordinal"]


def _answerable(q: dict) -> bool:
    return q["answerable"] if "answerable" in q else q["type"] != "unanswerable"


def _is_original(q: dict) -> bool:
    return int(q["id"][1:]) <= ORIGINAL_MAX_ID


def test_corpus_has_57_abstracts():
    assert len(RECS) == 57


def test_schema_and_unique_ids():
    ids = [q["id"] for q in QS]
    assert len(ids) == len(set(ids)), [i for i, c in collections.Counter(ids).items() if c > 1]
    for q in QS:
        assert re.fullmatch(r"q\d{3}", q["id"]), q["id"]
        assert BASE_KEYS <= set(q) <= BASE_KEYS | OPTIONAL_KEYS, (q["id"], set(q) ^ BASE_KEYS)
        assert q["type"] in TYPES, q["id"]
        assert isinstance(q["question"], str) and q["question"].strip(), q["id"]
        assert isinstance(q["must_include"], list), q["id"]
        assert all(isinstance(m, str) and m.strip() for m in q["must_include"]), q["id"]
        if "answerable" in q:
            assert isinstance(q["answerable"], bool), q["id"]
            assert q["type"] in {"followup", "pinned"}, q["id"]  # override: followup/pinned only
        if "history" in q:
            assert q["type"] == "followup", q["id"]
        if "pinned" in q:
            assert q["type"] == "pinned", q["id"]


def test_gold_and_pinned_refs_exist():
    for q in QS:
        for ref in q["gold"] + q.get("pinned", []):
            assert _key(ref) in RECS, (q["id"], ref)
        for msg in q.get("history", []):
            for ref in msg.get("papers", []):
                assert _key(ref) in RECS, (q["id"], ref)


def test_shape_rules_per_type():
    for q in QS:
        gold = {_key(g) for g in q["gold"]}
        assert len(gold) == len(q["gold"]), f"{q['id']}: duplicate gold"
        if q["type"] == "unanswerable":
            assert len(q["gold"]) <= 1 and not q["must_include"], q["id"]
        else:
            assert q["gold"], q["id"]
        if q["type"] == "compare":
            assert len(gold) == 2, q["id"]
        if q["type"] == "pinned":
            pins = [_key(p) for p in q["pinned"]]
            assert 1 <= len(pins) <= 2, q["id"]
            assert set(pins) == gold, f"{q['id']}: gold must be the pinned papers"
        if not _answerable(q):
            assert not q["must_include"], f"{q['id']}: unanswerable questions have no must_include"


def test_followups_have_a_history_with_cited_papers():
    followups = [q for q in QS if q["type"] == "followup"]
    assert len(followups) >= 20
    for q in followups:
        hist = q.get("history")
        assert isinstance(hist, list) and hist, q["id"]
        for msg in hist:
            assert set(msg) <= {"role", "content", "papers"}, q["id"]
            assert msg["role"] in {"user", "assistant"}, q["id"]
            assert isinstance(msg["content"], str) and msg["content"].strip(), q["id"]
            assert isinstance(msg.get("papers", []), list), q["id"]
        assert hist[0]["role"] == "user" and hist[-1]["role"] == "assistant", q["id"]
        assert any(m["role"] == "assistant" and m.get("papers") for m in hist), q["id"]


def test_pinned_count():
    assert sum(q["type"] == "pinned" for q in QS) >= 20


def test_must_include_occurs_in_gold_abstracts():
    for q in QS:
        text = " ".join(RECS[_key(g)] for g in q["gold"])
        for item in q["must_include"]:
            alts = [a.strip().lower() for a in item.split("|") if a.strip()]
            assert alts, (q["id"], item)
            assert any(a in text for a in alts), (q["id"], item)


def test_every_abstract_is_gold_somewhere():
    covered = {_key(g) for q in QS for g in q["gold"]}
    assert covered == set(RECS), sorted(set(RECS) - covered)


def test_split_values_and_original_questions_are_tune():
    for q in QS:
        assert q["split"] in {"tune", "heldout"}, q["id"]
        if _is_original(q):
            assert q["split"] == "tune", f"{q['id']} was used for tuning; it cannot be heldout"


def test_heldout_share_and_stratification():
    held = [q for q in QS if q["split"] == "heldout"]
    assert len(held) / len(QS) >= MIN_HELDOUT_SHARE, len(held) / len(QS)
    new = [q for q in QS if not _is_original(q)]
    rate = sum(q["split"] == "heldout" for q in new) / len(new)
    by_type: dict[str, list[dict]] = collections.defaultdict(list)
    for q in new:
        by_type[q["type"]].append(q)
    assert set(by_type) == TYPES, set(by_type) ^ TYPES
    for t, qs in by_type.items():
        share = sum(q["split"] == "heldout" for q in qs) / len(qs)
        assert abs(share - rate) <= STRATUM_TOLERANCE, (t, share, rate)
        assert any(q["split"] == "tune" for q in qs) or len(qs) < 3, t


def test_loader_accepts_the_file():
    from eval.dataset import DEFAULT_SET, filter_split, load_questions

    qs = load_questions(DEFAULT_SET)
    assert len(qs) == len(QS)
    tune, held = filter_split(qs, "tune"), filter_split(qs, "heldout")
    assert len(tune) + len(held) == len(qs)
    by_id = {q.id: q for q in qs}
    for raw in QS:
        q = by_id[raw["id"]]
        assert q.answerable == _answerable(raw), q.id
        assert len(q.history) == len(raw.get("history", []))
        assert len(q.pinned) == len(raw.get("pinned", []))


def test_per_type_sample_is_seeded_capped_and_in_set_order():
    from eval.cli import per_type
    from eval.dataset import load_questions

    qs = [q for q in load_questions(QFILE) if q.split == "tune"]
    first = per_type(qs, 5)
    sample = per_type(qs, 5, seed=7)
    assert sample == per_type(qs, 5, seed=7)  # reproducible
    for chosen in (first, sample):
        counts = collections.Counter(q.type for q in chosen)
        assert set(counts) == {q.type for q in qs} and max(counts.values()) == 5
        assert [qs.index(q) for q in chosen] == sorted(qs.index(q) for q in chosen)
    # The first five of each type are the oldest questions; a sample reaches past them.
    assert {q.id for q in sample} != {q.id for q in first}
