"""Servers the tests start on ports `free_port` handed out. Such a port was free a moment ago
only: another program (the other test process's servers, a benchmark's) may take it before
the server binds it, and that program's answers must not pass for the server's. So a start
counts only once the server's own process listens on each of its ports (Linux's /proc), and
a server that exits because another program took a port is started again on new ones."""

import os
import subprocess
from collections.abc import Callable
from functools import partial
from pathlib import Path

from tests.waiting import wait_until

ATTEMPTS = 3
"""Starts tried when another program takes a server's port first."""


def listening(port: int) -> set[str]:
    """The sockets listening on 127.0.0.1:`port`, as /proc/PID/fd names them: IPv4 ones, and
    IPv6 ones bound to its IPv4-mapped address (gRPC's server binds so)."""
    wanted = {f"0100007F:{port:04X}", f"0000000000000000FFFF00000100007F:{port:04X}"}
    rows = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            rows += [line.split() for line in lines.readlines()[1:]]
    return {f"socket:[{row[9]}]" for row in rows if row[1] in wanted and row[3] == "0A"}


def listens(pid: int, port: int) -> bool:
    """Whether process `pid` holds the socket listening on 127.0.0.1:`port`."""
    sockets = listening(port)
    try:
        return any(os.readlink(fd) in sockets for fd in Path(f"/proc/{pid}/fd").iterdir())
    except FileNotFoundError:  # the process, or one of its descriptors, is gone
        return False


def start_server[T](
    launch: Callable[[], tuple[subprocess.Popen, list[int], T]],
    answers: Callable[[T], bool],
    what: str,
    timeout: float,
) -> tuple[subprocess.Popen, T]:
    """Start a server with `launch`, which picks its ports with free_port and returns its
    process, those ports and what `answers` needs; return once the process listens on each
    port itself and `answers`. Fails when it exits for another reason."""
    attempt = 0
    while True:
        attempt += 1
        process, ports, started = launch()
        try:
            wait_until(partial(_ready, process, ports, answers, started), timeout, what=what)
        except BaseException:  # not left running for the rest of the session
            process.kill()
            process.wait()
            raise
        if process.poll() is None:
            return process, started
        taken = any(listening(port) for port in ports)
        assert taken and attempt < ATTEMPTS, f"{what}: the process exited"


def _ready[T](
    process: subprocess.Popen, ports: list[int], answers: Callable[[T], bool], started: T
) -> bool:
    if process.poll() is not None:  # its start is over
        return True
    return all(listens(process.pid, port) for port in ports) and answers(started)
