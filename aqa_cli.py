"""The ``aqa`` command: the engine's commands (``rag.cli``) plus the ones the
other packages add, assembled here so that ``rag`` never imports them.

- ``serve``: the Gradio app (``ui.app``; needs the ``[ui]`` extra).
- ``eval`` and ``bench``: the evaluation suite (``eval.cli.register``; its
  reports need the ``[eval]`` extra).
- ``mcp``: the MCP server (``rag.mcp_server.register``; needs the ``[mcp]`` extra).
- ``fetch``: a PMLR volume's abstracts (``rag.fetch.register``).
- any command an installed package declares in the ``abstracts_qa.commands``
  entry-point group (``name = "pkg.module:register"``).

A part that cannot be imported still has its command: using it prints what is
missing and how to install it, instead of the command silently vanishing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from rag.cli import Registrar, common_options, settings_for
from rag.errors import AqaError
from rag.fetch import register as register_fetch


def _missing(what: str, extra: str, err: ImportError) -> Callable[[argparse.Namespace], int]:
    def fail(args: argparse.Namespace) -> int:
        raise AqaError(
            f"{what} is not available: {err}. Install it with "
            f"`pip install 'abstracts-qa[{extra}]'` (or run ./setup.sh for everything)."
        )

    return fail


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from ui.server import check_port, serve
    except ImportError as e:  # gradio not installed
        return _missing("`aqa serve` (the Gradio app)", "ui", e)(args)

    settings = settings_for(args)
    over = {k: v for k, v in (("host", args.host), ("port", args.port)) if v}
    settings = settings.updated(**over)
    check_port(settings.ui.host, settings.ui.port)  # a port in use: one line, before any loading
    data_dir = settings.storage.data_dir
    if args.data_dir and not data_dir.is_dir() and not args.ingest:
        # A mistyped --data-dir must not silently become a new 57-paper index.
        raise AqaError(f"No index at {data_dir} (the folder does not exist): check the path, "
                       "or add --ingest to build a new index there from the corpus.")
    from rag.engine import Engine

    eng = Engine(settings)
    print(f"Index: {data_dir.resolve()}", file=sys.stderr, flush=True)
    if args.ingest:  # serve() itself indexes the corpus when the index is empty
        eng.ingest(progress=True)
    return serve(settings, engine=eng)


def register_serve(sub: Any) -> None:
    s = sub.add_parser("serve", parents=[common_options()], help="the Gradio app")
    s.add_argument("--host")
    s.add_argument("--port", type=int)
    s.add_argument("--ingest", action="store_true", help="(re)ingest the corpus first")
    s.set_defaults(fn=cmd_serve)


def _eval_registrar() -> Registrar:
    try:
        from eval.cli import register
    except ImportError as e:  # the eval suite is not installed or is broken
        err = e

        def register(sub: Any) -> None:
            fail = _missing("The evaluation suite (`aqa eval`, `aqa bench`)", "eval", err)
            for name, help_ in (("eval", "offline answer-quality evaluation"),
                                ("bench", "speed benchmarks")):
                p = sub.add_parser(name, help=f"{help_} (not available: {err})")
                p.add_argument("rest", nargs=argparse.REMAINDER)
                p.set_defaults(fn=fail)

    return register


def _mcp_registrar() -> Registrar:
    try:
        from rag.mcp_server import register
    except ImportError as e:  # the `mcp` SDK is not installed
        err = e

        def register(sub: Any) -> None:
            p = sub.add_parser("mcp", help=f"MCP server (not available: {err})")
            p.add_argument("rest", nargs=argparse.REMAINDER)
            p.set_defaults(fn=_missing("`aqa mcp` (the MCP server)", "mcp", err))

    return register


PLUGIN_GROUP = "abstracts_qa.commands"  # entry points: name -> a register(subparsers) callable


def plugin_registrars() -> list[Registrar]:
    """Commands other installed packages add through the ``abstracts_qa.commands``
    entry-point group; one that fails to load is reported on stderr in one line
    and left out, so a broken plugin never breaks ``aqa``."""
    from importlib.metadata import entry_points

    out: list[Registrar] = []
    for ep in sorted(entry_points(group=PLUGIN_GROUP), key=lambda e: e.name):
        try:
            out.append(ep.load())
        except Exception as e:  # noqa: BLE001 - a plugin's own failure, said in one line
            print(f"warning: aqa plugin {ep.name!r} ({ep.value}) failed to load: {e}",
                  file=sys.stderr)
    return out


def registrars() -> list[Registrar]:
    """Every subcommand registrar beyond the engine's own commands: this
    project's other packages, then installed plugins (``PLUGIN_GROUP``)."""
    return [register_serve, _eval_registrar(), _mcp_registrar(), register_fetch,
            *plugin_registrars()]


def main(argv: list[str] | None = None) -> int:
    from rag.cli import main as rag_main

    return rag_main(argv, registrars=registrars())


if __name__ == "__main__":
    sys.exit(main())
