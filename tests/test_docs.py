"""The documentation stays true to the repository: the generated rules table is
current, the README stays short, every relative link resolves, and the README's
test command is the one CI runs. Fast: no model is loaded."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").rglob("*.md"))
FENCE = re.compile(r"^(```|~~~).*?^\1\s*$", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def test_rules_table_is_current():
    r = subprocess.run([sys.executable, str(REPO / "docs" / "gen_rules_table.py"), "--check"],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr or r.stdout


def test_readme_is_short():
    n = len(README.read_text(encoding="utf-8").splitlines())
    assert n < 160, f"README.md has {n} lines; move detail into docs/"


def relative_links(path: Path) -> list[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code is not a link
    return [t for t in LINK.findall(text)
            if not re.match(r"^[a-z][a-z0-9+.-]*:", t, re.IGNORECASE) and not t.startswith("#")]


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: p.relative_to(REPO).as_posix())
def test_relative_links_resolve(doc: Path):
    missing = [t for t in relative_links(doc)
               if not (doc.parent / t.split("#", 1)[0]).exists()]
    assert not missing, f"{doc.relative_to(REPO)} links to missing files: {missing}"


def test_readme_test_command_is_what_ci_runs():
    ci = [line.strip() for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    last = [line for line in ci if line and not line.startswith("#")][-1]
    blocks = re.findall(r"^```bash\n(.*?)^```", README.read_text(encoding="utf-8"),
                        re.MULTILINE | re.DOTALL)
    commands = [line.split("#", 1)[0].strip() for line in blocks[0].splitlines() if line.strip()]
    assert len(commands) == 2, commands
    assert commands[1] == last, f"README's test command {commands[1]!r} != .ci/run's {last!r}"
