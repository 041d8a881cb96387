"""An engine's HTTP port on 127.0.0.1 that answers /tokenize badly on purpose: dripping its
answer a byte at a time, sending more than any prompt's ids, hanging up mid-answer, or holding
the answer until the test lets it go."""

import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from tests.waiting import patient

TOKENS = b'{"tokens": [' + b", ".join(b"%d" % n for n in range(64)) + b"]}"


class _Handler(socketserver.BaseRequestHandler):
    server: "_Server"

    def handle(self) -> None:
        conn: socket.socket = self.request
        conn.settimeout(30)
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = conn.recv(65536)
            if not chunk:
                return
            received += chunk
        head, _, body = received.partition(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            ),
            0,
        )
        while len(body) < length:
            body += conn.recv(65536)
        with self.server.lock:
            self.server.holding += 1
            self.server.most = max(self.server.most, self.server.holding)
        try:
            getattr(self, self.server.mode)(conn)
        except OSError:
            pass  # the caller gave up: what a hostile engine is for
        finally:
            with self.server.lock:
                self.server.holding -= 1

    def drip(self, conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n")
        for byte in b'{"tokens": [' + b"1, " * 10_000:
            if self.server.released.wait(0.05):
                return
            conn.sendall(bytes([byte]))

    def drip_headers(self, conn: socket.socket) -> None:
        for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 10_000:
            if self.server.released.wait(0.05):
                return
            conn.sendall(bytes([byte]))

    def huge(self, conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n")
        conn.sendall(b'{"tokens": [')
        chunk = b"1, " * 100_000
        for _ in range(70):  # 21 MB, not declared
            conn.sendall(chunk)
        conn.sendall(b"1]}")

    def hang_up(self, conn: socket.socket) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(TOKENS) + TOKENS[:20]
        )
        conn.shutdown(socket.SHUT_RDWR)

    def hang_up_chunked(self, conn: socket.socket) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n" % (20, TOKENS[:20])
        )
        conn.shutdown(socket.SHUT_RDWR)

    def hold(self, conn: socket.socket) -> None:
        self.server.released.wait(60)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(TOKENS), TOKENS))


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, mode: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.mode = mode
        self.lock = threading.Lock()
        self.holding = 0
        """Requests being answered (or held) right now."""
        self.most = 0
        """The most requests answered at once."""
        self.released = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@contextmanager
def hostile_engine(mode: str) -> Iterator[_Server]:
    """A hostile engine answering in `mode` (a method name of the handler); on leaving, every
    held answer is let go and the server stops."""
    server = _Server(mode)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield server
    finally:
        server.released.set()
        server.shutdown()
        server.server_close()
        deadline = time.monotonic() + patient(5)
        while server.holding and time.monotonic() < deadline:
            time.sleep(0.01)
