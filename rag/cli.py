"""The engine's commands of ``aqa``: ingest, search, ask, compare, papers, status.

Every command is a thin call into ``rag.Engine``; ``--json`` prints the
engine's own ``to_dict()`` structures (schema in docs/architecture.md), and what
it prints for people is ``rag.cli_output``'s. The ``aqa``
console script is the top-level ``aqa_cli`` module: it adds the commands that
other packages register (``serve`` from the UI, ``eval``/``bench`` from
``eval.cli``) through ``build_parser(registrars)``, so ``rag`` never imports
them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rag.cli_output import (
    _print_answer,
    _print_comparison,
    _print_evidence,
    _print_hits,
    status_text,
)
from rag.config import Settings, load_settings, preset_names, settings_error, setup_offline_env
from rag.errors import AqaError
from rag.types import Filters

# A registrar adds subcommands to the ``aqa`` subparsers; each stores its
# handler as ``fn`` (args -> exit code), like the commands below.
Registrar = Callable[[Any], None]


def settings_for(args: argparse.Namespace) -> Settings:
    """Settings with the common flags (--preset, --data-dir, --mode) applied."""
    base = load_settings(getattr(args, "preset", None))
    over = {}
    if getattr(args, "data_dir", None):
        over["data_dir"] = Path(args.data_dir)
    if getattr(args, "mode", None):
        over["retriever"] = args.mode
    return base.updated(**over) if over else base


# Commands that only read an index: a --data-dir that does not exist is an
# error for them (with the fix), never silently created.
READ_ONLY = frozenset({"search", "ask", "status", "papers", "compare"})


def _say(msg: str) -> None:
    """Progress for people, on stderr, so stdout stays the result."""
    print(msg, file=sys.stderr, flush=True)


def _engine(args: argparse.Namespace):
    settings = settings_for(args)
    read_only = getattr(args, "command", None) in READ_ONLY
    data_dir = settings.storage.data_dir
    if read_only and not data_dir.is_dir():
        raise AqaError(
            f"No index at {data_dir}: the folder does not exist. Run `aqa ingest"
            + (f" --data-dir {data_dir}" if getattr(args, "data_dir", None) else "")
            + "` first, or point --data-dir at an existing index."
        )
    from rag.engine import Engine

    eng = Engine(settings, create=not read_only)
    _say(f"Index: {data_dir.resolve()}" + (" (read-only)" if eng.read_only else ""))
    return eng


def _filters(args: argparse.Namespace) -> Filters | None:
    return Filters.from_lists(args.source, args.venue, args.year, args.paper)


def _emit(obj: dict) -> None:
    print(json.dumps(obj, ensure_ascii=False))


def _batch(path: str | None, single: str | None) -> Iterable[str]:
    if path:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        return [ln.strip() for ln in lines if ln.strip()]
    if not single:
        raise AqaError("Give a question, or --batch FILE with one question per line.")
    return [single]


def _history(path: str | None) -> list[dict]:
    """Chat messages from a JSON file: [{"role", "content", "papers"?}, ...]."""
    if not path:
        return []
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise AqaError(f"--history {path}: not a readable JSON file ({e})") from e
    if not isinstance(data, list) or not all(
        isinstance(m, dict) and m.get("role") in ("user", "assistant") for m in data
    ):
        raise AqaError(f"--history {path}: expected a JSON list of {{role, content}} messages")
    return data


def cmd_ingest(args):
    missing = [p for p in args.paths or () if not Path(p).exists()]
    if missing:  # a typo: say so before loading anything, and index nothing
        raise AqaError(f"{missing[0]}: no such file or folder; nothing was ingested.")
    _say("Loading the index and the embedding model…")
    eng = _engine(args)
    where = ", ".join(str(p) for p in (args.paths or eng.settings.corpus.corpus_paths))
    _say(f"Reading, embedding and indexing {where} (unchanged papers are skipped)…")
    rep = eng.ingest(args.paths or None, prune=args.prune, rebuild=args.rebuild,
                     progress=True)
    if rep.errors and not rep.papers_total:  # nothing indexed: say why, one line each
        for e in rep.errors:
            print(f"error: {e}", file=sys.stderr)
        if args.json:
            _emit(rep.to_dict())
        return 1
    tmap = eng.topic_map()  # cached by the ingest just now: free
    _say(f"Topic map: {len(tmap.clusters)} clusters ({tmap.method}), "
         f"computed in {tmap.seconds:.1f}s.")
    if args.json:
        _emit(rep.to_dict())
    else:
        print(f"Indexed {rep.papers_total} papers in {eng.settings.storage.data_dir} "
              f"({rep.papers_added} added, {rep.papers_updated} updated, "
              f"{rep.papers_unchanged} unchanged, {rep.papers_pruned} pruned, "
              f"{rep.duplicates_merged} duplicates merged; {rep.chunks_embedded} chunks embedded, "
              f"{rep.embeddings_cached} from cache) in {rep.seconds:.1f}s")
        for e in rep.errors:
            print(f"warning: {e}", file=sys.stderr)
    return 1 if rep.errors and not rep.papers_total else 0


def cmd_search(args):
    _say("Loading the embedding model…")
    eng = _engine(args)
    eng.warm(llm=False)
    for q in _batch(args.batch, args.query):
        hits = eng.search(q, k=args.k, filters=_filters(args))
        if args.json or args.batch:
            _emit({"query": q, "results": [h.to_dict() for h in hits]})
        else:
            _print_hits(hits)


def cmd_ask(args):
    _say("Loading the index and the embedding model…")
    eng = _engine(args)
    history = _history(args.history)
    filters = _filters(args)
    if filters and filters.paper_ids:  # ids, labels or titles, like compare
        filters.paper_ids = [eng.get_paper(r).paper_id for r in filters.paper_ids]
    t0 = time.perf_counter()
    eng.warm(llm=False)
    _say(f"Embedding model ready ({time.perf_counter() - t0:.1f}s). Loading the language "
         f"model ({eng.llm_name}) while the abstracts are searched…")
    llm_ready = eng.warm_llm_in_background()
    if args.json or args.batch:  # timings that are the question's own, not the model load
        llm_ready.join()
    tty = sys.stdout.isatty()
    for q in _batch(args.batch, args.question):
        if args.json or args.batch:
            _emit(eng.ask(q, history=history, k=args.k, filters=filters).to_dict())
            continue
        answer, streamed, shown = None, False, False
        for ev in eng.ask_stream(q, history=history, k=args.k, filters=filters):
            if ev.kind == "status":
                _say(ev.text)
            elif ev.kind == "passages" and ev.answer:  # within a second: what was found
                papers = {p.paper_id: p for p in (h.paper for h in ev.answer.retrieved)}
                for e in ev.answer.passages:
                    _say(f"  {e.number}. {papers[e.paper_id].name} ({e.relevance:.2f}): "
                         f"“{e.text[:150]}{'…' if len(e.text) > 150 else ''}”")
            elif ev.kind == "evidence" and ev.answer:
                if ev.answer.interpreted:
                    print(f"Interpreted as: {ev.answer.interpreted}")
                if ev.answer.citations:  # quotes first, as the web app shows them
                    _print_evidence(ev.answer.citations)
                    shown = True
                    if tty:
                        print("Answer: ", end="", flush=True)
            elif ev.kind == "token" and tty:  # streamed once, on a terminal only
                print(ev.text, end="", flush=True)
                streamed = True
            elif ev.kind == "answer":
                answer = ev.answer
        if answer and answer.declined and answer.interpreted and not streamed and not shown:
            print(f"Interpreted as: {answer.interpreted}")
        _print_answer(answer, streamed=streamed, evidence_shown=shown)


def cmd_compare(args):
    _say("Loading the index…")
    eng = _engine(args)
    c = eng.compare(args.papers or None, query=args.query, progress=_say)
    _emit(c.to_dict()) if args.json else _print_comparison(c)


def cmd_papers(args):
    eng = _engine(args)
    if args.query and args.query.strip():
        _say("Loading the embedding model…")
        hits = eng.search(args.query, k=args.limit or 20, filters=_filters(args))
        if args.json:
            for h in hits:
                _emit(h.to_dict())
        else:
            _print_hits(hits)
        return
    papers = eng.papers(None, limit=args.limit, filters=_filters(args))
    if args.json:
        for p in papers:
            _emit(p.to_dict())
        return
    for p in papers:
        print(f"{p.paper_id}\t{p.display_title}\t{p.source}")


def cmd_status(args):
    st = _engine(args).status()
    if args.json:
        _emit(st.to_dict())
    else:
        print(status_text(st))
    return 0 if st.health.get("ok", True) else 1


def common_options() -> argparse.ArgumentParser:
    """The --preset/--data-dir/--json parent parser, for commands that others register."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--preset", metavar="NAME",
                        help="named settings from rag/presets/ (default: AQA_PRESET); "
                        f"one of {', '.join(preset_names())}; env and .env still win")
    common.add_argument("--data-dir", help="index location (default: AQA_DATA_DIR, else a "
                                           "per-user folder; `aqa status` prints it)")
    common.add_argument("--json", action="store_true", help="machine-readable JSON output")
    return common


