"""``aqa fetch pmlr <volume>``: download one PMLR volume's titles, authors,
abstracts and links (never PDFs) from proceedings.mlr.press into a folder that
``aqa ingest <folder>`` reads.

What this module owns:

- the HTTP side: one polite client (a rate limit between request starts,
  retries with exponential backoff on 5xx/429, timeouts and connection errors,
  one-line ``AqaError``s when the host cannot be reached);
- parsing the two PMLR page kinds: the volume index ``/v<N>/`` (one
  ``<div class="paper">`` per paper: title, authors, ``[abs]``/PDF/OpenReview/
  Software links) and a paper's abs page ``/v<N>/<key>.html`` (the abstract in
  ``<div id="abstract">``, authors and dates in ``<meta name="citation_*">``);
  abstracts are only on the abs pages, so a volume costs 1 + one request per
  paper;
- the output folder: one PMLR Jekyll post per paper, ``<out>/_posts/<key>.md``,
  the format of ``mlresearch/v<N>/_posts`` that ``rag.readers.pmlr`` reads
  (title, abstract, id = PMLR key, authors, url, links, container title ->
  venue, date -> year), plus a hidden manifest ``.pmlr-fetch.json`` that ingest
  skips;
- resuming: a paper whose post exists is never fetched again. Each post is
  written to a hidden temporary file and renamed into place, so an interrupted
  run leaves only whole posts; the manifest (papers without an abstract, the
  last failures) is rewritten atomically now and then and at the end;
- the ``fetch`` subcommand (``register``), added to ``aqa`` by ``aqa_cli``.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from rag.errors import AqaError
from rag.progress import Progress
from rag.progress import duration as _duration

DEFAULT_BASE_URL = "https://proceedings.mlr.press"
DEFAULT_RATE = 1.0  # requests per second: polite to a volunteer-run static site
DEFAULT_RETRIES = 4  # retries after the first try (5 tries in all)
DEFAULT_BACKOFF_S = 2.0  # first retry waits this long, then 2x, 4x, ...
MAX_BACKOFF_S = 60.0  # no single wait (backoff or Retry-After) is longer
DEFAULT_TIMEOUT_S = 30.0  # the v267 index page is several MB
LIST_SHOW = 10  # papers `--list` prints
PLAIN_PROGRESS_EVERY = 50  # papers between progress lines when stderr is not a TTY
MANIFEST_EVERY = 50  # papers between manifest rewrites (posts themselves are the truth)
POSTS_DIR = "_posts"
MANIFEST_NAME = ".pmlr-fetch.json"  # hidden: `aqa ingest` skips it
SOURCES = ("pmlr",)
USER_AGENT = "abstracts-qa (aqa fetch; metadata only, rate-limited)"
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})

_VOLUME = re.compile(r"^v?(\d+)$", re.IGNORECASE)
_HEADING = re.compile(r"<h([12])[^>]*>(.*?)</h\1>", re.DOTALL | re.IGNORECASE)
_PAPER_START = re.compile(r'<div\s+class="paper"\s*>', re.IGNORECASE)
_TITLE = re.compile(r'<p\s+class="title"[^>]*>(.*?)</p>', re.DOTALL | re.IGNORECASE)
_AUTHORS = re.compile(r'<span\s+class="authors"[^>]*>(.*?)</span>', re.DOTALL | re.IGNORECASE)
_LINK = re.compile(r"<a\s([^>]*)>(.*?)</a>", re.DOTALL | re.IGNORECASE)
_ATTR = re.compile(r'([A-Za-z_:][-\w:.]*)\s*=\s*(?:"([^"]*)"|\'([^\']*)\')')
_META = re.compile(r"<meta\s[^>]*>", re.IGNORECASE)
_ABSTRACT = re.compile(r'<div\s+id="abstract"[^>]*>(.*?)</div>', re.DOTALL | re.IGNORECASE)
_KEY = re.compile(r"/([^/]+)\.html$")
_TAG = re.compile(r"<[^>]+>")
_WS = re.compile(r"\s+")
_YEAR = re.compile(r"(?<!\d)((?:19|20)\d{2})(?!\d)")

# link text on PMLR pages -> post field (the names rag.readers.pmlr reads)
LINK_FIELDS = {
    "download pdf": "pdf",
    "pdf": "pdf",
    "openreview": "openreview",
    "software": "software",
    "code": "software",
    "supplementary pdf": "supplementary",
    "supplementary material": "supplementary",
    "supplementary": "supplementary",
    "video": "video",
}
_NOT_LINKS = frozenset({"abs", "edit", "bib", "citeproc"})


# ---------------------------------------------------------------- parsing


def _text(fragment: str) -> str:
    """HTML fragment -> plain single-spaced text."""
    return _WS.sub(" ", html.unescape(_TAG.sub(" ", fragment))).strip()


def _attrs(tag: str) -> dict[str, str]:
    return {m.group(1).lower(): html.unescape(m.group(2) if m.group(2) is not None
                                              else m.group(3))
            for m in _ATTR.finditer(tag)}


@dataclass
class IndexEntry:
    """One paper as the volume index lists it."""

    key: str  # the PMLR key, e.g. "chen25ae" (abs page /v267/chen25ae.html)
    title: str  # plain text
    authors: list[str]  # display names, "Given Family"
    links: dict[str, str] = field(default_factory=dict)  # post field -> URL
    extras: list[dict[str, str]] = field(default_factory=list)  # other links: label, link


@dataclass
class VolumeIndex:
    volume: str  # "267"
    title: str  # the heading, e.g. "Volume 267: International Conference on ..."
    url: str
    papers: list[IndexEntry]


def _links(fragment: str) -> tuple[str | None, dict[str, str], list[dict[str, str]]]:
    """(abs href, known links by post field, other links) of a page fragment."""
    abs_href, links, extras = None, {}, []
    for m in _LINK.finditer(fragment):
        href = _attrs(m.group(1)).get("href", "").strip()
        label = _text(m.group(2))
        if not href or not label:
            continue
        low = label.lower()
        if low == "abs":
            abs_href = href
        elif low in LINK_FIELDS:
            links.setdefault(LINK_FIELDS[low], href)
        elif low not in _NOT_LINKS:
            extras.append({"label": label, "link": href})
    return abs_href, links, extras


def parse_index(page: str, volume: str, url: str) -> VolumeIndex:
    """The papers of a volume index page, in page order. Entries without an
    ``[abs]`` link (nothing to fetch) are left out."""
    heading = _HEADING.search(page)
    title = _text(heading.group(2)) if heading else f"Volume {volume}"
    starts = [m.end() for m in _PAPER_START.finditer(page)]
    papers: list[IndexEntry] = []
    seen: set[str] = set()
    for i, start in enumerate(starts):
        chunk = page[start: (starts[i + 1] if i + 1 < len(starts) else len(page))]
        abs_href, links, extras = _links(chunk)
        key_m = _KEY.search(urlsplit(abs_href).path) if abs_href else None
        if not key_m or key_m.group(1) in seen:
            continue
        seen.add(key_m.group(1))
        t = _TITLE.search(chunk)
        a = _AUTHORS.search(chunk)
        authors = ([n for n in (_text(x) for x in a.group(1).split(",")) if n] if a else [])
        papers.append(IndexEntry(key=key_m.group(1), title=_text(t.group(1)) if t else "",
                                 authors=authors, links=links, extras=extras))
    return VolumeIndex(volume=volume, title=title, url=url, papers=papers)


@dataclass
class AbsPage:
    """What a paper's abs page adds to its index entry."""

    abstract: str | None  # inner HTML, whitespace collapsed (the reader cleans markup)
    meta: dict[str, list[str]]  # citation_* name -> values, in page order
    links: dict[str, str]
    extras: list[dict[str, str]]


