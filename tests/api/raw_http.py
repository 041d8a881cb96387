"""HTTP/1.1 by hand over real sockets, for what no client library sends: stalled bodies,
repeated headers."""

import socket
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from tests.waiting import patient


@dataclass(frozen=True)
class RawAnswer:
    status: int  # 0: the server answered nothing before the timeout
    headers: dict[str, list[str]]
    closed: bool | None
    """The server closed the connection after its answer (None: not waited for)."""
    seconds: float


def open_request(url: str, head: str, body: bytes = b"") -> socket.socket:
    """A connection that sent `head` (the request line and headers, without the blank line)
    and the first `body` bytes, and then nothing."""
    parts = urlsplit(url)
    conn = socket.create_connection((parts.hostname, parts.port), timeout=patient(10))
    conn.sendall(head.replace("\n", "\r\n").encode("latin-1") + b"\r\n\r\n" + body)
    return conn


def read_answer(conn: socket.socket, timeout: float, closing: bool = False) -> RawAnswer:
    """The answer's status line, headers and body, and with `closing` whether the server then
    closed (as far as `timeout` allows: a connection kept alive holds the reader that long)."""
    started = time.monotonic()
    conn.settimeout(timeout)
    received = b""
    try:
        while b"\r\n\r\n" not in received:
            chunk = conn.recv(65536)
            if not chunk:
                break
            received += chunk
    except TimeoutError:
        return RawAnswer(0, {}, False, time.monotonic() - started)
    head, _, rest = received.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers: dict[str, list[str]] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.setdefault(name.strip().lower(), []).append(value.strip())
    length = int(headers.get("content-length", ["0"])[0])
    closed: bool | None = False
    try:
        while len(rest) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            rest += chunk
        closed = conn.recv(1) == b"" if closing else None
    except TimeoutError:
        closed = False
    except ConnectionResetError:
        closed = True
    status = int(lines[0].split()[1]) if lines and lines[0].startswith("HTTP/") else 0
    return RawAnswer(status, headers, closed, time.monotonic() - started)
