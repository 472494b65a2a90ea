"""Progress that people expect, for every long command (ingest, fetch, eval
run, bench): a tqdm bar with counts, rate and ETA on a terminal; plain lines
with counts and an ETA when stderr is not a terminal (a log, CI, a pipe),
where a bar's carriage returns would be noise."""

from __future__ import annotations

import sys
import time
from typing import Any


class Progress:
    """``step()`` once per item; ``close()`` at the end. Plain lines come every
    ``every`` items and at the last one."""

    def __init__(self, total: int, *, verb: str = "done", unit: str = "item",
                 stream: Any = None, every: int = 50, desc: str | None = None) -> None:
        self.stream = stream or sys.stderr
        self.total, self.done, self.every = total, 0, max(1, every)
        self.verb, self.unit = verb, unit
        self.start = time.monotonic()
        self.bar = None
        if total and hasattr(self.stream, "isatty") and self.stream.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit=unit, file=self.stream, dynamic_ncols=True,
                            desc=desc)

    def step(self, note: str = "", n: int = 1) -> None:
        before, self.done = self.done, self.done + n
        if self.bar is not None:
            if note:
                self.bar.set_postfix_str(note, refresh=False)
            self.bar.update(n)
        elif self.done // self.every > before // self.every or self.done >= self.total:
            elapsed = time.monotonic() - self.start
            left = (self.total - self.done) * elapsed / self.done if self.done else 0.0
            print(f"{self.verb} {self.done}/{self.total} {self.unit}s ({elapsed:.0f}s, "
                  f"ETA {duration(left)}){f'; {note}' if note else ''}",
                  file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def duration(seconds: float) -> str:
    """``1h05m`` or ``3m07s``."""
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"
