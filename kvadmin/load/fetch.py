"""One bounded HTTP exchange with an engine: at most `max_bytes` read, within one deadline for
the whole of it. The load scraper's GET /metrics, the health probe's GET /health and the
scoring path's POST /tokenize (kvadmin/routing/tokenize.py) all go through it.

http.client's socket timeout bounds each read, not the whole exchange (an engine dripping a
byte at a time, in its headers or its body, would hold a call for ever), so a watchdog timer
aborts the exchange at the deadline, and every body read also gets the time left as its
timeout. `abort()` shuts the socket down, so a blocked read fails at once: the watchdog calls
it, and so does the scraper on every fetch still running at its round's deadline.
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


class EngineFetch:
    def __init__(
        self,
        base_url: str,
        timeout: float,
        max_bytes: int,
        path: str = "/metrics",
        body: bytes | None = None,
        content_type: str = "application/json",
        accept: str = "text/plain",
    ) -> None:
        """A GET of `path`, or with `body` a POST of it as `content_type`."""
        self.base_url = base_url
        self.path = path
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.body = body
        self.headers = {"Accept": accept}
        if body is not None:
            self.headers["Content-Type"] = content_type
        self._lock = threading.Lock()
        self._connection: http.client.HTTPConnection | None = None
        self._aborted = False

    def run(self) -> str:
        """The answer's text; raises FetchFailed (reason: timeout, http, too_large, error)."""
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
        watchdog = threading.Timer(self.timeout, self.abort)
        watchdog.daemon = True
        watchdog.start()
        try:
            return self._exchange(connection, parts.path.rstrip("/") + self.path, deadline)
        except TimeoutError:
            raise FetchFailed("timeout", f"no answer within {self.timeout:g}s") from None
        except (OSError, http.client.HTTPException, UnicodeDecodeError) as error:
            if self._aborted:
                raise FetchFailed("timeout", f"no answer within {self.timeout:g}s") from None
            raise FetchFailed("error", f"{type(error).__name__}: {error}") from None
        finally:
            watchdog.cancel()
            connection.close()

    def _exchange(self, connection: http.client.HTTPConnection, path: str, deadline: float) -> str:
        method = "GET" if self.body is None else "POST"
        connection.request(method, path, body=self.body, headers=self.headers)
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
        if declared and declared.isdigit() and size < int(declared):
            raise FetchFailed("error", f"the answer ended after {size} of {declared} bytes")
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
