"""Near-duplicate merging across sources: word-shingle containment, candidate
pairs from an inverted index, groups by union-find.

The same paper often arrives twice (a seed line and its PMLR post, two
exports of one list); ``merge_duplicates`` keeps one record per paper with the
richest metadata and every provenance.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace

from rag.readers.base import provenance_id
from rag.textio import plain_tokens
from rag.types import Paper, Provenance

_SHINGLE = 3  # word n-gram size (_shingles zips exactly three)
_MIN_SHINGLES_FOR_CONTAINMENT = 8  # below this, containment is too easy; use Jaccard
_POSTING_CAP = 16  # shingles shared by more papers than this are boilerplate, not evidence


def has_own_id(paper: Paper) -> bool:
    """Whether the paper's id came with the record (not ``provenance_id``)."""
    return all(paper.paper_id != provenance_id(p) for p in paper.provenance)


def _shingles(text: str) -> set[int]:
    """Word 3-gram shingles over markup-free, lower-cased tokens, so a seed line
    (raw LaTeX/HTML) and the cleaned PMLR version of it look the same."""
    tokens = plain_tokens(text)
    if len(tokens) < _SHINGLE:
        return {hash(tuple(tokens))} if tokens else set()
    return set(map(hash, zip(tokens, tokens[1:], tokens[2:], strict=False)))


def _similar(a: set[int], b: set[int], inter: int, threshold: float) -> bool:
    small = min(len(a), len(b))
    if small >= _MIN_SHINGLES_FOR_CONTAINMENT:
        # containment, not Jaccard: one version may be missing a sentence
        return inter / small >= threshold
    return inter / max(1, len(a | b)) >= threshold


def _richness(p: Paper) -> tuple[int, int, int, int, int]:
    return (
        not p.title_derived,
        bool(p.authors),
        bool(p.url or p.links),
        has_own_id(p),
        p.venue is not None,
    )


def _merge_group(group: list[Paper]) -> Paper:
    """One paper from duplicates: the richest record's metadata and abstract (a real
    title usually means the cleaner abstract), gaps filled from the others, the
    earliest record's source, and every provenance."""
    best = max(group, key=_richness)  # max() keeps the earliest among equals
    others = [p for p in group if p is not best]
    ordered = [best, *others]
    links: dict[str, str] = {}
    for p in reversed(ordered):
        links.update(p.links)
    own = next((p.paper_id for p in ordered if has_own_id(p)), group[0].paper_id)
    provenance: list[Provenance] = []
    for p in group:
        provenance.extend(x for x in p.provenance if x not in provenance)
    return replace(
        best,
        paper_id=own,
        authors=next((p.authors for p in ordered if p.authors), []),
        url=next((p.url for p in ordered if p.url), None),
        links=links,
        venue=next((p.venue for p in ordered if p.venue), None),
        year=next((p.year for p in ordered if p.year), None),
        pages=next((p.pages for p in ordered if p.pages), None),
        source=group[0].source,
        provenance=provenance,
    )


def duplicate_groups(abstracts: Sequence[str], threshold: float) -> list[list[int]]:
    """Indices of near-duplicate abstracts (word-shingle containment >= ``threshold``):
    each group ascending, groups ordered by their first index, singletons left out.

    Candidates come from an inverted index over shingles, so the cost is about
    linear in corpus size; very common shingles are not used to find candidates.
    A threshold outside (0, 1] disables merging (no groups)."""
    if threshold <= 0 or threshold > 1 or len(abstracts) < 2:
        return []
    sets = [_shingles(a) for a in abstracts]
    postings: dict[int, list[int]] = {}
    parent = list(range(len(abstracts)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, s in enumerate(sets):
        counts: dict[int, int] = {}
        for sh in s:
            plist = postings.get(sh)
            if plist is None:
                postings[sh] = [i]
            elif len(plist) <= _POSTING_CAP:
                for j in plist:
                    counts[j] = counts.get(j, 0) + 1
                plist.append(i)
        # the exact check only for candidates that could reach the threshold
        # (counts are lower bounds: capped shingles are not counted, hence the slack)
        for j, c in counts.items():
            if c >= 0.5 * threshold * min(len(s), len(sets[j])) and find(i) != find(j):
                if _similar(s, sets[j], len(s & sets[j]), threshold):
                    parent[find(i)] = find(j)
    groups: dict[int, list[int]] = defaultdict(list)
    for i in range(len(abstracts)):
        groups[find(i)].append(i)
    return sorted((m for m in groups.values() if len(m) > 1), key=lambda m: m[0])


def merge_duplicates(papers: list[Paper], threshold: float, *,
                     groups: Sequence[Sequence[int]] | None = None) -> tuple[list[Paper], int]:
    """Merge near-duplicate papers (``duplicate_groups`` of their abstracts, or
    ``groups`` when the caller already has them, e.g. memoised for this corpus).
    Returns the papers (first-appearance order) and the number of records merged away."""
    if groups is None:
        groups = duplicate_groups([p.abstract for p in papers], threshold)
    first = {m[0]: m for m in groups}
    later = {i for m in groups for i in m[1:]}
    out: list[Paper] = []
    merged = 0
    for i, p in enumerate(papers):
        if i in first:
            out.append(_merge_group([papers[j] for j in first[i]]))
            merged += len(first[i]) - 1
        elif i not in later:
            out.append(p)
    return out, merged
