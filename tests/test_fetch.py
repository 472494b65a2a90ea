"""`aqa fetch pmlr` without the network: recorded PMLR pages (tests/fixtures/pmlr/,
4 real v267 papers in the site's HTML format) served by a local HTTP server that
counts requests and can fail on purpose."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import aqa_cli
from rag.corpus import load_corpus
from rag.errors import AqaError
from rag.fetch import (
    MANIFEST_NAME,
    POSTS_DIR,
    Client,
    fetch_volume,
    normalise_volume,
    parse_abs_page,
    parse_index,
)
from rag.progress import Progress

FIXTURES = Path(__file__).parent / "fixtures" / "pmlr"
KEYS = ["a-mancisidor25a", "aamand25b", "abbahaddou25a", "abdulhai25a"]
INDEX = "/v267/"
FAST = ["--rate", "1000", "--backoff", "0.001", "--retries", "2"]  # tests never wait
AQA = Path(sys.executable).parent / "aqa"


class PmlrServer:
    """Serves tests/fixtures/pmlr/<volume>/ as the site; ``hits`` counts GETs per
    path; ``fail[path]`` is a list of statuses answered first (``forever`` keeps one)."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.fail: dict[str, list[int]] = {}
        self.forever: dict[str, int] = {}
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                with server.lock:
                    server.hits[self.path] += 1
                    status = server.forever.get(self.path)
                    if status is None and server.fail.get(self.path):
                        status = server.fail[self.path].pop(0)
                if status:
                    self.send_response(status)
                    self.send_header("Retry-After", "0")
                    self.end_headers()
                    return
                parts = self.path.strip("/").split("/")
                name = "index.html" if len(parts) == 1 else parts[-1]
                f = FIXTURES / parts[0] / name
                if not (f.is_file() and parts[0].startswith("v")):
                    self.send_error(404)
                    return
                body = f.read_bytes()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def paper_hits(self) -> dict[str, int]:
        return {k: self.hits[f"/v267/{k}.html"] for k in KEYS}


@pytest.fixture
def site():
    s = PmlrServer()
    s.thread.start()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


def fetch_cli(site: PmlrServer, out: Path, *extra: str) -> int:
    return aqa_cli.main(["fetch", "pmlr", "v267", "--base-url", site.url, "--out", str(out),
                         *FAST, *extra])