def parse_abs_page(page: str) -> AbsPage:
    meta: dict[str, list[str]] = {}
    for tag in _META.findall(page):
        a = _attrs(tag)
        name = a.get("name", "").lower()
        if name.startswith("citation_") and "content" in a:
            meta.setdefault(name, []).append(_WS.sub(" ", a["content"]).strip())
    m = _ABSTRACT.search(page)
    abstract = _WS.sub(" ", m.group(1)).strip() if m else None
    _, links, extras = _links(page)
    return AbsPage(abstract=abstract or None, meta=meta, links=links, extras=extras)


def _author(name: str) -> dict[str, str]:
    """A ``citation_author`` ("Family, Given") as the post's ``given``/``family``."""
    family, sep, given = name.partition(",")
    if sep and family.strip() and given.strip() and "," not in given:
        return {"given": given.strip(), "family": family.strip()}
    return {"name": name.strip()}


def post_fields(entry: IndexEntry, page: AbsPage, index: VolumeIndex,
                abs_url: str) -> dict[str, Any]:
    """The front matter of a paper's post (fields ``rag.readers.pmlr`` reads,
    plus page numbers, kept as PMLR has them)."""
    meta = {k: v[0] for k, v in page.meta.items() if v}
    authors = ([_author(a) for a in page.meta.get("citation_author", []) if a.strip()]
               or [{"name": a} for a in entry.authors])
    date = meta.get("citation_publication_date", "").replace("/", "-") or None
    year_m = _YEAR.search(date or "") or _YEAR.search(index.title)
    container = (meta.get("citation_conference_title") or meta.get("citation_journal_title")
                 or re.sub(r"^Volume \d+:\s*", "", index.title))
    links = {**page.links, **entry.links}  # the index's links win, the abs page fills gaps
    if meta.get("citation_pdf_url"):
        links.setdefault("pdf", meta["citation_pdf_url"])
    extras = list(entry.extras)
    extras += [x for x in page.extras if x["link"] not in {e["link"] for e in extras}]
    fields: dict[str, Any] = {
        "title": entry.title or _text(meta.get("citation_title", "")),
        "abstract": page.abstract,
        "id": entry.key,
        "volume": index.volume,
        "author": authors,
        "container-title": container,
        "date": date,
        "year": year_m.group(1) if year_m else None,
        "url": abs_url,
        **{k: links[k] for k in ("pdf", "openreview", "software", "supplementary", "video")
           if links.get(k)},
        "firstpage": meta.get("citation_firstpage"),
        "lastpage": meta.get("citation_lastpage"),
        "extras": extras,
        "layout": "inproceedings",
        "publisher": "PMLR",
    }
    return {k: v for k, v in fields.items() if v not in (None, "")}


