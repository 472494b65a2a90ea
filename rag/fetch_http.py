"""The HTTP side of ``aqa fetch``: one polite client for a static site.

What this module owns: a rate limit between request starts, retries with
exponential backoff on 5xx/429, timeouts and connection errors (a server's
``Retry-After`` wins when longer), and the one-line ``AqaError``s raised when
the host cannot be reached (``HostUnreachable``) or keeps answering with an
error status (``HttpFailure``). Nothing here knows about PMLR.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from urllib.parse import urlsplit

from rag.errors import AqaError

DEFAULT_RATE = 1.0  # requests per second: polite to a volunteer-run static site
DEFAULT_RETRIES = 4  # retries after the first try (5 tries in all)
DEFAULT_BACKOFF_S = 2.0  # first retry waits this long, then 2x, 4x, ...
MAX_BACKOFF_S = 60.0  # no single wait (backoff or Retry-After) is longer
DEFAULT_TIMEOUT_S = 30.0  # the v267 index page is several MB
USER_AGENT = "abstracts-qa (aqa fetch; metadata only, rate-limited)"
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


class HostUnreachable(AqaError):
    """The host did not answer at all (DNS, refused, timeouts), after retries."""


class HttpFailure(AqaError):
    """The host answered with an error status (after retries, for 5xx/429)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def _unreachable(host: str, reason: str) -> HostUnreachable:
    return HostUnreachable(
        f"cannot reach {host}: {reason} — check your connection; re-running resumes"
    )


class Client:
    """GET with a rate limit between request starts and retries with
    exponential backoff. ``sleep``/``clock`` are injectable for tests."""

    def __init__(self, *, rate: float = DEFAULT_RATE, retries: int = DEFAULT_RETRIES,
                 backoff: float = DEFAULT_BACKOFF_S, timeout: float = DEFAULT_TIMEOUT_S,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        import httpx  # pinned by chromadb; imported here so `aqa --help` stays fast

        if rate <= 0:
            raise AqaError(f"--rate must be above 0 requests per second, got {rate}")
        self._httpx = httpx
        self.interval, self.retries, self.backoff = 1.0 / rate, max(0, retries), backoff
        self.sleep, self.clock = sleep, clock
        self.requests = 0  # requests sent, retries included
        self._next_at = 0.0
        self._http = httpx.Client(timeout=timeout, follow_redirects=True,
                                  headers={"User-Agent": USER_AGENT})

    def close(self) -> None:
        self._http.close()

    def _throttle(self) -> None:
        wait = self._next_at - self.clock()
        if wait > 0:
            self.sleep(wait)
        self._next_at = self.clock() + self.interval

    def _wait(self, attempt: int, retry_after: str | None) -> None:
        delay = self.backoff * (2 ** attempt)
        if retry_after and retry_after.strip().isdigit():  # a server's own hint wins
            delay = max(delay, float(retry_after))
        self.sleep(min(delay, MAX_BACKOFF_S))

    def get(self, url: str) -> str:
        """The body of ``url``; ``HostUnreachable`` or ``HttpFailure`` after retries."""
        host = urlsplit(url).netloc or url
        httpx = self._httpx
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            self._throttle()
            self.requests += 1
            try:
                resp = self._http.get(url)
            except (httpx.TimeoutException, httpx.NetworkError,
                    httpx.RemoteProtocolError) as e:
                if last:
                    raise _unreachable(host, str(e) or type(e).__name__) from None
                self._wait(attempt, None)
                continue
            except httpx.HTTPError as e:  # a bad URL, a redirect loop: retrying won't help
                raise AqaError(f"cannot fetch {url}: {e}") from None
            if resp.status_code < 400:
                return resp.text
            if resp.status_code in RETRY_STATUS and not last:
                self._wait(attempt, resp.headers.get("Retry-After"))
                continue
            tries = f" after {attempt + 1} tries" if attempt else ""
            raise HttpFailure(f"{host} answered HTTP {resp.status_code} for {url}{tries}",
                              resp.status_code)
        raise AssertionError("unreachable")  # the loop always returns or raises

