"""``aqa mcp``: the tools in process on the fake engine, the server through the
SDK's in-memory client, and a real ``aqa mcp`` subprocess over stdio and
streamable HTTP, driven by the SDK's own client (``ClientSession``).

The subprocess tests that are not ``slow`` run the ``aqa`` entry point in a
Python that first registers the test fakes (a subprocess cannot see the
providers registered in this process); the ``slow`` one runs the installed
``aqa`` script with the real MiniLM and the 135M SmolLM2."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import Client, ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from rag.errors import LLMError  # noqa: E402
from rag.mcp_server import EngineHolder, Tools, build_server, locate  # noqa: E402
from tests.conftest import UNIT_DECISION  # noqa: E402
from tests.test_answer import SHIELD_Q, ScriptedLLM, ids_of, pick  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
AQA = str(Path(sys.executable).parent / "aqa")
TOOLS = {"search_papers", "ask", "compare_papers", "get_paper", "list_papers"}
CALL_TIMEOUT = 120  # seconds for a whole client session (the slow one loads real models)


class ShieldLLM(ScriptedLLM):
    """Answers with the 11.3% sentence of ShieldAgent, cited; a comparison's
    synthesis (a one-message prompt) is one sentence citing both papers."""

    def __init__(self) -> None:
        super().__init__(pick("11.3%"),
                         lambda s: f"ShieldAgent outperforms prior methods by 11.3% {ids_of('11.3%', s)}.")

    def stream_chat(self, messages, **kw):
        if len(messages) == 1:
            yield "Both defend LLM agents against attacks [1][2]."
            return
        yield from super().stream_chat(messages, **kw)


def shield_llm() -> ShieldLLM:
    return ShieldLLM()


# --- the checks every transport shares ----------------------------------------

def check_offsets(items: list[dict], abstract_of, quote_key: str) -> int:
    """Every quote is verbatim at its offsets; returns how many were checked."""
    n = 0
    for it in items:
        q = it[quote_key]
        assert it["start"] is not None, it  # every engine quote is verbatim
        assert abstract_of(it["paper_id"])[it["start"]:it["end"]] == q, it
        n += 1
    return n


def check_search(out: dict, abstract_of) -> None:
    assert out["results"], out
    for h in out["results"]:
        assert isinstance(h["score"], float) and h["score_words"].endswith("match")
        check_offsets([{**p, "paper_id": h["paper_id"]} for p in h["passages"]],
                      abstract_of, "text")


def check_ask(out: dict, abstract_of, *, answered: bool = True) -> None:
    d = out["decision"]
    assert d["outcome"] in ("answered", "not_confirmed", "declined")
    if answered:
        assert d["outcome"] == "answered" and out["synthesis"], out
        assert out["evidence"] and "11.3%" in out["evidence"][0]["quote"]
    else:
        assert d["reason"] if d["outcome"] == "declined" else True
    for e in out["evidence"]:
        assert e["support"].endswith("match") and e["title"]
    check_offsets(out["evidence"], abstract_of, "quote")


def check_compare(out: dict, abstract_of) -> None:
    assert len(out["papers"]) == 2 and out["aspects"]
    stated = [{**cell, "paper_id": pid} for pid, row in out["cells"].items()
              for cell in row.values() if cell["stated"]]
    assert check_offsets(stated, abstract_of, "quote") > 0


# --- in process -----------------------------------------------------------------

@pytest.fixture
def tools(fake_engine) -> Tools:
    eng = fake_engine(llm=shield_llm())
    return Tools(lambda: eng)


def test_tools_give_structured_results_with_verbatim_offsets(tools: Tools) -> None:
    def abstract_of(pid: str) -> str:
        return tools.get_paper(pid)["abstract"]

    check_search(tools.search_papers("prompt injection defense for agents", k=3), abstract_of)
    check_ask(tools.ask(SHIELD_Q), abstract_of)
    out = tools.compare_papers(["ShieldAgent", "MELON"], aspects=["problem", "approach"])
    assert out["aspects"] == ["problem", "approach"]
    check_compare(out, abstract_of)
    p = tools.get_paper("ShieldAgent")
    assert p["title"].startswith("ShieldAgent") and p["resource"].startswith("paper://")


def test_ask_restricted_to_papers(tools: Tools) -> None:
    melon = tools.get_paper("MELON")["paper_id"]
    out = tools.ask("What attacks does it defend against?", paper_ids=["MELON"])
    assert out["pinned"] == [melon]
    assert all(e["paper_id"] == melon for e in out["evidence"])


def test_list_papers_pages_through_every_paper(tools: Tools) -> None:
    seen, cursor = [], None
    while True:
        page = tools.list_papers(cursor=cursor, limit=20)
        seen += [p["paper_id"] for p in page["papers"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == page["total"] == 57
    only = tools.list_papers(filters=_filters(years=[1999]))
    assert only == {"papers": [], "total": 0, "next_cursor": None}


def _filters(**kw: Any):
    from rag.mcp_server import PaperFilters

    return PaperFilters(**kw)


def test_locate_gives_no_offsets_for_a_quote_that_is_not_verbatim() -> None:
    assert locate("b c", "a b c") == {"start": 2, "end": 5}
    got = locate("b  c", "a b c")
    assert got["start"] is None and got["end"] is None and "not found" in got["offsets_note"]


def _call(server, *steps):
    """Run ``steps`` (async functions of a connected in-memory ``Client``)."""
    results = []

    async def main() -> None:
        async with Client(server) as client:
            for step in steps:
                results.append(await step(client))

    anyio.run(main)
    return results


def test_server_lists_five_tools_and_paper_resources(tools: Tools) -> None:
    async def listing(c):
        return await c.list_tools()

    async def resources(c):
        return await c.list_resources()

    async def read(c):
        return await c.read_resource("paper://" + tools.get_paper("MELON")["paper_id"])

    listed, res, body = _call(build_server(tools), listing, resources, read)
    assert {t.name for t in listed.tools} == TOOLS
    for t in listed.tools:
        assert "not instructions" in t.description and t.annotations.read_only_hint
    assert len(res.resources) == 57 and all(r.uri.startswith("paper://") for r in res.resources)
    assert body.contents[0].text == tools.get_paper("MELON")["abstract"]


def _error_text(server, tool: str, args: dict) -> str:
    async def call(c):
        return await c.call_tool(tool, args)

    (r,) = _call(server, call)
    assert r.is_error, r
    text = r.content[0].text
    assert "Traceback" not in text and "\n" not in text
    return text


def test_errors_are_one_line_tool_errors(tools: Tools, fake_engine, tmp_path: Path) -> None:
    server = build_server(tools)
    assert "No paper matches 'no-such-paper'" in _error_text(server, "get_paper",
                                                             {"paper_id": "no-such-paper"})
    assert "Invalid cursor" in _error_text(server, "list_papers", {"cursor": "x"})
    assert "Unknown aspect" in _error_text(server, "compare_papers",
                                           {"paper_ids": ["MELON", "ShieldAgent"],
                                            "aspects": ["vibes"]})

    class Down:
        name = "down"

        def stream_chat(self, *a, **kw):
            raise LLMError("Cannot reach the LLM server at http://127.0.0.1:9/v1.")
            yield ""  # a generator, like a real LLM

    eng = fake_engine(llm=Down())
    text = _error_text(build_server(Tools(lambda: eng)), "ask", {"question": SHIELD_Q})
    assert "Cannot reach the LLM server" in text

    from rag.engine import Engine

    empty = tmp_path / "empty"
    empty.mkdir()
    holder = EngineHolder(lambda: Engine(eng.settings.updated(data_dir=empty), create=False))
    text = _error_text(build_server(Tools(holder.get)), "search_papers", {"query": "agents"})
    assert "No papers indexed" in text and "aqa ingest" in text


def test_aqa_has_the_mcp_command_and_says_what_to_install_without_it() -> None:
    import aqa_cli
    from rag.cli import build_parser

    assert "mcp" in build_parser(aqa_cli.registrars())._subparsers._group_actions[0].choices
    code = ("import sys; sys.modules['rag.mcp_server'] = None\n"
            "import aqa_cli\nsys.exit(aqa_cli.main(['mcp']))")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and "abstracts-qa[mcp]" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


# --- a real `aqa mcp` subprocess ------------------------------------------------

# The `aqa` entry point, after registering the fakes (and an LLM that answers).
LAUNCH = (
    "import sys, tests.conftest\n"
    "from rag.providers import register_llm\n"
    "from tests.test_mcp import shield_llm\n"
    "register_llm('fake', lambda settings: shield_llm(), replace=True)\n"
    "import aqa_cli\n"
    "sys.exit(aqa_cli.main(sys.argv[1:]))\n"
)


def fake_env() -> dict[str, str]:
    return {"PYTHONPATH": str(REPO), "AQA_EMBED_PROVIDER": "fake", "AQA_LLM_PROVIDER": "fake",
            "AQA_DECISION_FILE": str(UNIT_DECISION), "AQA_RELEVANCE_FLOOR": "0"}


def _env(extra: dict[str, str]) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("AQA_", "OPENAI_"))}
    return {**e, "OMP_WAIT_POLICY": "PASSIVE", **extra}


@pytest.fixture
def fake_index(fake_index_dir: Path, tmp_path: Path) -> Path:
    d = tmp_path / "idx"
    shutil.copytree(fake_index_dir, d)
    return d


async def _exercise(session: ClientSession) -> dict[str, Any]:
    """The five tools, a resource and an error, as a client sees them."""
    await session.initialize()
    out: dict[str, Any] = {"tools": {t.name for t in (await session.list_tools()).tools}}
    abstracts: dict[str, str] = {}

    async def call(name: str, args: dict) -> dict:
        r = await session.call_tool(name, args)
        assert not r.is_error, r.content
        assert json.loads(r.content[0].text) == r.structured_content  # text mirrors structure
        return r.structured_content

    out["search"] = await call("search_papers", {"query": "guardrail agent safety policies",
                                                 "k": 3})
    out["ask"] = await call("ask", {"question": SHIELD_Q})
    out["compare"] = await call("compare_papers", {"paper_ids": ["ShieldAgent", "MELON"]})
    out["list"] = await call("list_papers", {"limit": 10})
    ids = {h["paper_id"] for h in out["search"]["results"]}
    ids |= {e["paper_id"] for e in out["ask"]["evidence"]} | set(out["compare"]["cells"])
    for pid in ids:
        abstracts[pid] = (await call("get_paper", {"paper_id": pid}))["abstract"]
        body = await session.read_resource(f"paper://{pid}")
        assert body.contents[0].text == abstracts[pid]
    out["abstracts"] = abstracts
    bad = await session.call_tool("get_paper", {"paper_id": "no-such-paper"})
    out["error"] = (bad.is_error, bad.content[0].text)
    return out


def _check_session(out: dict[str, Any], *, answered: bool = True) -> None:
    assert out["tools"] == TOOLS
    abstract_of = out["abstracts"].__getitem__
    check_search(out["search"], abstract_of)
    check_ask(out["ask"], abstract_of, answered=answered)
    check_compare(out["compare"], abstract_of)
    assert len(out["list"]["papers"]) == 10 and out["list"]["next_cursor"] == "10"
    is_error, text = out["error"]
    assert is_error and "No paper matches 'no-such-paper'" in text and "Traceback" not in text


def _stdio(command: str, args: list[str], env: dict[str, str], cwd: Path) -> dict[str, Any]:
    params = StdioServerParameters(command=command, args=args, env=env, cwd=str(cwd))

    async def main() -> dict[str, Any]:
        with anyio.fail_after(CALL_TIMEOUT):
            async with stdio_client(params) as (read, write):
                async with ClientSession(read, write) as session:
                    return await _exercise(session)

    return anyio.run(main)


def test_stdio_subprocess(fake_index: Path) -> None:
    # cwd outside the checkout: no .env there changes the settings
    out = _stdio(sys.executable, ["-c", LAUNCH, "mcp", "--data-dir", str(fake_index)],
                 _env(fake_env()), fake_index.parent)
    _check_session(out)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_streamable_http_subprocess(fake_index: Path) -> None:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, "mcp", "--http", "--port", str(port),
                             "--data-dir", str(fake_index)], env=_env(fake_env()),
                            cwd=fake_index.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + CALL_TIMEOUT
        while True:  # until uvicorn listens
            assert proc.poll() is None, proc.communicate()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.2)

        async def main() -> dict[str, Any]:
            with anyio.fail_after(CALL_TIMEOUT):
                async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (r, w):
                    async with ClientSession(r, w) as session:
                        return await _exercise(session)

        _check_session(anyio.run(main))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert proc.stdout.read() == b""  # people's messages go to stderr


def test_streamable_http_uses_the_apps_login_when_set(fake_index: Path) -> None:
    """With AQA_AUTH_USER/AQA_AUTH_PASSWORD set (the app's login), the HTTP
    endpoint answers 401 without it and serves an MCP session with it."""
    import base64

    import httpx

    port = _free_port()
    env = _env({**fake_env(), "AQA_AUTH_USER": "ada", "AQA_AUTH_PASSWORD": "s3cret"})
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, "mcp", "--http", "--port", str(port),
                             "--data-dir", str(fake_index), "--lazy"], env=env,
                            cwd=fake_index.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + CALL_TIMEOUT
        while True:
            assert proc.poll() is None, proc.communicate()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.2)
        assert httpx.post(url, json={}, timeout=10).status_code == 401
        wrong = "Basic " + base64.b64encode(b"ada:nope").decode()
        assert httpx.post(url, json={}, headers={"Authorization": wrong},
                          timeout=10).status_code == 401
        login = {"Authorization": "Basic " + base64.b64encode(b"ada:s3cret").decode()}

        async def main() -> set[str]:
            with anyio.fail_after(CALL_TIMEOUT):
                async with httpx.AsyncClient(headers=login, timeout=CALL_TIMEOUT) as client:
                    async with streamable_http_client(url, http_client=client) as (r, w):
                        async with ClientSession(r, w) as session:
                            await session.initialize()
                            return {t.name for t in (await session.list_tools()).tools}

        assert anyio.run(main) == TOOLS
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_missing_index_and_port_in_use_are_one_line(tmp_path: Path) -> None:
    env = _env(fake_env())
    r = subprocess.run([sys.executable, "-c", LAUNCH, "mcp", "--data-dir", str(tmp_path / "no")],
                       env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "does not exist" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "idx").mkdir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run([sys.executable, "-c", LAUNCH, "mcp", "--http", "--port", str(port),
                            "--data-dir", str(tmp_path / "idx")], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "another --port" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_installed_aqa_mcp_with_real_models(real_index_dir: Path, tmp_path: Path) -> None:
    """The `aqa` script as an MCP client configuration runs it: real MiniLM,
    the 135M SmolLM2 (which may well decline: the decision is checked for
    shape, and every quote it does give for offsets)."""
    d = tmp_path / "idx"
    shutil.copytree(real_index_dir, d)
    env = _env({"AQA_LLM_PROVIDER": "local", "AQA_LOCAL_MODEL": "smollm2-135m",
                "AQA_DECISION_FILE": str(UNIT_DECISION), "AQA_MAX_TOKENS": "60"})
    out = _stdio(AQA, ["mcp", "--data-dir", str(d)], env, tmp_path)
    _check_session(out, answered=False)


def test_stdio_stdout_is_the_protocol_only(fake_index: Path) -> None:
    """Raw JSON-RPC over the pipe: every stdout line is a protocol message,
    also after a tool call has loaded the engine."""
    from mcp.types import DEFAULT_NEGOTIATED_VERSION

    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": DEFAULT_NEGOTIATED_VERSION, "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "search_papers", "arguments": {"query": "diffusion", "k": 1}}},
    ]
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, "mcp", "--data-dir", str(fake_index)],
                            env=_env(fake_env()), cwd=fake_index.parent, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for m in msgs:
            proc.stdin.write(json.dumps(m) + "\n")
            proc.stdin.flush()
            if "id" in m:  # wait for its response before the next request
                lines.append(proc.stdout.readline())
        proc.stdin.close()  # EOF: the server exits
        rest, err = proc.stdout.read(), proc.stderr.read()
        proc.wait(timeout=CALL_TIMEOUT)
    finally:
        proc.kill()
    replies = [json.loads(ln) for ln in lines + rest.splitlines() if ln.strip()]
    assert [r.get("id") for r in replies] == [1, 2], (replies, err)
    assert replies[1]["result"]["structuredContent"]["results"], replies[1]
    assert "serving" in err  # people's messages: stderr