def render_post(fields: dict[str, Any]) -> str:
    front = yaml.safe_dump(fields, sort_keys=False, allow_unicode=True, width=100)
    return f"---\n{front}---\n"


# ---------------------------------------------------------------- HTTP


class HostUnreachable(AqaError):
    """The host did not answer at all (DNS, refused, timeouts), after retries."""


class HttpFailure(AqaError):
    """The host answered with an error status (after retries, for 5xx/429)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def _unreachable(host: str, reason: str) -> HostUnreachable:
    return HostUnreachable(
        f"cannot reach {host}: {reason} — check your connection; re-running resumes"
    )


class Client:
    """GET with a rate limit between request starts and retries with
    exponential backoff. ``sleep``/``clock`` are injectable for tests."""

    def __init__(self, *, rate: float = DEFAULT_RATE, retries: int = DEFAULT_RETRIES,
                 backoff: float = DEFAULT_BACKOFF_S, timeout: float = DEFAULT_TIMEOUT_S,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        import httpx  # pinned by chromadb; imported here so `aqa --help` stays fast

        if rate <= 0:
            raise AqaError(f"--rate must be above 0 requests per second, got {rate}")
        self._httpx = httpx
        self.interval, self.retries, self.backoff = 1.0 / rate, max(0, retries), backoff
        self.sleep, self.clock = sleep, clock
        self.requests = 0  # requests sent, retries included
        self._next_at = 0.0
        self._http = httpx.Client(timeout=timeout, follow_redirects=True,
                                  headers={"User-Agent": USER_AGENT})

    def close(self) -> None:
        self._http.close()

    def _throttle(self) -> None:
        wait = self._next_at - self.clock()
        if wait > 0:
            self.sleep(wait)
        self._next_at = self.clock() + self.interval

    def _wait(self, attempt: int, retry_after: str | None) -> None:
        delay = self.backoff * (2 ** attempt)
        if retry_after and retry_after.strip().isdigit():  # a server's own hint wins
            delay = max(delay, float(retry_after))
        self.sleep(min(delay, MAX_BACKOFF_S))

    def get(self, url: str) -> str:
        """The body of ``url``; ``HostUnreachable`` or ``HttpFailure`` after retries."""
        host = urlsplit(url).netloc or url
        httpx = self._httpx
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            self._throttle()
            self.requests += 1
            try:
                resp = self._http.get(url)
            except (httpx.TimeoutException, httpx.NetworkError,
                    httpx.RemoteProtocolError) as e:
                if last:
                    raise _unreachable(host, str(e) or type(e).__name__) from None
                self._wait(attempt, None)
                continue
            except httpx.HTTPError as e:  # a bad URL, a redirect loop: retrying won't help
                raise AqaError(f"cannot fetch {url}: {e}") from None
            if resp.status_code < 400:
                return resp.text
            if resp.status_code in RETRY_STATUS and not last:
                self._wait(attempt, resp.headers.get("Retry-After"))
                continue
            tries = f" after {attempt + 1} tries" if attempt else ""
            raise HttpFailure(f"{host} answered HTTP {resp.status_code} for {url}{tries}",
                              resp.status_code)
        raise AssertionError("unreachable")  # the loop always returns or raises


# ---------------------------------------------------------------- output folder


def _write_atomic(path: Path, text: str) -> None:
    """Write via a hidden temporary file in the same folder, then rename: readers
    (and `aqa ingest`) never see half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def post_path(out: Path, key: str) -> Path:
    return out / POSTS_DIR / f"{key}.md"