def build_parser(registrars: Sequence[Registrar] = ()) -> argparse.ArgumentParser:
    """The ``aqa`` parser: the engine's commands, then those of each registrar."""
    common = common_options()

    meta = argparse.ArgumentParser(add_help=False)  # metadata filters
    meta.add_argument("--source", action="append", help="only this source (repeatable)")
    meta.add_argument("--venue", action="append", help="only this venue (repeatable)")
    meta.add_argument("--year", action="append", type=int, help="only this year (repeatable)")
    meta.add_argument("--paper", action="append", help="only this paper id (repeatable)")

    filt = argparse.ArgumentParser(add_help=False, parents=[meta])  # retrieval options
    filt.add_argument("-k", type=int, default=None, help="papers to retrieve")
    filt.add_argument("--mode", choices=["hybrid", "dense", "bm25"], help="retriever")
    filt.add_argument("--batch", help="file with one query per line; prints JSON Lines")

    p = argparse.ArgumentParser(prog="aqa", description="Question answering over paper abstracts")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("ingest", parents=[common], help="index abstracts (default: bundled corpus)")
    s.add_argument("paths", nargs="*", help="files or folders (seed .txt, .jsonl, .json, .csv, PMLR _posts)")
    s.add_argument("--prune", action="store_true", help="remove papers not in PATHS")
    s.add_argument("--rebuild", action="store_true", help="drop the index and rebuild it")
    s.set_defaults(fn=cmd_ingest)

    s = sub.add_parser("search", parents=[common, filt], help="hybrid search, no LLM")
    s.add_argument("query", nargs="?")
    s.set_defaults(fn=cmd_search)

    s = sub.add_parser("ask", parents=[common, filt], help="a cited answer")
    s.add_argument("question", nargs="?")
    s.add_argument("--history", help="JSON file of earlier messages, for follow-up questions")
    s.set_defaults(fn=cmd_ask)

    s = sub.add_parser("compare", parents=[common], help="compare 2-4 papers side by side")
    s.add_argument("papers", nargs="*", help="paper ids, labels or titles")
    s.add_argument("--query", help="select the papers by a query instead")
    s.set_defaults(fn=cmd_compare)

    # Only the flags that do something here: -k, --mode and --batch are rejected.
    s = sub.add_parser("papers", parents=[common, meta],
                       help="list papers, or find them by QUERY (scores and snippets)")
    s.add_argument("query", nargs="?")
    s.add_argument("--limit", type=int, help="at most this many papers (search: default 20)")
    s.set_defaults(fn=cmd_papers)

    s = sub.add_parser("status", parents=[common], help="what is indexed")
    s.set_defaults(fn=cmd_status)

    for register in registrars:
        register(sub)
    return p


