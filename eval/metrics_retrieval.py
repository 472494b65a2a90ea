"""Retrieval metrics (re-exported by ``eval.metrics``): matching ranked papers
to gold entries by provenance (``GoldRef``, ``gold_index``,
``relevance_vector``) and paper-level hit@k, recall@k, MRR and nDCG@k. Pure
functions over plain values, following the conventions in ``eval.metrics``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# --- gold matching -----------------------------------------------------------


@dataclass(frozen=True)
class GoldRef:
    """A gold paper named by provenance: corpus-relative path + 1-based ordinal."""

    path: str
    ordinal: int

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GoldRef:
        return cls(path=str(d["path"]), ordinal=int(d["ordinal"]))

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "ordinal": self.ordinal}


ProvLike = tuple[str, int]  # (path, ordinal) of one Provenance entry


def _norm_path(p: str) -> str:
    # Windows separators and "./" prefixes must not break matching.
    p = p.replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    return p


def path_matches(a: str, b: str) -> bool:
    """Equal, or one ends with "/" + the other (a corpus ingested from a
    different root yields a longer or shorter relative path)."""
    a, b = _norm_path(a), _norm_path(b)
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def gold_index(provenance: Iterable[ProvLike], gold: Sequence[GoldRef]) -> int | None:
    """Index of the first gold entry this paper matches, or None."""
    provs = list(provenance)
    for i, g in enumerate(gold):
        for path, ordinal in provs:
            if int(ordinal) == g.ordinal and path_matches(path, g.path):
                return i
    return None


def relevance_vector(
    ranked: Sequence[Iterable[ProvLike]], gold: Sequence[GoldRef]
) -> list[int | None]:
    """For each ranked paper, the gold index it newly matches (None if it is
    not gold or matches a gold entry already seen higher up)."""
    seen: set[int] = set()
    out: list[int | None] = []
    for provs in ranked:
        gi = gold_index(provs, gold)
        if gi is None or gi in seen:
            out.append(None)
        else:
            seen.add(gi)
            out.append(gi)
    return out


# --- retrieval metrics -------------------------------------------------------


def _binary(rel: Sequence[int | None]) -> list[int]:
    return [0 if r is None else 1 for r in rel]


def hit_at_k(rel: Sequence[int | None], k: int) -> float:
    return 1.0 if any(_binary(rel)[:k]) else 0.0


def recall_at_k(rel: Sequence[int | None], n_gold: int, k: int) -> float | None:
    if n_gold <= 0:
        return None
    return sum(_binary(rel)[:k]) / n_gold


def reciprocal_rank(rel: Sequence[int | None]) -> float:
    """1/rank of the first gold paper; 0 when none was retrieved."""
    for i, r in enumerate(_binary(rel), start=1):
        if r:
            return 1.0 / i
    return 0.0


def ndcg_at_k(rel: Sequence[int | None], n_gold: int, k: int) -> float | None:
    """Binary-gain nDCG: DCG = sum rel_i / log2(i + 1); the ideal ranking puts
    min(n_gold, k) gold papers first."""
    if n_gold <= 0:
        return None
    dcg = sum(r / math.log2(i + 1) for i, r in enumerate(_binary(rel)[:k], start=1))
    idcg = sum(1.0 / math.log2(i + 1) for i in range(1, min(n_gold, k) + 1))
    return dcg / idcg


def first_gold_rank(rel: Sequence[int | None]) -> int | None:
    for i, r in enumerate(rel, start=1):
        if r is not None:
            return i
    return None


def retrieval_metrics(
    rel: Sequence[int | None], n_gold: int, ks: Sequence[int] = (1, 3, 5, 10)
) -> dict[str, float | None]:
    """All paper-level retrieval metrics for one question (all None without gold)."""
    out: dict[str, float | None] = {}
    has = n_gold > 0
    for k in ks:
        out[f"hit@{k}"] = hit_at_k(rel, k) if has else None
        out[f"recall@{k}"] = recall_at_k(rel, n_gold, k)
        out[f"ndcg@{k}"] = ndcg_at_k(rel, n_gold, k)
    out["mrr"] = reciprocal_rank(rel) if has else None
    return out
