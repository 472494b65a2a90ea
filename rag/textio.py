"""Reading corpus files as text: per-line UTF-8 decoding and line splitting.

Decoding is per line so that one invalid byte costs (at most) its own record:
the bad bytes of that line become U+FFFD and the line is reported, every other
line decodes normally.
"""

from __future__ import annotations

import html
import re
import unicodedata
from pathlib import Path

MAX_DECODE_ERRORS = 10  # reported one by one per file; the rest in one summary

# an HTML/XML tag or comment in an abstract (PMLR titles and abstracts carry them)
MARKUP_TAG = re.compile(r"<!--.*?-->|</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>]*)?/?>", re.DOTALL)
_PLAIN_TOKEN = re.compile(r"[a-z0-9]+")
# Invisible characters that can hide a sentence boundary or glue a planted
# instruction to real text: zero-width space/joiners, word joiner, BOM, soft hyphen.
_INVISIBLE = re.compile("[\u200c\u200d\u2060\ufeff\u00ad]")
_ZERO_WIDTH_SPACE = "\u200b"  # a break between words: becomes a space, so it ends a sentence


def normalise_unicode(text: str) -> str:
    """NFC without invisible characters: what every record's text is stored
    as, so that sentences split where a reader sees them end and every quote
    is a verbatim substring of the stored abstract. Not NFKC: that would
    rewrite what the abstract says (n² to n2, … to ...); the sentence splitter
    reads full-width and non-Latin forms as they are instead."""
    text = unicodedata.normalize("NFC", text).replace(_ZERO_WIDTH_SPACE, " ")
    return _INVISIBLE.sub("", text)


def plain_tokens(text: str) -> list[str]:
    """Markup-free, lower-cased alphanumeric tokens: what a seed line (raw
    HTML/LaTeX) and the cleaned PMLR version of the same abstract share."""
    return _PLAIN_TOKEN.findall(html.unescape(MARKUP_TAG.sub(" ", text)).lower())


class FileReadError(Exception):
    """The whole file is unusable (unreadable, empty, UTF-16)."""

    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(message)
        self.line, self.message = line, message


def read_text(path: Path) -> tuple[str, list[tuple[int, int, int]]]:
    """The file as text plus ``(line, byte, column)`` for every line that is not
    valid UTF-8. A bad byte is replaced by U+FFFD in its own line only, so one stray
    byte never costs the other records of the file."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise FileReadError(None, f"cannot read file: {e.strerror or e}") from e
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise FileReadError(None, "file is UTF-16 encoded; re-save it as UTF-8")
    bad: list[tuple[int, int, int]] = []
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        if data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]
        parts = []
        # "\n" never occurs inside a multi-byte UTF-8 sequence: splitting is safe
        for lineno, raw in enumerate(data.split(b"\n"), start=1):
            try:
                parts.append(raw.decode("utf-8"))
            except UnicodeDecodeError as e:
                bad.append((lineno, raw[e.start], e.start + 1))
                parts.append(raw.decode("utf-8", errors="replace"))
        text = "\n".join(parts)
    if not text.strip():
        raise FileReadError(None, "empty file")
    return text, bad


def decode_error_messages(bad: list[tuple[int, int, int]]) -> list[tuple[int, str]]:
    """``(line, message)`` for the report: one per bad line, then one summary."""
    out = [
        (
            line,
            f"not valid UTF-8 (byte 0x{byte:02x} at column {col}); the record on this line "
            "was loaded with U+FFFD in place of the bad bytes; re-save the file as UTF-8",
        )
        for line, byte, col in bad[:MAX_DECODE_ERRORS]
    ]
    rest = bad[MAX_DECODE_ERRORS:]
    if rest:
        out.append(
            (
                rest[0][0],
                f"{len(rest)} more lines (up to line {rest[-1][0]}) are not valid UTF-8 and "
                "were loaded with U+FFFD replacements; re-save the file as UTF-8",
            )
        )
    return out


def split_lines(text: str) -> list[str]:
    """Lines split on "\\n" only (str.splitlines() also splits on \\x0b, \\u2028...
    and would make reported line numbers disagree with editors); "\\r" trimmed."""
    return [ln.rstrip("\r") for ln in text.split("\n")]