def _read_manifest(out: Path) -> dict[str, Any]:
    path = out / MANIFEST_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return {}  # a damaged manifest only costs refetching papers without abstracts
    return data if isinstance(data, dict) else {}


# ---------------------------------------------------------------- progress


# ---------------------------------------------------------------- the fetch


def normalise_volume(volume: str) -> str:
    m = _VOLUME.match(volume.strip())
    if not m:
        raise AqaError(f"not a PMLR volume: {volume!r} (expected e.g. v267 or 267)")
    return str(int(m.group(1)))


def index_url(base_url: str, volume: str) -> str:
    return f"{base_url.rstrip('/')}/v{volume}/"


def fetch_index(client: Client, base_url: str, volume: str) -> VolumeIndex:
    url = index_url(base_url, volume)
    try:
        page = client.get(url)
    except HttpFailure as e:
        if e.status == 404:
            raise AqaError(f"no PMLR volume v{volume} at {url} (HTTP 404) — check the "
                           "volume number (ICML 2025 is v267)") from None
        raise AqaError(f"{e} — try again later; re-running resumes") from None
    index = parse_index(page, volume, url)
    if not index.papers:
        raise AqaError(f"{url} lists no papers (no <div class=\"paper\"> with an [abs] link): "
                       "not a PMLR volume index page?")
    return index


