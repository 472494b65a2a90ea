"""Static checks of the eval question set ``eval/questions.jsonl``.

Fast and model-free: reads the JSONL file and the bundled abstracts with the
standard library only, and checks the rules written down in
``eval/QUESTIONS.md`` (schema, gold/pinned references, must_include against the
gold abstracts, follow-up histories, the tune/heldout split: q1106-q1230 heldout with
fixed per-type counts, everything else tune).
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
# q001-q120 were used while tuning the engine's rules. The first held-out split
# (q121-q310) was retired into "tune" on 2026-12-02 after its per-question results had
# been read, the second (q316-q440) on 2026-12-06 after five aggregate reports, the
# third (q481-q605) on 2026-12-06 after two aggregate reports, the fourth (q606-q730)
# on 2026-12-07 after two aggregate decision-stage reports, the fifth (q731-q855)
# on 2026-12-07 after two aggregate reports (one full, one on its compare questions
# only), and the sixth (q856-q980) on 2026-12-07 after two aggregate reports (one full,
# one on its compare/pinned/follow-up questions), and the seventh (q981-q1105) on
# 2026-12-08 after two aggregate reports: q001-q1105 are all "tune". The held-out split
# is exactly q1106-q1230, written on 2026-12-08 without seeing any model output or eval
# result. Ids are "q" plus three digits, four from q1000 on.
ORIGINAL_MAX_ID = 120
HELDOUT_MIN_ID = 1106
HELDOUT_MAX_ID = 1230
MIN_HELDOUT = 120
MIN_HELDOUT_PER_TYPE = 8
COUNT_TOLERANCE = 2
# Target held-out counts per type (each may differ by COUNT_TOLERANCE).
HELDOUT_TARGET = {"fact": 18, "which": 18, "paraphrase": 16, "compare": 10, "topic": 8,
                  "unanswerable": 20, "followup": 16, "pinned": 16}
# Sub-strata: (type, kind) -> target count; same tolerance.
HELDOUT_SUBTARGET = {("unanswerable", "detail not stated"): 10, ("unanswerable", "absent topic"): 10,
                     ("followup", "answerable"): 12, ("followup", "not answerable"): 4,
                     ("pinned", "answerable"): 11, ("pinned", "not answerable"): 5}
BM25_NOTE = re.compile(r"\bbm25 rank (\d+)\b")


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


def _num(q: dict) -> int:
    return int(q["id"][1:])


def _is_original(q: dict) -> bool:
    return _num(q) <= ORIGINAL_MAX_ID


def _heldout() -> list[dict]:
    return [q for q in QS if q["split"] == "heldout"]


def _subkind(q: dict) -> str:
    if q["type"] == "unanswerable":
        return "detail not stated" if q["gold"] else "absent topic"
    return "answerable" if _answerable(q) else "not answerable"


def test_corpus_has_57_abstracts():
    assert len(RECS) == 57


def test_schema_and_unique_ids():
    ids = [q["id"] for q in QS]
    assert len(ids) == len(set(ids)), [i for i, c in collections.Counter(ids).items() if c > 1]
    for q in QS:
        assert re.fullmatch(r"q\d{3,4}", q["id"]), q["id"]
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


def test_heldout_is_exactly_the_questions_q1106_to_q1230():
    # q001-q1105 are tune (q121-q310 were the first heldout, retired on 2026-12-02 because
    # their per-question results had been read; q316-q440 the second, retired on 2026-12-06
    # after five aggregate reports; q481-q605 the third, retired on 2026-12-06 after two
    # aggregate reports; q606-q730 the fourth, retired on 2026-12-07 after two aggregate
    # decision-stage reports; q731-q855 the fifth, retired on 2026-12-07 after two aggregate
    # reports, one full and one on its compare questions only; q856-q980 the sixth, retired
    # on 2026-12-07 after two aggregate reports, one full and one on its compare/pinned/
    # follow-up questions; q981-q1105 the seventh, retired on 2026-12-08 after two aggregate
    # reports); q1106-q1230 are heldout; anything else is tune.
    for q in QS:
        if HELDOUT_MIN_ID <= _num(q) <= HELDOUT_MAX_ID:
            assert q["split"] == "heldout", f"{q['id']} (q{HELDOUT_MIN_ID}-q{HELDOUT_MAX_ID}) must be heldout"
        else:
            assert q["split"] == "tune", f"{q['id']} (outside q{HELDOUT_MIN_ID}-q{HELDOUT_MAX_ID}) must be tune"
    assert len(_heldout()) >= MIN_HELDOUT, len(_heldout())


def test_heldout_type_counts():
    counts = collections.Counter(q["type"] for q in _heldout())
    assert set(counts) == TYPES, set(counts) ^ TYPES
    for t, target in HELDOUT_TARGET.items():
        assert counts[t] >= MIN_HELDOUT_PER_TYPE, (t, counts[t])
        assert abs(counts[t] - target) <= COUNT_TOLERANCE, (t, counts[t], target)
    sub = collections.Counter((q["type"], _subkind(q)) for q in _heldout())
    for key, target in HELDOUT_SUBTARGET.items():
        assert abs(sub[key] - target) <= COUNT_TOLERANCE, (key, sub[key], target)
    two_paper_pins = [q for q in _heldout() if q["type"] == "pinned" and len(q["pinned"]) == 2]
    assert len(two_paper_pins) >= 3, len(two_paper_pins)


def test_heldout_which_and_paraphrase_record_bm25_rank():
    # Each heldout which/paraphrase note records the plain-BM25 rank of its gold paper over
    # the 57 bundled + 200 distractor abstracts; at least half must not be ranked first.
    ranks = []
    for q in _heldout():
        if q["type"] in {"which", "paraphrase"}:
            m = BM25_NOTE.search(q["notes"])
            assert m, f"{q['id']}: notes must record 'bm25 rank N'"
            ranks.append(int(m.group(1)))
    assert ranks
    assert 2 * sum(r > 1 for r in ranks) >= len(ranks), ranks


def test_heldout_gold_spread():
    gold = {_key(g) for q in _heldout() for g in q["gold"]}
    assert len(gold) >= 45, len(gold)
    for q in _heldout():
        assert "answered_by" not in q, f"{q['id']}: no heldout question is answered by a distractor"


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
