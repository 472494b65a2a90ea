"""A non-editable install works: the wheel carries the prompts and the bundled
corpus as package data, and `aqa` runs from outside the repository.

Offline: the wheel is built without build isolation and installed with
``--no-deps --target`` into a temp folder that is put on ``PYTHONPATH`` of
this venv's Python (whose site-packages provide the dependencies)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "README.md", "aqa_cli.py", "rag", "ui", "eval", "prompts", "data")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project built as a wheel (from a copy, so the checkout gets no build
    folders) and installed into ``<tmp>/site``."""
    tmp = tmp_path_factory.mktemp("pkg")
    src = tmp / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "runs")
    for name in SOURCES:
        p = REPO / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=ignore)
        else:
            shutil.copy2(p, src / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    env = {**os.environ, "PIP_NO_INDEX": "1"}  # never the network
    r = subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w",
                        str(tmp / "wheel"), str(src)], capture_output=True, text=True,
                       env=env, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (wheel,) = (tmp / "wheel").glob("abstracts_qa-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "rag/_prompts/evidence_system.txt" in names
    assert "rag/_corpus/icml2025/metadata.jsonl" in names
    assert "rag/label_words.json" in names and "rag/readers/venues.json" in names
    assert "aqa_cli.py" in names
    r = subprocess.run([*pip, "install", "--no-deps", "--target", str(tmp / "site"), str(wheel)],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return tmp / "site"


def _run(site: Path, args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("AQA_", "OPENAI_"))}
    e.update(PYTHONPATH=str(site), AQA_LLM_PROVIDER="local", AQA_LOCAL_MODEL="smollm2-135m",
             **env)
    if "AQA_MODEL_CACHE_DIR" in os.environ:
        e["AQA_MODEL_CACHE_DIR"] = os.environ["AQA_MODEL_CACHE_DIR"]
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True,
                          env=e, timeout=900)


def test_installed_package_finds_its_prompts_and_bundled_corpus(installed, tmp_path) -> None:
    code = (
        "import json, rag, rag.config as c\n"
        "from rag.prompts import load_prompt\n"
        "from rag.corpus import load_corpus\n"
        "res = load_corpus([c.BUNDLED_CORPUS])\n"
        "print(json.dumps({'rag': rag.__file__, 'prompts': str(c.PROMPTS_DIR),\n"
        "  'corpus': str(c.BUNDLED_CORPUS), 'prompt': load_prompt('evidence_system')[:40],\n"
        "  'papers': len(res.papers), 'errors': len(res.errors)}))"
    )
    r = _run(installed, ["-c", code], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    site = str(installed)
    assert got["rag"].startswith(site), got  # the installed copy, not the checkout
    assert got["prompts"].startswith(site) and got["corpus"].startswith(site), got
    assert got["prompt"] and got["papers"] == 57 and got["errors"] == 0, got


def test_installed_aqa_ingests_searches_and_asks_outside_the_repo(installed, tmp_path) -> None:
    data = tmp_path / "idx"
    r = _run(installed, ["-m", "aqa_cli", "ingest", "--data-dir", str(data), "--json"],
             cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout.strip().splitlines()[-1])["papers_total"] == 57
    r = _run(installed, ["-m", "aqa_cli", "search", "guardrail agent", "--data-dir", str(data),
                         "--json"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    hits = json.loads(r.stdout.strip().splitlines()[-1])["results"]
    assert hits and hits[0]["paper"]["title"]
    r = _run(installed, ["-m", "aqa_cli", "ask", "What does ShieldAgent do?", "--data-dir",
                         str(data), "--json"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    answer = json.loads(r.stdout.strip().splitlines()[-1])
    assert answer["answer"] and "smollm2" in answer["model"].lower(), answer
