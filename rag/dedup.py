"""Near-duplicate merging across sources: word-shingle containment, candidate
pairs from an inverted index, groups by union-find.

The same paper often arrives twice (a seed line and its PMLR post, two
exports of one list); ``merge_duplicates`` keeps one record per paper with the
richest metadata and every provenance.
"""

from __future__ import annotations

from collections import defaultdict
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
        source=group[0].source,
        provenance=provenance,
    )


def merge_duplicates(papers: list[Paper], threshold: float) -> tuple[list[Paper], int]:
    """Merge near-duplicate papers (word-shingle containment >= ``threshold``).

    Candidates come from an inverted index over shingles, so the cost is about
    linear in corpus size; very common shingles are not used to find candidates.
    Returns the papers (first-appearance order) and the number of records merged away.
    A threshold outside (0, 1] disables merging."""
    if threshold <= 0 or threshold > 1 or len(papers) < 2:
        return list(papers), 0
    sets = [_shingles(p.abstract) for p in papers]
    postings: dict[int, list[int]] = {}
    parent = list(range(len(papers)))

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
    for i in range(len(papers)):
        groups[find(i)].append(i)
    out: list[Paper] = []
    merged = 0
    for members in sorted(groups.values(), key=lambda m: m[0]):
        if len(members) == 1:
            out.append(papers[members[0]])
        else:
            out.append(_merge_group([papers[i] for i in members]))
            merged += len(members) - 1
    return out, merged
