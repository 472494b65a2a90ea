"""Regenerate the rules and signals tables in docs/architecture.md from the code.

    .venv/bin/python docs/gen_rules_table.py          # rewrite the tables
    .venv/bin/python docs/gen_rules_table.py --check  # exit 1 if the file is stale

What is read (nothing is listed by hand):

- rules: every public function of ``rag.answer.rules`` that returns a ``RuleFiring``,
  in source order (the predicates they read questions with, ``rag.answer.reading``,
  return none and are no rules); its stage comes from the groups in the module docstring
  ("Gates before the model:", ...), where it is called from from the
  ``rules.<name>(`` calls in ``rag/*.py``, and its description is the first
  sentence of its docstring;
- trace entries without a rule function: every ``RuleFiring("<name>", ...)``
  literal in ``rag/`` whose name is not a rule function, described by the
  first sentence of the docstring of the function that emits it;
- signals: the fields of ``rag.answer.decision.Signals``, described by the comment
  after each field.

The tables sit between ``<!-- rules:begin -->`` and ``<!-- rules:end -->``.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "architecture.md"
BEGIN, END = "<!-- rules:begin -->", "<!-- rules:end -->"

if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def first_sentence(doc: str | None) -> str:
    """The first sentence of a docstring's first paragraph, on one line, as Markdown."""
    para = " ".join((doc or "").strip().split("\n\n")[0].split())
    m = re.search(r"(?<=[.!?])\s+(?=[A-Z`\"“(])", para)
    text = para[: m.start()] if m else para
    return cell(text)


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell: RST ``code`` as `code`, pipes escaped."""
    return text.replace("``", "`").replace("|", "\\|").strip()


def stages(module_doc: str) -> dict[str, str]:
    """Rule name -> stage, from the "Label:  name, name," groups of a module docstring."""
    out: dict[str, str] = {}
    label = None
    for line in module_doc.splitlines():
        head = re.match(r"^([A-Z][\w ]+):\s+(.*)$", line)
        if head:
            label, rest = head.group(1).lower(), head.group(2)
        elif label and line.startswith(" ") and line.strip():
            rest = line
        else:
            label = None
            continue
        for name in re.findall(r"[a-z][a-z_]+", rest):
            out.setdefault(name, label)
    return out


def rag_sources() -> dict[str, str]:
    return {p.relative_to(REPO).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted((REPO / "rag").rglob("*.py"))}


def rule_functions() -> list[tuple[str, object]]:
    from rag.answer import rules

    found = []
    for name, fn in inspect.getmembers(rules, inspect.isfunction):
        if fn.__module__ != rules.__name__ or name.startswith("_"):
            continue
        if "RuleFiring" in str(fn.__annotations__.get("return", "")):
            found.append((inspect.getsourcelines(fn)[1], name, fn))
    return [(name, fn) for _, name, fn in sorted(found)]


def callers(name: str, sources: dict[str, str]) -> list[str]:
    pat = re.compile(rf"\brules\.{name}\(")
    return [path for path, text in sources.items() if path != "rag/answer/rules.py" and pat.search(text)]


def trace_only(rule_names: set[str], sources: dict[str, str]) -> list[tuple[str, str, str]]:
    """(name, file, description) of RuleFiring literals that no rule function makes."""
    seen: dict[str, tuple[str, str]] = {}
    for path, text in sources.items():
        if path == "rag/answer/rules.py":
            continue
        tree = ast.parse(text)
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "RuleFiring"
                        and node.args and isinstance(node.args[0], ast.Constant)
                        and isinstance(node.args[0].value, str)):
                    name = node.args[0].value
                    if name not in rule_names and name not in seen:
                        seen[name] = (path, first_sentence(ast.get_docstring(func)))
    return [(name, path, desc) for name, (path, desc) in sorted(seen.items())]


def signals() -> list[tuple[str, str]]:
    from rag.answer.decision import Signals

    comments = {}
    for line in inspect.getsource(Signals).splitlines():
        m = re.match(r"^\s+(\w+)\s*:[^#]*#\s*(.*)$", line)
        if m:
            comments[m.group(1)] = m.group(2)
    return [(f.name, cell(comments.get(f.name, ""))) for f in dataclasses.fields(Signals)]


def table() -> str:
    from rag.answer import rules

    sources = rag_sources()
    stage_of = stages(rules.__doc__ or "")
    funcs = rule_functions()
    lines = [
        "<!-- generated by docs/gen_rules_table.py from rag/answer/rules.py, rag/answer/decision.py and the"
        " RuleFiring calls in rag/; edit the code, then rerun it -->",
        "",
        "**Rules** (`rag/answer/rules.py`: every function that returns a `RuleFiring`; stage from the"
        " module docstring):",
        "",
        "| rule | stage | called from | what it checks |",
        "|---|---|---|---|",
    ]
    for name, fn in funcs:
        where = ", ".join(f"`{p}`" for p in callers(name, sources)) or "not called in `rag/`"
        stage = stage_of.get(name, "not in the module docstring")
        lines.append(f"| `{name}` | {stage} | {where} | {first_sentence(inspect.getdoc(fn))} |")
    lines += [
        "",
        "**Other trace entries** (a `RuleFiring` made in place, not by a rule function):",
        "",
        "| name | made in | what it is (the docstring of the function that makes it) |",
        "|---|---|---|",
    ]
    for name, path, desc in trace_only({n for n, _ in funcs}, sources):
        lines.append(f"| `{name}` | `{path}` | {desc} |")
    lines += [
        "",
        "**Signals of the decision** (the fields of `rag.answer.decision.Signals`, each described by"
        " its comment):",
        "",
        "| signal | what it is |",
        "|---|---|",
    ]
    lines += [f"| `{name}` | {desc} |" for name, desc in signals()]
    return "\n".join(lines)


def render(doc: str) -> str:
    start, end = doc.find(BEGIN), doc.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"{DOC}: markers {BEGIN} … {END} not found")
    return doc[: start + len(BEGIN)] + "\n" + table() + "\n" + doc[end:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/architecture.md is stale")
    args = ap.parse_args(argv)
    old = DOC.read_text(encoding="utf-8")
    new = render(old)
    if args.check:
        if new != old:
            print(f"{DOC.relative_to(REPO)} is stale: run .venv/bin/python docs/gen_rules_table.py",
                  file=sys.stderr)
            return 1
        return 0
    if new != old:
        DOC.write_text(new, encoding="utf-8")
        print(f"rewrote the tables in {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