@dataclass
class FetchReport:
    volume: str
    title: str
    out: str
    papers_listed: int  # in the index (after --limit)
    fetched: int  # posts written by this run
    already: int  # posts (or known abstract-less papers) kept from earlier runs
    no_abstract: list[str]  # keys whose abs page has no abstract (no post written)
    failed: dict[str, str]  # key -> error, retried by the next run
    requests: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def fetch_volume(volume: str, out: Path, *, base_url: str = DEFAULT_BASE_URL,
                 limit: int | None = None, client: Client | None = None,
                 progress: bool = True, stream: Any = None) -> FetchReport:
    """Fetch volume ``volume`` into ``out``; papers with a post there are skipped.

    Connection failures abort with a one-line ``AqaError`` (what was written
    stays); a paper whose page keeps failing is reported in ``failed`` and the
    rest go on. The manifest is rewritten at the end, also when interrupted."""
    volume = normalise_volume(volume)
    out = Path(out)
    old = _read_manifest(out)
    if old.get("volume") not in (None, volume):
        raise AqaError(f"{out} holds PMLR v{old['volume']} (see {out / MANIFEST_NAME}); "
                       f"choose another --out for v{volume}")
    own = client is None
    client = client or Client()
    t0 = time.monotonic()
    try:
        index = fetch_index(client, base_url, volume)
        entries = index.papers[:limit] if limit else index.papers
        (out / POSTS_DIR).mkdir(parents=True, exist_ok=True)
        no_abstract = set(old.get("no_abstract") or []) & {e.key for e in entries}
        todo = [e for e in entries
                if e.key not in no_abstract and not post_path(out, e.key).exists()]
        report = FetchReport(volume=volume, title=index.title, out=str(out),
                             papers_listed=len(entries), fetched=0,
                             already=len(entries) - len(todo), no_abstract=[], failed={},
                             requests=0, seconds=0.0)

        def save() -> None:
            report.no_abstract = sorted(no_abstract)
            report.requests, report.seconds = client.requests, time.monotonic() - t0
            _write_atomic(out / MANIFEST_NAME, json.dumps({
                "volume": volume, "title": index.title, "index_url": index.url,
                "papers_listed": len(index.papers),
                "posts": sum(1 for _ in (out / POSTS_DIR).glob("*.md")),
                "no_abstract": report.no_abstract, "failed": report.failed,
                "updated": datetime.now(UTC).isoformat(timespec="seconds"),
            }, indent=1, ensure_ascii=False) + "\n")

        if progress:  # after the index: an offline run prints only its error line
            rate = 1.0 / client.interval
            print(f"{index.title}: {len(entries)} papers, {len(todo)} to fetch into {out} "
                  f"(1 request each, at most {rate:g}/s: about {_duration(len(todo) / rate)})…",
                  file=stream or sys.stderr, flush=True)
        bar = (Progress(len(todo), verb="fetched", unit="paper", stream=stream,
                       every=PLAIN_PROGRESS_EVERY) if progress else None)
        try:
            for n, entry in enumerate(todo, start=1):
                _fetch_one(client, base_url, index, entry, out, report, no_abstract)
                if bar is not None:
                    bar.step(f"{len(report.failed)} failed" if report.failed else "")
                if n % MANIFEST_EVERY == 0:
                    save()
        finally:
            if bar is not None:
                bar.close()
            save()
        return report
    finally:
        if own:
            client.close()


def _fetch_one(client: Client, base_url: str, index: VolumeIndex, entry: IndexEntry,
               out: Path, report: FetchReport, no_abstract: set[str]) -> None:
    # the index links abs pages on the canonical host; a --base-url mirror serves the same paths
    url = f"{base_url.rstrip('/')}/v{index.volume}/{entry.key}.html"
    try:
        page = parse_abs_page(client.get(url))
    except HttpFailure as e:
        report.failed[entry.key] = str(e)
        return
    if not page.abstract:
        no_abstract.add(entry.key)  # refetching would not help; ingest needs an abstract
        return
    _write_atomic(post_path(out, entry.key), render_post(post_fields(entry, page, index, url)))
    report.fetched += 1


def list_volume(volume: str, *, base_url: str = DEFAULT_BASE_URL,
                client: Client | None = None) -> VolumeIndex:
    """The volume's index only (one request): what ``--list`` prints."""
    volume = normalise_volume(volume)
    own = client is None
    client = client or Client()
    try:
        return fetch_index(client, base_url, volume)
    finally:
        if own:
            client.close()


# ---------------------------------------------------------------- CLI


def default_out(volume: str) -> Path:
    return Path(f"pmlr-v{normalise_volume(volume)}")


def _print_list(index: VolumeIndex, show: int) -> None:
    print(index.title)
    print(f"{len(index.papers)} papers at {index.url}")
    for e in index.papers[:show]:
        authors = ", ".join(e.authors)
        print(f"  {e.key:<18} {e.title}" + (f" — {authors}" if authors else ""))
    if len(index.papers) > show:
        print(f"  … and {len(index.papers) - show} more "
              f"(fetch them: aqa fetch pmlr v{index.volume})")


