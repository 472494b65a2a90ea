"""Question sets: loading and validating the eval JSONL schema.

One question per line::

    {"id": "fact-01", "question": "...", "type": "fact",
     "gold": [{"path": "icml2025/000_x.txt", "ordinal": 3}],
     "must_include": ["11.3%", "recall|sensitivity"], "notes": "..."}

``type`` is one of QUESTION_TYPES. ``gold`` names papers by provenance
(path relative to the corpus root's parent, 1-based record ordinal) so it
survives re-ingest and id changes; it may be empty (unanswerable questions
about papers not in the collection). ``must_include`` items are
case-insensitive substrings; "a|b" accepts either. Blank lines and lines
starting with "#" are skipped. Errors name the file and line.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval.metrics import GoldRef

QUESTION_TYPES: tuple[str, ...] = (
    "fact", "which", "paraphrase", "compare", "topic", "unanswerable",
)
DEFAULT_SET = Path(__file__).resolve().parent / "questions.jsonl"


class DatasetError(ValueError):
    """A question file that does not follow the schema; names file and line."""


@dataclass
class Question:
    id: str
    question: str
    type: str
    gold: list[GoldRef] = field(default_factory=list)
    must_include: list[str] = field(default_factory=list)
    notes: str = ""

    @property
    def answerable(self) -> bool:
        return self.type != "unanswerable"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "question": self.question, "type": self.type,
            "gold": [g.to_dict() for g in self.gold], "must_include": list(self.must_include),
            "notes": self.notes,
        }


def parse_question(d: Any, where: str) -> Question:
    """Validate one decoded JSON row."""
    if not isinstance(d, dict):
        raise DatasetError(f"{where}: expected a JSON object")
    for key in ("id", "question", "type"):
        if not isinstance(d.get(key), str) or not d[key].strip():
            raise DatasetError(f"{where}: missing or empty string field {key!r}")
    if d["type"] not in QUESTION_TYPES:
        raise DatasetError(
            f"{where}: type {d['type']!r} is not one of {', '.join(QUESTION_TYPES)}"
        )
    gold_raw = d.get("gold") or []
    if not isinstance(gold_raw, list):
        raise DatasetError(f"{where}: 'gold' must be a list")
    gold: list[GoldRef] = []
    for g in gold_raw:
        try:
            ref = GoldRef.from_dict(g)
        except (KeyError, TypeError, ValueError):
            raise DatasetError(
                f"{where}: each gold entry needs 'path' (str) and 'ordinal' (int), got {g!r}"
            ) from None
        if ref.ordinal < 1:
            raise DatasetError(f"{where}: gold ordinal must be >= 1, got {ref.ordinal}")
        gold.append(ref)
    must = d.get("must_include") or []
    if not isinstance(must, list) or not all(isinstance(m, str) for m in must):
        raise DatasetError(f"{where}: 'must_include' must be a list of strings")
    if d["type"] != "unanswerable" and not gold:
        raise DatasetError(f"{where}: a {d['type']!r} question needs at least one gold paper")
    return Question(
        id=d["id"].strip(), question=d["question"].strip(), type=d["type"], gold=gold,
        must_include=[m for m in must if m.strip()], notes=str(d.get("notes") or ""),
    )


def load_questions(path: Path | str) -> list[Question]:
    """Read and validate a question set; ids must be unique."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: question set not found")
    out: list[Question] = []
    seen: dict[str, int] = {}
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{path}:{lineno}"
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            raise DatasetError(f"{where}: invalid JSON ({e.msg})") from None
        q = parse_question(d, where)
        if q.id in seen:
            raise DatasetError(f"{where}: duplicate id {q.id!r} (first on line {seen[q.id]})")
        seen[q.id] = lineno
        out.append(q)
    if not out:
        raise DatasetError(f"{path}: no questions")
    return out


def file_sha256(path: Path | str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