def main(argv: list[str] | None = None, registrars: Sequence[Registrar] | None = None) -> int:
    """Run one ``aqa`` command. ``registrars`` default to the full ``aqa``
    command set of the top-level entry module (``aqa_cli``)."""
    setup_offline_env()  # before any command imports the model libraries
    if registrars is None:
        registrars = _entry_registrars()
    args = build_parser(registrars).parse_args(argv)
    try:
        return int(args.fn(args) or 0)
    except AqaError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ValidationError as e:
        if e.title != "Settings":
            raise
        print(f"error: {settings_error(e)}", file=sys.stderr)  # from the env, .env or a flag
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _entry_registrars() -> Sequence[Registrar]:
    """The registrars of the ``aqa`` entry module (``aqa_cli``, a top-level
    module beside ``rag``: it imports the UI and eval packages, ``rag`` does
    not), so that ``python -m rag.cli`` is the whole ``aqa`` command."""
    import importlib

    try:
        entry = importlib.import_module("aqa_cli")
    except ModuleNotFoundError as e:
        if e.name != "aqa_cli":
            raise
        print("note: the aqa entry module is not installed; only the engine's commands "
              "are available", file=sys.stderr)
        return ()
    return entry.registrars()


if __name__ == "__main__":  # `python -m rag.cli` is the `aqa` command
    sys.exit(main())