def posts(out: Path) -> list[str]:
    return sorted(p.stem for p in (out / POSTS_DIR).glob("*.md"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- parsing


def test_index_and_abs_page_parse_as_the_site_writes_them():
    index = parse_index((FIXTURES / "v267" / "index.html").read_text(), "267", INDEX)
    assert index.title.startswith("Volume 267: International Conference on Machine Learning")
    assert [e.key for e in index.papers] == KEYS
    first = index.papers[0]
    assert first.authors[:2] == ["Rogelio A. Mancisidor", "Robert Jenssen"]  # &nbsp; separated
    assert first.links["openreview"] == "https://openreview.net/forum?id=jYmGi1175R"
    assert first.links["software"] == "https://github.com/rogelioamancisidor/codevae"
    assert first.links["pdf"].endswith("/a-mancisidor25a/a-mancisidor25a.pdf")

    page = parse_abs_page((FIXTURES / "v267" / "aamand25b.html").read_text())
    assert page.abstract.startswith("We study differentially private algorithms")
    assert "<em>inefficient</em>" in page.abstract  # markup kept; the reader cleans it
    assert page.meta["citation_author"][3] == "Mitrović, Slobodan"
    assert page.meta["citation_firstpage"] == ["59"]


def test_entities_and_missing_parts_are_handled():
    page = ('<h2>Volume 9: Tiny &amp; Test</h2><div class="paper"><p class="title">Sim &amp; '
            'Real</p><span class="authors">A&nbsp;B,&nbsp;C D</span>'
            '[<a href="https://proceedings.mlr.press/v9/ab25a.html">abs</a>]</div>'
            '<div class="paper"><p class="title">No abs link</p></div>')
    index = parse_index(page, "9", "u")
    assert index.title == "Volume 9: Tiny & Test"
    assert [(e.key, e.title, e.authors) for e in index.papers] == [
        ("ab25a", "Sim & Real", ["A B", "C D"])]
    assert parse_abs_page("<html></html>").abstract is None


def test_volume_names():
    assert normalise_volume("v267") == normalise_volume("267") == "267"
    with pytest.raises(AqaError, match="not a PMLR volume"):
        normalise_volume("icml2025")


# ---------------------------------------------------------------- fetching


def test_fetch_makes_a_folder_the_engine_ingests(site, tmp_path):
    from rag.config import Settings
    from rag.engine import Engine
    from tests.conftest import FakeEmbedding

    out = tmp_path / "pmlr-v267"
    rep = fetch_volume("v267", out, base_url=site.url, client=Client(rate=1000),
                       progress=False)
    assert (rep.fetched, rep.already, rep.failed, rep.requests) == (4, 0, {}, 5)
    assert posts(out) == sorted(KEYS)
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    assert (manifest["volume"], manifest["posts"], manifest["papers_listed"]) == ("267", 4, 4)

    s = Settings(_env_file=None, data_dir=tmp_path / "idx", corpus_paths=[out])
    eng = Engine(s, embed_model=FakeEmbedding())
    report = eng.ingest(progress=False)
    assert report.errors == [] and report.papers_total == 4
    by_id = {p.paper_id: p for p in eng.papers()}
    assert sorted(by_id) == sorted(KEYS)
    p = by_id["a-mancisidor25a"]
    assert p.title == ("Aggregation of Dependent Expert Distributions in Multimodal "
                       "Variational Autoencoders")
    assert not p.title_derived
    assert p.authors == ["Rogelio A. Mancisidor", "Robert Jenssen", "Shujian Yu",
                         "Michael Kampffmeyer"]  # "Family, Given" meta -> given + family
    assert p.url == f"{site.url}/v267/a-mancisidor25a.html"
    assert (p.venue, p.year, p.source) == ("ICML", 2025, "pmlr-v267")
    assert p.links["openreview"] == "https://openreview.net/forum?id=jYmGi1175R"
    assert p.links["software"] == "https://github.com/rogelioamancisidor/codevae"
    assert p.links["pdf"].endswith("a-mancisidor25a.pdf")
    q = by_id["aamand25b"]
    assert "Slobodan Mitrović" in q.authors
    assert "<em>" not in q.abstract and "inefficient algorithms" in q.abstract


def test_a_paper_failing_forever_is_retried_by_the_next_run_only(site, tmp_path, capsys):
    out = tmp_path / "out"
    site.forever["/v267/aamand25b.html"] = 500
    assert fetch_cli(site, out) == 1
    err = capsys.readouterr().err
    assert "aamand25b" in err and "HTTP 500" in err and "re-run" in err
    assert posts(out) == sorted(set(KEYS) - {"aamand25b"})
    assert site.paper_hits()["aamand25b"] == 3  # 1 try + 2 retries
    assert "aamand25b" in json.loads((out / MANIFEST_NAME).read_text())["failed"]

    del site.forever["/v267/aamand25b.html"]
    assert fetch_cli(site, out) == 0
    assert posts(out) == sorted(KEYS)
    assert site.paper_hits() == {"a-mancisidor25a": 1, "aamand25b": 4, "abbahaddou25a": 1,
                                 "abdulhai25a": 1}
    assert site.hits[INDEX] == 2
    assert json.loads((out / MANIFEST_NAME).read_text())["failed"] == {}


def test_a_stopped_run_resumes_without_refetching(site, tmp_path, capsys):
    out = tmp_path / "out"
    assert fetch_cli(site, out, "--limit", "2") == 0  # a run stopped after 2 papers
    assert posts(out) == sorted(KEYS[:2])
    assert fetch_cli(site, out) == 0
    assert posts(out) == sorted(KEYS)
    assert set(site.paper_hits().values()) == {1}
    text = capsys.readouterr()
    assert "2 fetched now, 2 already there" in text.out
    assert "fetched 2/2 papers" in text.err  # plain progress lines: stderr is not a TTY
    assert not list(out.rglob("*.tmp"))


def test_retries_back_off_exponentially_then_succeed(site, tmp_path):
    site.fail["/v267/abbahaddou25a.html"] = [503, 503]
    waits: list[float] = []
    client = Client(rate=1000, backoff=0.5, retries=3, sleep=waits.append)
    rep = fetch_volume("267", tmp_path / "out", base_url=site.url, client=client,
                       progress=False)
    assert rep.failed == {} and rep.fetched == 4
    assert site.paper_hits()["abbahaddou25a"] == 3
    backoffs = [w for w in waits if w >= 0.5]  # the rest are rate-limit waits (<= 1 ms)
    assert backoffs == [0.5, 1.0]


def test_list_shows_the_volume_without_fetching_papers(site, tmp_path, capsys):
    assert aqa_cli.main(["fetch", "pmlr", "v267", "--list", "--base-url", site.url]) == 0
    out = capsys.readouterr().out
    assert "Volume 267: International Conference on Machine Learning" in out
    assert "4 papers" in out and "a-mancisidor25a" in out and "Rogelio A. Mancisidor" in out
    assert sum(site.paper_hits().values()) == 0 and site.hits[INDEX] == 1

    assert aqa_cli.main(["fetch", "pmlr", "v267", "--list", "--limit", "2", "--json",
                         "--base-url", site.url]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["count"] == 4 and [p["key"] for p in data["papers"]] == KEYS[:2]


def test_unknown_volume_is_one_line(site, tmp_path, capsys):
    rc = aqa_cli.main(["fetch", "pmlr", "v999", "--base-url", site.url, *FAST,
                       "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "no PMLR volume v999" in err[0]
    assert not (tmp_path / "x").exists()


def test_offline_is_one_line_and_a_nonzero_exit(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    proc = subprocess.run([str(AQA), "fetch", "pmlr", "v267", "--base-url", url, *FAST,
                           "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: cannot reach 127.0.0.1:")
    assert "check your connection; re-running resumes" in lines[0]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


def test_an_out_folder_of_another_volume_is_refused(site, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / MANIFEST_NAME).write_text(json.dumps({"volume": "235"}))
    with pytest.raises(AqaError, match="holds PMLR v235"):
        fetch_volume("267", out, base_url=site.url, client=Client(rate=1000),
                     progress=False)


def test_fetched_posts_load_like_the_bundled_distractors(site, tmp_path):
    """Same reader, same fields as the v267 posts in eval/distractors."""
    out = tmp_path / "pmlr-v267"
    fetch_volume("267", out, base_url=site.url, client=Client(rate=1000), progress=False)
    ours = {p.paper_id: p for p in load_corpus([out]).papers}
    ref_dir = Path(__file__).parent.parent / "eval" / "distractors" / "v267" / "_posts"
    ref = {p.paper_id: p for p in load_corpus([ref_dir]).papers if p.paper_id in ours}
    assert sorted(ref) == sorted(KEYS)
    for key, r in ref.items():
        o = ours[key]
        assert (o.title, o.authors, o.abstract, o.venue, o.year) == (
            r.title, r.authors, r.abstract, r.venue, r.year)
        assert {k: v for k, v in o.links.items() if k != "openreview"} == {
            k: v for k, v in r.links.items() if k != "openreview"}
        assert o.links["openreview"] == r.links["openreview"]


def test_progress_is_a_bar_on_a_terminal_and_lines_otherwise():
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty, plain = Tty(), io.StringIO()
    for stream in (tty, plain):
        bar = Progress(3, verb="fetched", unit="paper", stream=stream, every=2)
        for _ in range(3):
            bar.step()
        bar.close()
    assert "3/3" in tty.getvalue() and "paper/s" in tty.getvalue()  # tqdm: counts, rate, ETA
    assert plain.getvalue().splitlines()[0].startswith("fetched 2/3 papers")
    assert plain.getvalue().splitlines()[-1].startswith("fetched 3/3 papers")