def cmd_fetch(args: argparse.Namespace) -> int:
    client = Client(rate=args.rate, retries=args.retries, backoff=args.backoff,
                    timeout=args.timeout)
    try:
        if args.list:
            index = list_volume(args.volume, base_url=args.base_url, client=client)
            show = args.limit or LIST_SHOW
            if args.json:
                print(json.dumps({"volume": index.volume, "title": index.title,
                                  "url": index.url, "count": len(index.papers),
                                  "papers": [asdict(e) for e in index.papers[:show]]},
                                 ensure_ascii=False))
            else:
                _print_list(index, show)
            return 0
        out = Path(args.out) if args.out else default_out(args.volume)
        rep = fetch_volume(args.volume, out, base_url=args.base_url, limit=args.limit,
                           client=client)
    finally:
        client.close()
    if args.json:
        print(json.dumps(rep.to_dict(), ensure_ascii=False))
    else:
        print(f"PMLR v{rep.volume}: {rep.fetched + rep.already} of {rep.papers_listed} papers "
              f"in {out} ({rep.fetched} fetched now, {rep.already} already there, "
              f"{len(rep.no_abstract)} without an abstract, {len(rep.failed)} failed; "
              f"{rep.requests} HTTP request{'s' if rep.requests != 1 else ''} in "
              f"{_duration(rep.seconds)}). Next: aqa ingest {out}")
    for key, err in rep.failed.items():
        print(f"warning: {key}: {err}", file=sys.stderr)
    if rep.failed:
        print(f"error: {len(rep.failed)} papers failed; re-run the same command to retry "
              "them (the others are kept)", file=sys.stderr)
        return 1
    return 0


def register(sub: Any) -> None:
    """Add ``aqa fetch`` to the ``aqa`` subparsers."""
    p = sub.add_parser(
        "fetch", help="download a PMLR volume's titles, authors, abstracts and links "
        "(no PDFs) into a folder for `aqa ingest`",
        description="Download one PMLR volume (e.g. v267 = ICML 2025) from "
        "proceedings.mlr.press: 1 request for the index plus 1 per paper. "
        "Re-running resumes: papers already fetched are skipped.")
    p.add_argument("source", choices=SOURCES, help="where from (only pmlr for now)")
    p.add_argument("volume", help="PMLR volume, e.g. v267 (ICML 2025)")
    p.add_argument("--out", metavar="DIR",
                   help="output folder (default: ./pmlr-v<volume>; its name becomes the "
                   "papers' source at ingest)")
    p.add_argument("--list", action="store_true",
                   help="only show what the volume holds (1 request; no abstracts)")
    p.add_argument("--limit", type=_positive_int, metavar="N",
                   help="only the first N papers of the volume (with --list: show N)")
    p.add_argument("--rate", type=float, default=DEFAULT_RATE, metavar="R",
                   help=f"at most R requests per second (default {DEFAULT_RATE:g})")
    p.add_argument("--retries", type=int, default=DEFAULT_RETRIES, metavar="N",
                   help=f"retries per request on 5xx/timeouts (default {DEFAULT_RETRIES})")
    p.add_argument("--backoff", type=float, default=DEFAULT_BACKOFF_S, metavar="S",
                   help=f"first retry wait in seconds, doubled each retry "
                   f"(default {DEFAULT_BACKOFF_S:g})")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="S",
                   help=f"per-request timeout in seconds (default {DEFAULT_TIMEOUT_S:g})")
    p.add_argument("--base-url", default=DEFAULT_BASE_URL,
                   help=f"site root (default {DEFAULT_BASE_URL}; a mirror or a test server)")
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")
    p.set_defaults(fn=cmd_fetch)


def _positive_int(value: str) -> int:
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


__all__ = [
    "Client", "FetchReport", "IndexEntry", "VolumeIndex", "fetch_volume", "list_volume",
    "parse_abs_page", "parse_index", "post_fields", "register", "render_post",
]
