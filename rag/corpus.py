"""Corpus loading: files on disk -> deduplicated ``Paper`` records.

This module orchestrates; the parts live in their own modules:

- ``rag.readers``: one reader per format (seed ``.txt``, ``.jsonl``, ``.json``,
  ``.csv``, PMLR Jekyll posts ``.md``/``.markdown``) behind the ``Reader``
  protocol, and the record conventions (provenance, paper ids).
- ``rag.sidecar``: real titles/authors for seed files from a ``metadata.jsonl``.
- ``rag.dedup``: near-duplicate merging across sources.
- ``rag.labels``: derived title labels for untitled papers.

Here: walking folders, per-file error reporting (a bad file or record never
stops the load), unique ids, distinct derived labels and the content hash the
index uses to detect changed papers.

Conventions: ``Provenance.path`` is relative to the parent of the folder
passed in (``icml2025/000_x.txt``) or just the file name for a file passed
directly; ``ordinal`` is the 1-based record index within its file;
``paper_id`` is the record's own id when it has one, else
``provenance_id(prov)`` (``"<file stem>-<ordinal>"``).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rag.dedup import duplicate_groups, merge_duplicates
from rag.derived import DerivedCache
from rag.errors import CorpusError
from rag.labels import derive_label, label_candidates
from rag.readers import MIN_ABSTRACT_CHARS, SUPPORTED_EXTENSIONS, RecordBuilder, reader_for
from rag.readers.base import MAX_ABSTRACT_CHARS, provenance_id
from rag.sidecar import SIDECAR_NAME, load_and_apply
from rag.textio import FileReadError, decode_error_messages, read_text
from rag.types import Paper

__all__ = [
    "LoadResult",
    "MIN_ABSTRACT_CHARS",
    "SUPPORTED_EXTENSIONS",
    "content_hash",
    "derive_label",
    "load_corpus",
    "load_file",
    "merge_duplicates",
    "provenance_id",
]


@dataclass
class LoadResult:
    papers: list[Paper]  # deduplicated
    errors: list[CorpusError] = field(default_factory=list)  # one per bad file/record
    duplicates_merged: int = 0
    files: list[str] = field(default_factory=list)  # provenance paths of files read


def content_hash(paper: Paper) -> str:
    """sha256 over the fields that affect indexing (abstract, title, authors)."""
    payload = json.dumps([paper.abstract, paper.title, list(paper.authors)], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def load_file(path: Path, *, rel: str, source: str,
              label: Callable[[str], str] | None = None,
              max_abstract_chars: int = MAX_ABSTRACT_CHARS,
              ) -> tuple[list[Paper], list[CorpusError]]:
    """Load one corpus file. ``rel`` is its provenance path, ``source`` its source name,
    ``label`` what derives an untitled record's label (default ``derive_label``).
    Never raises for bad input: problems come back as ``CorpusError``s."""
    path = Path(path)
    out = RecordBuilder(rel, source, label, max_chars=max_abstract_chars)
    reader = reader_for(path.suffix)
    if reader is None:
        out.error(
            None,
            f"unsupported file type {path.suffix or '(none)'!r}; expected one of "
            f"{', '.join(SUPPORTED_EXTENSIONS)}",
        )
        return out.papers, out.errors
    try:
        text, bad = read_text(path)
    except FileReadError as e:
        out.error(e.line, e.message)
        return out.papers, out.errors
    for line, message in decode_error_messages(bad):
        out.error(line, message)
    reader.read(text, out)
    out.errors.sort(key=lambda e: e.line or 0)
    return out.papers, out.errors


def _walk(root: Path) -> Iterable[Path]:
    """Supported files under ``root``, recursively, sorted, skipping hidden entries."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        # a metadata sidecar next to seed .txt files is not a corpus file
        sidecar = SIDECAR_NAME in filenames and any(n.lower().endswith(".txt") for n in filenames)
        for name in sorted(filenames):
            if (sidecar and name == SIDECAR_NAME) or Path(name).stem.lower() == "readme":
                continue  # the sidecar, and a folder's README (documentation, not a post)
            if not name.startswith(".") and Path(name).suffix.lower() in SUPPORTED_EXTENSIONS:
                yield Path(dirpath) / name


