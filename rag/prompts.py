"""Prompt templates: plain-text files in ``prompts/``, loaded by name and
filled with ``str.format`` fields, so prompts are versioned with the code.

Installed, the templates are package data (``rag/_prompts``, read with
``importlib.resources``); in a checkout they are read from ``prompts/``
(``rag.config.PROMPTS_DIR`` decides which)."""

from __future__ import annotations

from functools import cache

from rag.config import PROMPTS_DIR


@cache
def load_prompt(name: str) -> str:
    path = PROMPTS_DIR / f"{name}.txt"
    if not path.is_file():
        raise FileNotFoundError(f"Prompt template {path} is missing")
    return path.read_text(encoding="utf-8").strip()


def render(name: str, **fields: object) -> str:
    return load_prompt(name).format(**fields)
