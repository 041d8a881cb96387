"""HTTP/1.1 by hand over real sockets, for what no client library sends: stalled bodies,
repeated headers."""

import socket
import time
from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass(frozen=True)
class RawAnswer:
    status: int  # 0: the server answered nothing before the timeout
    headers: dict[str, list[str]]
    closed: bool
    """The server closed the connection after its answer."""
    seconds: float


def open_request(url: str, head: str, body: bytes = b"") -> socket.socket:
    """A connection that sent `head` (the request line and headers, without the blank line)
    and the first `body` bytes, and then nothing."""
    parts = urlsplit(url)
    conn = socket.create_connection((parts.hostname, parts.port), timeout=10)
    conn.sendall(head.replace("\n", "\r\n").encode("latin-1") + b"\r\n\r\n" + body)
    return conn


def read_answer(conn: socket.socket, timeout: float) -> RawAnswer:
    """The answer's status line and headers, and whether the server then closed (as far as
    `timeout` allows)."""
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
    closed = False
    try:
        while len(rest) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            rest += chunk
        closed = conn.recv(1) == b""
    except TimeoutError:
        closed = False
    except ConnectionResetError:
        closed = True
    status = int(lines[0].split()[1]) if lines and lines[0].startswith("HTTP/") else 0
    return RawAnswer(status, headers, closed, time.monotonic() - started)
