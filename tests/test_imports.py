"""Import hygiene: importing the engine's vocabulary is cheap and has no side
effects, ``rag`` never imports the UI or the evals, no import cycle runs in
``rag`` (the settings are a leaf even counting lazy imports), and the ``aqa``
entry assembles every command (a part that fails to import says so when used)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "chromadb", "gradio", "llama_cpp", "llama_index", "sentence_transformers")


def _modules_after(code: str, env: dict[str, str] | None = None) -> dict:
    probe = (
        f"{code}\nimport json, os, sys\n"
        "print(json.dumps({'modules': sorted({m.split('.')[0] for m in sys.modules}), "
        "'env': dict(os.environ)}))"
    )
    r = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module", ["rag.types", "rag", "rag.labels", "rag.corpus", "rag.cli",
                                    "rag.engine"])  # engine: a fresh re-ingest imports none
def test_light_imports_load_no_model_library(module: str) -> None:
    got = _modules_after(f"import {module}")
    assert not [m for m in HEAVY if m in got["modules"]], got["modules"]
    assert "ui" not in got["modules"] and "eval" not in got["modules"]


def test_importing_rag_leaves_the_environment_alone() -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_OFFLINE", "TIKTOKEN_CACHE_DIR", "OMP_WAIT_POLICY")}
    got = _modules_after("import rag, rag.corpus, rag.cli", env=env)
    for name in ("HF_HUB_OFFLINE", "TIKTOKEN_CACHE_DIR", "OMP_WAIT_POLICY"):
        assert name not in got["env"]


def test_no_module_under_rag_imports_ui_or_eval() -> None:
    offenders = []
    for path in sorted((REPO / "rag").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                     else [])
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in ("ui", "eval")]
    assert offenders == []


def _subcommands(parser) -> set[str]:
    import argparse

    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices)


def test_rag_cli_alone_has_the_engine_commands_and_the_entry_adds_the_rest() -> None:
    import aqa_cli
    from rag.cli import build_parser

    engine_cmds = {"ingest", "search", "ask", "compare", "papers", "status"}
    assert _subcommands(build_parser()) == engine_cmds
    full = engine_cmds | {"serve", "eval", "bench", "mcp", "fetch"}
    assert _subcommands(build_parser(aqa_cli.registrars())) == full


def test_entry_points_set_up_the_offline_environment(monkeypatch, tmp_path, capsys) -> None:
    import rag.cli

    calls = []
    monkeypatch.setattr(rag.cli, "setup_offline_env", lambda: calls.append(1))
    rc = rag.cli.main(["status", "--data-dir", str(tmp_path / "missing")], registrars=())
    assert rc == 2 and calls == [1]
    assert "No index at" in capsys.readouterr().err


def test_an_eval_suite_that_fails_to_import_says_so_when_used() -> None:
    code = (
        "import sys; sys.modules['eval.cli'] = None\n"  # `from eval.cli import …` fails
        "import aqa_cli\n"
        "sys.exit(aqa_cli.main(['eval', 'run', '--no-llm']))"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2, r.stderr
    assert "evaluation suite" in r.stderr and "abstracts-qa[eval]" in r.stderr
    assert "Traceback" not in r.stderr


class _Imports(ast.NodeVisitor):
    """The modules a file imports: at import time (module level, class bodies, inside
    ``if``/``try``), with ``lazy`` also inside functions. ``if TYPE_CHECKING:`` blocks
    are left out: they never run, and are how an annotation may name a module that
    imports this one."""

    def __init__(self, modules: set[str], lazy: bool) -> None:
        self.modules, self.lazy, self.names = modules, lazy, set()

    def visit_If(self, node: ast.If) -> None:
        if "TYPE_CHECKING" not in ast.unparse(node.test):
            self.generic_visit(node)
        else:
            for child in node.orelse:
                self.visit(child)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if self.lazy:
            self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Import(self, node: ast.Import) -> None:
        self.names |= {a.name for a in node.names}

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        # `from rag import topics` imports rag.topics (rag/__init__ only runs first, its
        # own imports are its edges); `from rag import Settings` depends on rag itself
        if node.module and not node.level:
            self.names |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in self.modules
                           else node.module for a in node.names}


def _rag_imports(*, lazy: bool) -> dict[str, set[str]]:
    """Module under rag/ -> the rag modules it imports."""
    def name_of(path: Path) -> str:
        parts = path.relative_to(REPO).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    modules = {name_of(p): p for p in (REPO / "rag").rglob("*.py")}
    graph = {}
    for mod, path in modules.items():
        visitor = _Imports(set(modules), lazy)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8")))
        graph[mod] = {n for n in visitor.names if n in modules and n != mod}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each import cycle, as the path that closes it (depth-first search)."""
    found, done = [], set()

    def walk(mod: str, path: list[str]) -> None:
        for dep in sorted(graph[mod]):
            if dep in path:
                found.append(path[path.index(dep):] + [dep])
            elif dep not in done:
                walk(dep, [*path, dep])
        done.add(mod)

    for mod in sorted(graph):
        if mod not in done:
            walk(mod, [mod])
    return found


def test_no_import_cycle_in_rag() -> None:
    """No module under rag/ imports, at import time, one that imports it back."""
    assert _cycles(_rag_imports(lazy=False)) == []


def test_the_settings_are_a_leaf_even_counting_lazy_imports() -> None:
    """rag.config and rag.config_sections reach nothing that imports them back, not
    even through an import inside a function (e.g. a validator looking up the
    provider registry): every module may import the settings."""
    config = {"rag.config", "rag.config_sections"}
    through = [c for c in _cycles(_rag_imports(lazy=True)) if config & set(c)]
    assert through == []
    graph = _rag_imports(lazy=True)
    assert "rag.config" not in graph["rag.config_sections"]  # one direction only


def test_installed_plugins_add_commands_through_the_entry_point_group(monkeypatch, capsys):
    """Issue #27: a package adds `aqa` commands through the abstracts_qa.commands
    entry-point group; a broken one is one warning, not a broken `aqa`."""
    import importlib.metadata as md

    import aqa_cli

    def register(sub):
        sub.add_parser("hello").set_defaults(fn=lambda args: print("hi") or 0)

    class EP:
        def __init__(self, name, value, target):
            self.name, self.value, self._target = name, value, target

        def load(self):
            if isinstance(self._target, Exception):
                raise self._target
            return self._target

    eps = [EP("hello", "demo:register", register),
           EP("broken", "nope:register", ImportError("No module named 'nope'"))]
    monkeypatch.setattr(md, "entry_points",
                        lambda group=None: eps if group == aqa_cli.PLUGIN_GROUP else [])
    assert aqa_cli.main(["hello"]) == 0
    out = capsys.readouterr()
    assert out.out.strip() == "hi"
    assert "aqa plugin 'broken' (nope:register) failed to load" in out.err
