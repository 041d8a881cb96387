"""One bounded GET of an engine's /metrics (or another path: the health probe's /health): at
most `max_bytes` read, within a deadline.

http.client's socket timeout bounds each read, not the whole exchange (an engine dripping a
byte at a time would hold a scrape for ever), so every read gets the time left until the
deadline as its timeout, and `abort()` from another thread shuts the socket down: the
scraper calls it on every fetch still running at the round's deadline.
"""

import contextlib
import http.client
import socket
import threading
import time
from urllib.parse import urlsplit

READ_CHUNK = 65_536


class FetchFailed(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class MetricsFetch:
    def __init__(
        self, base_url: str, timeout: float, max_bytes: int, path: str = "/metrics"
    ) -> None:
        self.base_url = base_url
        self.path = path
        self.timeout = timeout
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._connection: http.client.HTTPConnection | None = None
        self._aborted = False

    def run(self) -> str:
        """The exposition text; raises FetchFailed (reason: timeout, http, too_large, error)."""
        deadline = time.monotonic() + self.timeout
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise FetchFailed("error", f"{self.base_url!r} is not an http(s) URL")
        factory = (
            http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        )
        connection = factory(parts.netloc, timeout=self.timeout)
        with self._lock:
            if self._aborted:
                raise FetchFailed("timeout", "aborted before it started")
            self._connection = connection
        try:
            return self._exchange(connection, parts.path.rstrip("/") + self.path, deadline)
        except TimeoutError:
            raise FetchFailed("timeout", f"no answer within {self.timeout:g}s") from None
        except (OSError, http.client.HTTPException, UnicodeDecodeError) as error:
            if self._aborted:
                raise FetchFailed("timeout", f"no answer within {self.timeout:g}s") from None
            raise FetchFailed("error", f"{type(error).__name__}: {error}") from None
        finally:
            connection.close()

    def _exchange(self, connection: http.client.HTTPConnection, path: str, deadline: float) -> str:
        connection.request("GET", path, headers={"Accept": "text/plain"})
        response = connection.getresponse()
        if response.status != 200:
            raise FetchFailed("http", f"HTTP {response.status}")
        declared = response.getheader("content-length")
        if declared and declared.isdigit() and int(declared) > self.max_bytes:
            raise FetchFailed("too_large", f"{declared} bytes declared")
        chunks, size = [], 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if connection.sock is not None:
                connection.sock.settimeout(left)
            chunk = response.read1(READ_CHUNK)
            if not chunk:
                break
            size += len(chunk)
            if size > self.max_bytes:
                raise FetchFailed("too_large", f"more than {self.max_bytes} bytes")
            chunks.append(chunk)
        return b"".join(chunks).decode("utf-8")

    def abort(self) -> None:
        """Stop the exchange from another thread: its blocked read fails at once."""
        with self._lock:
            self._aborted = True
            connection = self._connection
        sock = connection.sock if connection is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed
                sock.shutdown(socket.SHUT_RDWR)