def load_corpus(paths: Sequence[Path | str], *, dedup_threshold: float = 0.6,
                cache: DerivedCache | None = None,
                max_abstract_chars: int = MAX_ABSTRACT_CHARS) -> LoadResult:
    """Load files/folders, merge near-duplicates, make ids unique and derived labels distinct.

    A folder is walked recursively; its name is the ``source`` of every paper in it.
    A file given directly is its own source (its stem). ``cache``: a memo of
    derived labels and dedup groups (``rag.derived``; the index keeps one in its
    catalog); the result is the same with or without it."""
    papers: list[Paper] = []
    errors: list[CorpusError] = []
    files: list[str] = []
    seen: set[Path] = set()
    # folder -> (provenance dir, seed papers, names of the seed files loaded)
    seeds: dict[Path, tuple[str, list[Paper], set[str]]] = {}
    for given in paths:
        p = Path(given)
        if not p.exists():
            errors.append(CorpusError(str(given), None, "no such file or folder"))
            continue
        if p.is_dir():
            root = p.resolve()
            jobs = [
                (f, f"{root.name}/{f.relative_to(root).as_posix()}", root.name) for f in _walk(root)
            ]
            if not jobs:
                errors.append(
                    CorpusError(
                        str(given),
                        None,
                        f"folder has no corpus files ({', '.join(SUPPORTED_EXTENSIONS)})",
                    )
                )
        else:
            jobs = [(p.resolve(), p.name, p.stem)]
        for f, rel, source in jobs:
            if f in seen:  # the same file reached twice (folder and file both given)
                continue
            seen.add(f)
            files.append(rel)
            got, errs = load_file(f, rel=rel, source=source,
                                  label=cache.derive if cache is not None else None,
                                  max_abstract_chars=max_abstract_chars)
            papers.extend(got)
            errors.extend(errs)
            if f.suffix.lower() == ".txt":
                rel_dir = rel.rpartition("/")[0]
                entry = seeds.setdefault(f.parent, (rel_dir, [], set()))
                entry[1].extend(got)
                entry[2].add(f.name)
    for folder, (rel_dir, seed_papers, names) in seeds.items():
        # real titles/authors/links from a metadata.jsonl next to the seed files,
        # matched to abstracts by content (before dedup, so ids stay as they were)
        errors.extend(load_and_apply(folder, rel_dir, seed_papers, names))
    abstracts = [p.abstract for p in papers]
    groups = (cache.duplicate_groups(abstracts, dedup_threshold) if cache is not None
              else duplicate_groups(abstracts, dedup_threshold))
    papers, merged = merge_duplicates(papers, dedup_threshold, groups=groups)
    errors.extend(_unique_ids(papers))
    _distinct_labels(papers, cache.candidates if cache is not None else label_candidates)
    return LoadResult(papers=papers, errors=errors, duplicates_merged=merged, files=files)


def _unique_ids(papers: list[Paper]) -> list[CorpusError]:
    """Different papers with the same id (e.g. two files both using id "1"): later
    ones get "<id>~2", "~3"... and an error says so; order is stable across loads."""
    errors: list[CorpusError] = []
    taken = {p.paper_id for p in papers}
    seen: set[str] = set()
    for p in papers:
        if p.paper_id in seen:
            n = 2
            while f"{p.paper_id}~{n}" in taken:
                n += 1
            new = f"{p.paper_id}~{n}"
            prov = p.provenance[0]
            errors.append(
                CorpusError(
                    prov.path,
                    prov.line,
                    f"id {p.paper_id!r} is already used by another paper; "
                    f"loaded as {new!r} (give records their own ids or files distinct names)",
                )
            )
            p.paper_id = new
            taken.add(new)
        seen.add(p.paper_id)
    return errors


def _distinct_labels(papers: list[Paper],
                     candidates: Callable[[str], Sequence[str]] = label_candidates) -> None:
    """Derived labels must tell papers apart: on a clash, take the paper's next
    label candidate, else number it."""
    used = {p.title.lower() for p in papers if not p.title_derived}
    for p in papers:
        if not p.title_derived:
            continue
        if p.title.lower() not in used:
            used.add(p.title.lower())
            continue
        label = next((c for c in candidates(p.abstract) if c.lower() not in used), None)
        if label is None:
            n = 2
            while f"{p.title} ({n})".lower() in used:
                n += 1
            label = f"{p.title} ({n})"
        p.title = label
        used.add(label.lower())
