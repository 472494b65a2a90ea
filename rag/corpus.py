"""Corpus loading: files on disk -> deduplicated ``Paper`` records.

Owns the on-disk formats (seed ``.txt``, ``.jsonl``, ``.json``, ``.csv`` and
PMLR Jekyll posts ``.md``/``.markdown``), provenance and paper ids, per-record
error reporting (a bad file or record never stops the load), near-duplicate
merging across sources, derived title labels and the content hash the index
uses to detect changed papers.

Conventions (see AGENTS_CONTEXT): ``Provenance.path`` is relative to the parent
of the folder passed in (``icml2025/000_x.txt``) or just the file name for a
file passed directly; ``ordinal`` is the 1-based record index within its file;
``paper_id`` is the record's own id when it has one, else
``provenance_id(prov)`` (``"<file stem>-<ordinal>"``).
"""

from __future__ import annotations

import csv
import hashlib
import html
import io
import json
import os
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from rag.errors import CorpusError
from rag.labels import derive_label, label_candidates
from rag.sidecar import SIDECAR_NAME, load_and_apply
from rag.textio import FileReadError, decode_error_messages, read_text, split_lines
from rag.types import Paper, Provenance

__all__ = [
    "LoadResult",
    "SUPPORTED_EXTENSIONS",
    "content_hash",
    "derive_label",
    "load_corpus",
    "load_file",
    "merge_duplicates",
    "provenance_id",
]

MIN_ABSTRACT_CHARS = 20
SUPPORTED_EXTENSIONS = (".txt", ".jsonl", ".json", ".csv", ".md", ".markdown")
_SHINGLE = 3  # word n-gram size (_shingles zips exactly three)
_MIN_SHINGLES_FOR_CONTAINMENT = 8  # below this, containment is too easy; use Jaccard
_POSTING_CAP = 16  # shingles shared by more papers than this are boilerplate, not evidence


@dataclass
class LoadResult:
    papers: list[Paper]  # deduplicated
    errors: list[CorpusError] = field(default_factory=list)  # one per bad file/record
    duplicates_merged: int = 0
    files: list[str] = field(default_factory=list)  # provenance paths of files read


# --------------------------------------------------------------------------- ids, hash


def provenance_id(prov: Provenance) -> str:
    """Fallback paper id for a record without its own id: ``"<file stem>-<ordinal>"``."""
    return f"{Path(prov.path).stem}-{prov.ordinal}"


