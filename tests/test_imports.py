"""Import hygiene: importing the engine's vocabulary is cheap and has no side
effects, ``rag`` never imports the UI or the evals, and the ``aqa`` entry
assembles every command (a part that fails to import says so when used)."""

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
