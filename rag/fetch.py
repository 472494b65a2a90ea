"""``aqa fetch pmlr <volume>``: download one PMLR volume's titles, authors,
abstracts and links (never PDFs) from proceedings.mlr.press into a folder that
``aqa ingest <folder>`` reads.

What this module owns (the HTTP client is ``rag.fetch_http``, the page parsing
``rag.pmlr_pages``; their public names are re-exported here):

- the fetch: the volume index, then one abs page per paper, so a volume costs
  1 + one request per paper;
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
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rag.errors import AqaError
from rag.fetch_http import (
    DEFAULT_BACKOFF_S,
    DEFAULT_RATE,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT_S,
    MAX_BACKOFF_S,
    RETRY_STATUS,
    USER_AGENT,
    Client,
    HostUnreachable,
    HttpFailure,
)
from rag.pmlr_pages import (
    LINK_FIELDS,
    AbsPage,
    IndexEntry,
    VolumeIndex,
    parse_abs_page,
    parse_index,
    post_fields,
    render_post,
)
from rag.progress import Progress
from rag.progress import duration as _duration

DEFAULT_BASE_URL = "https://proceedings.mlr.press"
LIST_SHOW = 10  # papers `--list` prints
PLAIN_PROGRESS_EVERY = 50  # papers between progress lines when stderr is not a TTY
MANIFEST_EVERY = 50  # papers between manifest rewrites (posts themselves are the truth)
POSTS_DIR = "_posts"
MANIFEST_NAME = ".pmlr-fetch.json"  # hidden: `aqa ingest` skips it
SOURCES = ("pmlr",)

_VOLUME = re.compile(r"^v?(\d+)$", re.IGNORECASE)


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
    "DEFAULT_BACKOFF_S", "DEFAULT_RATE", "DEFAULT_RETRIES", "DEFAULT_TIMEOUT_S", "LINK_FIELDS",
    "MAX_BACKOFF_S", "RETRY_STATUS", "USER_AGENT", "AbsPage", "Client", "FetchReport",
    "HostUnreachable", "HttpFailure", "IndexEntry", "VolumeIndex", "fetch_volume",
    "list_volume", "parse_abs_page", "parse_index", "post_fields", "register", "render_post",
]
