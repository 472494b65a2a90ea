"""A memo of what ``load_corpus`` derives from content alone, kept in the catalog,
so that re-ingesting an unchanged corpus in a fresh process recomputes neither:

- the label candidates of each untitled abstract (``rag.labels``: about 0.4 ms an
  abstract, 1.3 s of a 3,300-paper re-ingest), keyed by a hash of the abstract;
- the near-duplicate groups of the whole corpus (``rag.dedup``: 0.5 s at 3,300
  papers), keyed by a hash of every abstract in load order and the threshold.

Every entry is stamped with a hash of the code and data that derive it
(``rag/labels.py`` with ``rag/label_words.json`` and ``rag/text.py``, whose
sentence splitter and LaTeX reading it uses; ``rag/dedup.py`` with
``rag/textio.py``), so a change to those rules drops the memo instead of
serving stale labels or groups. A hit returns exactly what the computation
would; the memo only ever saves time.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from functools import cache
from importlib.resources import files
from typing import Protocol

from rag import dedup, labels

LABELS = "labels"
DEDUP = "dedup"


class DerivedStore(Protocol):
    """Where the memo lives (``rag.store.Catalog``): rows of (kind, key, value)."""

    def derived_rows(self, kind: str) -> dict[str, str]: ...

    def replace_derived(self, prefix: str, kind: str, rows: dict[str, str]) -> None: ...


def _digest(*parts: bytes) -> str:
    h = hashlib.blake2b(digest_size=16)
    for p in parts:
        h.update(len(p).to_bytes(8, "little"))
        h.update(p)
    return h.hexdigest()


def _source(*names: str) -> list[bytes]:
    pkg = files("rag")
    return [pkg.joinpath(n).read_bytes() for n in names]


@cache
def rules_version(kind: str) -> str:
    """Hash of the code and data that derive ``kind`` (labels or dedup)."""
    names = {LABELS: ("labels.py", "label_words.json", "text.py"), DEDUP: ("dedup.py", "textio.py")}[kind]
    return _digest(*_source(*names))[:16]


def text_key(text: str) -> str:
    return _digest(text.encode("utf-8"))


class DerivedCache:
    """Label candidates and dedup groups, served from the memo when the content
    (and the rules) are the ones it was computed for, else computed and noted.

    ``load_corpus(..., cache=DerivedCache.load(catalog))`` then ``cache.save(catalog)``
    (a no-op when nothing changed)."""

    def __init__(self, label_rows: dict[str, str] | None = None,
                 dedup_rows: dict[str, str] | None = None) -> None:
        self._labels: dict[str, tuple[str, ...]] = {
            k: tuple(json.loads(v)) for k, v in (label_rows or {}).items()
        }
        self._dedup = dict(dedup_rows or {})
        self._used: set[str] = set()
        self._new_labels = False
        self._dedup_key: str | None = None
        self._dedup_value: str | None = None
        self.label_hits = self.label_misses = 0
        self.dedup_hit: bool | None = None  # None: not asked

    # --- persistence ---
    @classmethod
    def load(cls, store: DerivedStore) -> DerivedCache:
        return cls(store.derived_rows(_kind(LABELS)), store.derived_rows(_kind(DEDUP)))

    @property
    def dirty(self) -> bool:
        """Whether ``save`` has anything to write: a new entry, or entries that
        this corpus no longer uses (dropped so the memo never outgrows it)."""
        stale_labels = self._used != set(self._labels)
        stale_dedup = self._dedup_key is not None and set(self._dedup) != {self._dedup_key}
        return self._new_labels or stale_labels or stale_dedup

    def save(self, store: DerivedStore) -> None:
        """Keep exactly what this load used (and nothing of older rule versions)."""
        if not self.dirty:
            return
        rows = {k: json.dumps(list(self._labels[k]), ensure_ascii=False) for k in self._used}
        store.replace_derived(f"{LABELS}:", _kind(LABELS), rows)
        if self._dedup_key is not None and self._dedup_value is not None:
            store.replace_derived(f"{DEDUP}:", _kind(DEDUP), {self._dedup_key: self._dedup_value})

    # --- labels ---
    def candidates(self, abstract: str) -> tuple[str, ...]:
        """``rag.labels.label_candidates(abstract)``, from the memo when it has it."""
        key = text_key(abstract)
        self._used.add(key)
        got = self._labels.get(key)
        if got is None:
            self.label_misses += 1
            got = self._labels[key] = tuple(labels.label_candidates(abstract))
            self._new_labels = True
        else:
            self.label_hits += 1
        return got

    def derive(self, abstract: str) -> str:
        """``rag.labels.derive_label(abstract)``, from the memo when it has it."""
        return self.candidates(abstract)[0]

    # --- dedup ---
    def duplicate_groups(self, abstracts: Sequence[str], threshold: float) -> list[list[int]]:
        """``rag.dedup.duplicate_groups(abstracts, threshold)``, from the memo
        when this exact corpus (same abstracts, same order) was grouped before."""
        key = _digest(repr(float(threshold)).encode(),
                      *(text_key(a).encode() for a in abstracts))
        self._dedup_key = key
        got = self._dedup.get(key)
        self.dedup_hit = got is not None
        if got is not None:
            self._dedup_value = got
            return [list(m) for m in json.loads(got)]
        groups = dedup.duplicate_groups(abstracts, threshold)
        self._dedup_value = json.dumps(groups)
        return groups


def _kind(kind: str) -> str:
    return f"{kind}:{rules_version(kind)}"
