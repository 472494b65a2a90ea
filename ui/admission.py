"""Admission of chat answers under load: how many run at once, how many may
wait, and what a refused user is told.

Gradio's own queue refuses with "This application is currently busy. Please
try again." and no hint of when; and a long queue makes every accepted answer
wait behind all the others (measured: 100 sessions at once, 2 cores, a 0.3 s
fake model: p50 12.6 s, of which the model was ~1 s). Here an answer is
admitted only while its estimated wait, from the measured duration of recent
answers, stays under ``ui_max_wait``; a refusal says how many questions are
ahead and when to retry. At least one question may always wait (a second tab
of one researcher), whatever the estimate.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

SMOOTHING = 0.2  # weight of the newest answer in the running mean of answer durations
POLL_S = 0.5  # a waiting request re-checks (and tells its user) this often


class Busy(Exception):
    """Refused at once: ``ahead`` questions are being answered or waiting."""

    def __init__(self, ahead: int, retry_s: int) -> None:
        self.ahead, self.retry_s = ahead, retry_s
        super().__init__(
            f"Busy: {ahead} questions are being answered or waiting. Please ask again in "
            f"about {retry_s} s.")


class Admission:
    """At most ``running`` answers at once; a request beyond that waits only
    while the estimated wait is under ``max_wait_s`` (at least one may
    always wait), else ``Busy`` is raised at once. Thread-safe."""

    def __init__(self, running: int, max_wait_s: float, first_estimate_s: float) -> None:
        self.running = max(1, running)
        self.max_wait_s = max_wait_s
        self.mean_s = first_estimate_s  # until answers have been measured
        self._slots = threading.Semaphore(self.running)
        self._lock = threading.Lock()
        self._inside = 0  # admitted: running or waiting for a slot

    def wait_estimate(self, ahead: int) -> float:
        """Seconds until a request with ``ahead`` admitted before it starts."""
        if ahead < self.running:
            return 0.0
        return (ahead - self.running + 1) * self.mean_s / self.running

    @property
    def max_waiting(self) -> int:
        """How many may wait now, from the measured mean answer duration."""
        return max(1, math.floor(self.max_wait_s * self.running / max(self.mean_s, 1e-3)))

    @contextmanager
    def enter(self) -> Iterator[Iterator[int]]:
        """Admit or raise ``Busy``. Inside, iterate the yielded waiter: it
        yields how many admitted questions wait for a slot (this one included)
        every ``POLL_S`` until a slot is free, then stops; the slot is held
        until the block exits."""
        with self._lock:
            ahead = self._inside
            if ahead >= self.running + self.max_waiting:
                retry = self.wait_estimate(ahead) - self.max_wait_s
                raise Busy(ahead, max(1, math.ceil(retry)))
            self._inside += 1
        got = False
        start = time.perf_counter()

        def waiter() -> Iterator[int]:
            nonlocal got, start
            while not self._slots.acquire(timeout=POLL_S):
                with self._lock:
                    yield max(0, self._inside - self.running)
            got = True
            start = time.perf_counter()

        try:
            yield waiter()
        finally:
            if got:
                took = time.perf_counter() - start
                self._slots.release()
                with self._lock:
                    self.mean_s += SMOOTHING * (took - self.mean_s)
            with self._lock:
                self._inside -= 1