def content_hash(paper: Paper) -> str:
    """sha256 over the fields that affect indexing (abstract, title, authors)."""
    payload = json.dumps([paper.abstract, paper.title, list(paper.authors)], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _has_own_id(paper: Paper) -> bool:
    return all(paper.paper_id != provenance_id(p) for p in paper.provenance)


# --------------------------------------------------------------------------- text helpers

_TAG = re.compile(r"<!--.*?-->|</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>]*)?/?>", re.DOTALL)
_WS = re.compile(r"\s+")
_YEAR = re.compile(r"(?<!\d)((?:19|20)\d{2})(?!\d)")
_KNOWN_VENUES = {
    v.lower(): v
    for v in (
        "ICML",
        "NeurIPS",
        "ICLR",
        "ACL",
        "EMNLP",
        "NAACL",
        "EACL",
        "COLING",
        "CVPR",
        "ICCV",
        "ECCV",
        "AAAI",
        "IJCAI",
        "KDD",
        "AISTATS",
        "COLT",
        "UAI",
        "CoRL",
        "WWW",
        "SIGIR",
        "TMLR",
        "JMLR",
        "ICRA",
        "IROS",
        "MICCAI",
        "WSDM",
        "CIKM",
        "MLSys",
        "COLM",
        "Interspeech",
        "ALT",
        "ACML",
        "CHIL",
        "L4DC",
        "PMLR",
    )
}
_KNOWN_VENUES["nips"] = "NeurIPS"
_HEADING_WORDS_NOT_VENUE = {"PAPERS", "PAPER", "LIST", "ACCEPTED", "ORAL", "POSTER", "PDF", "THE"}
_CONTAINER_VENUES = (  # PMLR container-title / booktitle -> venue
    ("international conference on machine learning", "ICML"),
    ("artificial intelligence and statistics", "AISTATS"),
    ("conference on learning theory", "COLT"),
    ("uncertainty in artificial intelligence", "UAI"),
    ("conference on robot learning", "CoRL"),
    ("algorithmic learning theory", "ALT"),
    ("asian conference on machine learning", "ACML"),
    ("learning for dynamics and control", "L4DC"),
)


def _clean_markup(text: str) -> str:
    """PMLR abstract/title -> plain text: no HTML tags or entities, no ``$`` math
    delimiters (the LaTeX itself stays), single spaces."""
    text = html.unescape(_TAG.sub(" ", text))
    text = text.replace("\\$", "\x00").replace("$", "").replace("\x00", "$")
    return _WS.sub(" ", text).strip()


def _venue_year_from_heading(heading: str) -> tuple[str | None, int | None]:
    year_m = _YEAR.search(heading)
    year = int(year_m.group(1)) if year_m else None
    venue = None
    for tok in re.findall(r"[A-Za-z][A-Za-z0-9]*[A-Za-z]", heading):
        tok = re.sub(r"\d+$", "", tok)
        if tok.lower() in _KNOWN_VENUES:
            venue = _KNOWN_VENUES[tok.lower()]
            break
        caps = sum(c.isupper() for c in tok)
        if (
            venue is None
            and len(tok) >= 3
            and caps >= 2
            and tok[0].isupper()
            and tok.upper() not in _HEADING_WORDS_NOT_VENUE
        ):
            venue = tok  # first acronym-like word, kept as the fallback
    return venue, year


def _to_year(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    m = _YEAR.search(str(value))
    return int(m.group(1)) if m else None


def _split_authors(value: Any) -> list[str]:
    """Authors from a list (of names or {given, family}/{name} dicts) or a string
    separated by ";", " and " (incl. BibTeX "Last, First and ...") or ","."""
    if value is None:
        return []
    if isinstance(value, list):
        out = []
        for a in value:
            if isinstance(a, dict):
                name = a.get("name") or " ".join(
                    str(a[k]).strip() for k in ("given", "family") if a.get(k)
                )
            else:
                name = str(a)
            name = _WS.sub(" ", str(name)).strip()
            if name:
                out.append(name)
        return out
    s = _WS.sub(" ", str(value)).strip()
    if not s:
        return []
    if ";" in s:
        parts = s.split(";")
    elif " and " in s:
        parts = re.split(r"\s+and\s+", s)
        if all(p.count(",") == 1 for p in parts):  # BibTeX "Last, First and Last, First"
            parts = [" ".join(reversed([x.strip() for x in p.split(",")])) for p in parts]
        else:
            parts = [x for p in parts for x in p.split(",")]
    else:
        parts = s.split(",")
    return [p.strip() for p in parts if p.strip()]


def _str_field(rec: dict[str, Any], key: str) -> str | None:
    value = rec.get(key)
    if value is None or isinstance(value, (dict, list)):
        return None
    value = _WS.sub(" ", str(value)).strip()
    return value or None


# --------------------------------------------------------------------------- reading


class _Builder:
    """Turns raw records of one file into Papers + errors with shared conventions."""

    def __init__(self, rel: str, source: str) -> None:
        self.rel, self.source = rel, source
        self.papers: list[Paper] = []
        self.errors: list[CorpusError] = []

    def error(self, line: int | None, message: str) -> None:
        self.errors.append(CorpusError(self.rel, line, message))

    def add(
        self,
        *,
        ordinal: int,
        line: int,
        abstract: Any,
        title: Any = None,
        authors: Any = None,
        url: Any = None,
        own_id: Any = None,
        venue: Any = None,
        year: Any = None,
        links: dict[str, str] | None = None,
        clean: Callable[[str], str] | None = None,
    ) -> None:
        if abstract is None or (isinstance(abstract, str) and not abstract.strip()):
            self.error(line, "record has no 'abstract'")
            return
        if not isinstance(abstract, str):
            self.error(line, f"'abstract' must be text, got {type(abstract).__name__}")
            return
        # plain-text abstracts stay verbatim (markup included: the UI escapes it);
        # only whitespace runs (e.g. a multi-line CSV cell) are collapsed
        abstract = clean(abstract) if clean else _WS.sub(" ", abstract).strip()
        if len(abstract) < MIN_ABSTRACT_CHARS:
            self.error(
                line,
                f"abstract too short ({len(abstract)} chars, need "
                f"{MIN_ABSTRACT_CHARS}): {abstract!r}",
            )
            return
        prov = Provenance(path=self.rel, ordinal=ordinal, line=line)
        title_s = _WS.sub(" ", str(title)).strip() if title not in (None, "") else ""
        if title_s and clean:
            title_s = clean(title_s)
        own = _WS.sub(" ", str(own_id)).strip() if own_id not in (None, "") else ""
        url_s = str(url).strip() if url not in (None, "") else None
        self.papers.append(
            Paper(
                paper_id=own or provenance_id(prov),
                abstract=abstract,
                title=title_s or derive_label(abstract),
                title_derived=not title_s,
                authors=_split_authors(authors),
                url=url_s,
                links=dict(links or {}),
                venue=_WS.sub(" ", str(venue)).strip() if venue not in (None, "") else None,
                year=_to_year(year),
                source=self.source,
                provenance=[prov],
            )
        )


_HEADING_MAX_CHARS = 150


def _load_seed(text: str, b: _Builder) -> None:
    """Heading line, then one abstract per non-empty line."""
    venue = year = None
    ordinal = 0
    heading_seen = False
    for lineno, raw in enumerate(split_lines(text), start=1):
        line = raw.strip()
        if not line:
            continue
        if not heading_seen:
            heading_seen = True
            # a heading is short; a long first line means the file has none
            if len(line) <= _HEADING_MAX_CHARS and len(line.split()) <= 15:
                venue, year = _venue_year_from_heading(line)
                continue
        ordinal += 1
        b.add(ordinal=ordinal, line=lineno, abstract=line, venue=venue, year=year)
    if ordinal == 0:
        b.error(None, "seed file has a heading but no abstracts (expected one abstract per line)")


def _record_fields(rec: dict[str, Any]) -> dict[str, Any]:
    links = {
        k: str(rec[k]).strip()
        for k in ("pdf", "openreview", "software", "code")
        if isinstance(rec.get(k), (str, int)) and str(rec[k]).strip()
    }
    return {
        "abstract": rec.get("abstract"),
        "title": _str_field(rec, "title"),
        "authors": rec.get("authors", rec.get("author")),
        "url": _str_field(rec, "url"),
        "own_id": _str_field(rec, "id"),
        "venue": _str_field(rec, "venue"),
        "year": rec.get("year"),
        "links": links,
    }


def _load_jsonl(text: str, b: _Builder) -> None:
    ordinal = 0
    for lineno, raw in enumerate(split_lines(text), start=1):
        if not raw.strip():
            continue
        ordinal += 1
        try:
            rec = json.loads(raw)
        except json.JSONDecodeError as e:
            b.error(lineno, f"malformed JSON: {e.msg} (column {e.colno})")
            continue
        if not isinstance(rec, dict):
            b.error(lineno, f"expected a JSON object, got {type(rec).__name__}")
            continue
        b.add(ordinal=ordinal, line=lineno, **_record_fields(rec))


def _load_json(text: str, b: _Builder) -> None:
    """A JSON array of objects, decoded element by element so every record keeps its
    line number and a syntax error still leaves the records before it."""
    dec = json.JSONDecoder()
    ws = re.compile(r"\s*")
    pos = ws.match(text, 0).end()  # type: ignore[union-attr]
    line, counted = 1, 0

    def line_at(p: int) -> int:
        nonlocal line, counted
        line += text.count("\n", counted, p)
        counted = p
        return line

    if not text.startswith("[", pos):
        b.error(line_at(pos), "expected a JSON array of objects")
        return
    pos = ws.match(text, pos + 1).end()  # type: ignore[union-attr]
    ordinal = 0
    while pos < len(text) and text[pos] != "]":
        try:
            rec, end = dec.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            b.error(e.lineno, f"malformed JSON: {e.msg} (column {e.colno}); rest of file skipped")
            return
        ordinal += 1
        rec_line = line_at(pos)
        if isinstance(rec, dict):
            b.add(ordinal=ordinal, line=rec_line, **_record_fields(rec))
        else:
            b.error(rec_line, f"expected a JSON object, got {type(rec).__name__}")
        pos = ws.match(text, end).end()  # type: ignore[union-attr]
        if text.startswith(",", pos):
            pos = ws.match(text, pos + 1).end()  # type: ignore[union-attr]
        elif not text.startswith("]", pos):
            b.error(line_at(pos), "malformed JSON: expected ',' or ']'; rest of file skipped")
            return
    if ordinal == 0:
        b.error(None, "JSON array has no records")


def _load_csv(text: str, b: _Builder) -> None:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except (StopIteration, csv.Error) as e:
        b.error(1, f"cannot read CSV header: {e}")
        return
    cols = [h.strip().lower() for h in header]
    if "abstract" not in cols:
        b.error(1, f"CSV header has no 'abstract' column (columns: {', '.join(cols)})")
        return
    ordinal = 0
    prev_end = reader.line_num
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as e:
            b.error(reader.line_num, f"malformed CSV: {e}; rest of file skipped")
            return
        start, prev_end = prev_end + 1, reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        ordinal += 1
        rec = {c: v for c, v in zip(cols, row, strict=False) if c}
        b.add(ordinal=ordinal, line=start, **_record_fields(rec))


class _PostLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """Safe YAML that keeps scalars as strings (ids like ``8e10`` or ``no`` stay text)."""


_PostLoader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag == "tag:yaml.org,2002:null"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_PMLR_PAGE = "https://proceedings.mlr.press/v{volume}/{id}.html"


def _load_post(text: str, b: _Builder) -> None:
    """A PMLR Jekyll post: YAML front matter between ``---`` lines."""
    lines = split_lines(text)
    if not lines or lines[0].strip() != "---":
        b.error(1, "no YAML front matter (a post must start with a '---' line)")
        return
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
    if end is None:
        b.error(1, "YAML front matter is not closed by a '---' line")
        return
    try:
        meta = yaml.load("\n".join(lines[1:end]), Loader=_PostLoader)  # noqa: S506 - safe loader
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        line = mark.line + 2 if mark is not None else 1  # +1 for 1-based, +1 for the '---'
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        b.error(line, f"bad YAML front matter: {problem}")
        return
    if not isinstance(meta, dict):
        b.error(2, "YAML front matter is not a mapping of fields")
        return
    abs_line = next((i + 1 for i in range(1, end) if lines[i].startswith("abstract:")), 1)
    pid = _str_field(meta, "id")
    volume = _str_field(meta, "volume")
    links: dict[str, str] = {}
    for key in ("pdf", "software", "supplementary", "video", "code"):
        v = _str_field(meta, key)
        if v:
            links[key] = v
    openreview = _str_field(meta, "openreview")
    if openreview:
        links["openreview"] = (
            openreview
            if openreview.startswith("http")
            else f"https://openreview.net/forum?id={openreview}"
        )
    for extra in meta.get("extras") or []:
        if isinstance(extra, dict) and extra.get("label") and extra.get("link"):
            links.setdefault(str(extra["label"]).strip().lower(), str(extra["link"]).strip())
    if not volume:
        m = re.search(r"(?:mlr\.press|mlresearch)/v(\d+)/", links.get("pdf", ""))
        volume = m.group(1) if m else None
    url = _str_field(meta, "url")
    if not url and pid and volume:
        url = _PMLR_PAGE.format(volume=volume, id=pid)
    url = url or links.get("openreview") or links.get("pdf")
    container = " ".join(
        s for s in (_str_field(meta, "container-title"), _str_field(meta, "booktitle")) if s
    ).lower()
    venue = (
        _str_field(meta, "venue")
        or next((v for key, v in _CONTAINER_VENUES if key in container), None)
        or ("PMLR" if volume else None)
    )
    issued = meta.get("issued")
    parts = issued.get("date-parts") if isinstance(issued, dict) else None
    year = (
        _to_year(meta.get("year"))
        or _to_year(meta.get("date"))
        or (
            _to_year(parts[0][0])
            if isinstance(parts, list) and parts and isinstance(parts[0], list) and parts[0]
            else None
        )
    )
    b.add(
        ordinal=1,
        line=abs_line,
        abstract=meta.get("abstract"),
        title=_str_field(meta, "title"),
        authors=meta.get("author", meta.get("authors")),
        url=url,
        own_id=pid,
        venue=venue,
        year=year,
        links=links,
        clean=_clean_markup,
    )


_LOADERS: dict[str, Callable[[str, _Builder], None]] = {
    ".txt": _load_seed,
    ".jsonl": _load_jsonl,
    ".json": _load_json,
    ".csv": _load_csv,
    ".md": _load_post,
    ".markdown": _load_post,
}


def load_file(path: Path, *, rel: str, source: str) -> tuple[list[Paper], list[CorpusError]]:
    """Load one corpus file. ``rel`` is its provenance path, ``source`` its source name.
    Never raises for bad input: problems come back as ``CorpusError``s."""
    path = Path(path)
    b = _Builder(rel, source)
    loader = _LOADERS.get(path.suffix.lower())
    if loader is None:
        b.error(
            None,
            f"unsupported file type {path.suffix or '(none)'!r}; expected one of "
            f"{', '.join(SUPPORTED_EXTENSIONS)}",
        )
        return b.papers, b.errors
    try:
        text, bad = read_text(path)
    except FileReadError as e:
        b.error(e.line, e.message)
        return b.papers, b.errors
    for line, message in decode_error_messages(bad):
        b.error(line, message)
    loader(text, b)
    b.errors.sort(key=lambda e: e.line or 0)
    return b.papers, b.errors


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


def load_corpus(paths: Sequence[Path | str], *, dedup_threshold: float = 0.6) -> LoadResult:
    """Load files/folders, merge near-duplicates, make ids unique and derived labels distinct.

    A folder is walked recursively; its name is the ``source`` of every paper in it.
    A file given directly is its own source (its stem)."""
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
            got, errs = load_file(f, rel=rel, source=source)
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
    papers, merged = merge_duplicates(papers, dedup_threshold)
    errors.extend(_unique_ids(papers))
    _distinct_labels(papers)
    return LoadResult(papers=papers, errors=errors, duplicates_merged=merged, files=files)


# --------------------------------------------------------------------------- dedup

_NORM_TOKEN = re.compile(r"[a-z0-9]+")


def _shingles(text: str) -> set[int]:
    """Word 3-gram shingles over markup-free, lower-cased tokens, so a seed line
    (raw LaTeX/HTML) and the cleaned PMLR version of it look the same."""
    tokens = _NORM_TOKEN.findall(html.unescape(_TAG.sub(" ", text)).lower())
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
        _has_own_id(p),
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
    own = next((p.paper_id for p in ordered if _has_own_id(p)), group[0].paper_id)
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


def _distinct_labels(papers: list[Paper]) -> None:
    """Derived labels must tell papers apart: on a clash, take the paper's next
    label candidate, else number it."""
    used = {p.title.lower() for p in papers if not p.title_derived}
    for p in papers:
        if not p.title_derived:
            continue
        if p.title.lower() not in used:
            used.add(p.title.lower())
            continue
        label = next((c for c in label_candidates(p.abstract) if c.lower() not in used), None)
        if label is None:
            n = 2
            while f"{p.title} ({n})".lower() in used:
                n += 1
            label = f"{p.title} ({n})"
        p.title = label
        used.add(label.lower())
