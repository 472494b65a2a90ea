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

Optional fields (all backwards compatible; files without them still load):

- ``split``: "tune" or "heldout" (default "tune" when absent). Tune rules and
  prompts on ``tune`` only; ``heldout`` is for final reporting. See
  :func:`filter_split`.
- ``history`` (type "followup"): the prior conversation, a list of
  ``{"role": "user"|"assistant", "content": str, "papers": [gold-like refs]}``;
  an assistant turn's ``papers`` are the papers that answer cited, in order.
- ``pinned`` (type "pinned"): 1 or 2 explicitly selected papers the question is
  asked about (same ``{"path", "ordinal"}`` shape as ``gold``).
- ``answerable``: explicit bool override (used by followup/pinned questions
  whose answer is not in the abstract). When absent, a question is answerable
  unless its type is "unanswerable".
- ``answered_by`` (unanswerable questions): papers outside the bundled corpus
  (e.g. the eval's PMLR distractors) that do answer it. A run whose index holds
  one of them scores the question as answerable with those papers as gold
  ("which paper watermarks LLM text?" is absent from the 57 abstracts, not
  from 257 that include StealthInk).
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
    "followup", "pinned",
)
SPLITS: tuple[str, ...] = ("tune", "heldout")
ROLES: tuple[str, ...] = ("user", "assistant")
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
    split: str = "tune"
    # followup: prior turns as plain dicts {"role", "content", "papers": [{"path", "ordinal"}]}
    history: list[dict[str, Any]] = field(default_factory=list)
    pinned: list[GoldRef] = field(default_factory=list)
    answerable_override: bool | None = None  # the file's explicit "answerable", if any
    answered_by: list[GoldRef] = field(default_factory=list)  # papers beyond the bundled set that answer it

    @property
    def answerable(self) -> bool:
        if self.answerable_override is not None:
            return self.answerable_override
        return self.type != "unanswerable"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": self.id, "question": self.question, "type": self.type,
            "gold": [g.to_dict() for g in self.gold], "must_include": list(self.must_include),
            "notes": self.notes,
        }
        if self.history:
            d["history"] = [
                {"role": m["role"], "content": m["content"],
                 "papers": [dict(p) for p in m["papers"]]}
                for m in self.history
            ]
        if self.pinned:
            d["pinned"] = [p.to_dict() for p in self.pinned]
        if self.answerable_override is not None:
            d["answerable"] = self.answerable_override
        if self.answered_by:
            d["answered_by"] = [p.to_dict() for p in self.answered_by]
        d["split"] = self.split
        return d


def _parse_refs(raw: Any, where: str, what: str) -> list[GoldRef]:
    if not isinstance(raw, list):
        raise DatasetError(f"{where}: {what!r} must be a list")
    out: list[GoldRef] = []
    for g in raw:
        try:
            ref = GoldRef.from_dict(g)
        except (KeyError, TypeError, ValueError):
            raise DatasetError(
                f"{where}: each {what} entry needs 'path' (str) and 'ordinal' (int), got {g!r}"
            ) from None
        if ref.ordinal < 1:
            raise DatasetError(f"{where}: {what} ordinal must be >= 1, got {ref.ordinal}")
        out.append(ref)
    return out


def _parse_history(raw: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        raise DatasetError(f"{where}: 'history' must be a list of messages")
    out: list[dict[str, Any]] = []
    for i, m in enumerate(raw):
        w = f"{where}: history[{i}]"
        if not isinstance(m, dict):
            raise DatasetError(f"{w}: expected an object")
        if m.get("role") not in ROLES:
            raise DatasetError(
                f"{w}: role must be one of {', '.join(ROLES)}, got {m.get('role')!r}"
            )
        if not isinstance(m.get("content"), str) or not m["content"].strip():
            raise DatasetError(f"{w}: missing or empty 'content'")
        papers = _parse_refs(m.get("papers") or [], w, "papers")
        out.append({"role": m["role"], "content": m["content"].strip(),
                    "papers": [p.to_dict() for p in papers]})
    return out


def filter_split(questions: list[Question], split: str | None) -> list[Question]:
    """Questions of one split ("tune" or "heldout"); ``None``/"all" keeps all.

    Never tune rules or prompts on "heldout"; report it only.
    """
    if split is None or split == "all":
        return list(questions)
    if split not in SPLITS:
        raise DatasetError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)} or 'all'")
    return [q for q in questions if q.split == split]


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
    gold = _parse_refs(d.get("gold") or [], where, "gold")
    must = d.get("must_include") or []
    if not isinstance(must, list) or not all(isinstance(m, str) for m in must):
        raise DatasetError(f"{where}: 'must_include' must be a list of strings")
    if d["type"] != "unanswerable" and not gold:
        raise DatasetError(f"{where}: a {d['type']!r} question needs at least one gold paper")
    split = d.get("split", "tune")
    if split not in SPLITS:
        raise DatasetError(f"{where}: split must be one of {', '.join(SPLITS)}, got {split!r}")
    answerable = d.get("answerable")
    if answerable is not None and not isinstance(answerable, bool):
        raise DatasetError(f"{where}: 'answerable' must be true or false")
    history = _parse_history(d.get("history") or [], where)
    if d["type"] == "followup":
        if not history:
            raise DatasetError(f"{where}: a 'followup' question needs a non-empty 'history'")
        if not any(m["role"] == "assistant" and m["papers"] for m in history):
            raise DatasetError(
                f"{where}: a 'followup' history needs an assistant turn citing papers"
            )
    pinned = _parse_refs(d.get("pinned") or [], where, "pinned")
    if d["type"] == "pinned" and not 1 <= len(pinned) <= 2:
        raise DatasetError(f"{where}: a 'pinned' question needs 1 or 2 pinned papers")
    answered_by = _parse_refs(d.get("answered_by") or [], where, "answered_by")
    if answered_by and (d["type"] != "unanswerable" or answerable):
        raise DatasetError(f"{where}: 'answered_by' is for unanswerable questions only")
    return Question(
        id=d["id"].strip(), question=d["question"].strip(), type=d["type"], gold=gold,
        must_include=[m for m in must if m.strip()], notes=str(d.get("notes") or ""),
        split=split, history=history, pinned=pinned, answerable_override=answerable,
        answered_by=answered_by,
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
