"""After hours of use, the stack's Redis restarts with a large append-only file and answers
LOADING for a while: the fleet and the worker started meanwhile wait for it and come up."""

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from kvadmin.fleet.fleet import REPLAY_PORT_OFFSET
from kvadmin.redis_server import RedisServer
from scoring.keys import BLOCK_KEY_PREFIX
from tests.conftest import ROOT, STARTUP_SECONDS, start_worker, stop_process
from tests.fleet.conftest import free_base_port
from tests.waiting import patient, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

KEYS = 30_000  # of 1000 random bytes: an append-only file of about 30 MB
HELD_LOAD_DELAY_US = 1_000_000  # per key, until the test lets go: LOADING for as long as it needs


def fill(server: RedisServer) -> None:
    client = redis.Redis(port=server.port)
    for start in range(0, KEYS, 1000):
        with client.pipeline(transaction=False) as pipe:
            for n in range(start, start + 1000):
                pipe.set(f"history:{n}", os.urandom(1000))
            pipe.execute()

    # Compacted, as the stack's Redis does at every start: a base of RDB data, loaded key by
    # key (and so slowed down by key-load-delay).
    def rewritten() -> bool:
        state = client.info("persistence")
        return not state["aof_rewrite_in_progress"] and not state["aof_rewrite_scheduled"]

    wait_until(rewritten, what="an automatic rewrite to end")
    client.bgrewriteaof()
    wait_until(rewritten, what="the append-only file's rewrite")
    client.close()


@dataclass
class LoadingRedis:
    server: RedisServer
    control: redis.Redis
    """A client that CONFIG SET reaches while the server loads."""

    def finish_loading(self) -> None:
        """Let the load run at full speed: LOADING ends a moment later."""
        self.control.config_set("key-load-delay", 0)


@pytest.fixture
def loading_redis(tmp_path) -> Iterator[LoadingRedis]:
    """The stack's Redis started again on a large append-only file, loading it a key a second
    (answering LOADING) until the test lets go: however long this machine takes to start the
    processes that must meet LOADING (a fixed window of 6 s was over before a loaded machine's
    fleet first asked)."""
    server = RedisServer(data_dir=tmp_path / "redis").start()
    fill(server)
    server.stop()
    size = sum(path.stat().st_size for path in (tmp_path / "redis").rglob("appendonly*"))
    assert size > 20 * 2**20, f"the append-only file has {size} bytes"
    process = subprocess.Popen(
        [*server.command(), "--key-load-delay", str(HELD_LOAD_DELAY_US),
         "--loading-process-events-interval-bytes", "1024"],  # commands answered at every key
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    client = redis.Redis(port=server.port, socket_timeout=patient(5), retry=Retry(NoBackoff(), 0))

    def loading() -> bool:
        try:
            return bool(int(client.info("persistence")["loading"]))
        except redis.BusyLoadingError:
            return True
        except redis.ConnectionError:
            return False

    wait_until(loading, what="Redis to answer LOADING")
    yield LoadingRedis(server, client)
    client.close()
    process.terminate()
    process.wait(timeout=patient(10))


def test_the_fleet_and_a_worker_started_while_redis_loads_come_up(
    loading_redis: LoadingRedis, subprocess_env: dict[str, str]
) -> None:
    env = subprocess_env | {"REDIS_URL": loading_redis.server.url}
    base = free_base_port(0, REPLAY_PORT_OFFSET)
    fleet = subprocess.Popen(
        [
            sys.executable, "manage.py", "simulate", "--pods", "1", "--base-port", str(base),
            "--http-port", str(free_base_port(0)), "--register", "--traffic", "20",
            "--routing", "random",
        ],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    worker = start_worker(env, "loading-worker")
    output: list[str] = []
    reading = threading.Thread(target=lambda: output.extend(fleet.stdout), daemon=True)
    reading.start()
    client = redis.Redis.from_url(loading_redis.server.url, socket_timeout=5)
    try:

        def fleet_waits() -> bool:
            assert fleet.poll() is None, "the fleet exited: " + "".join(output)
            return any("(loading its data)" in line for line in output)

        wait_until(fleet_waits, timeout=STARTUP_SECONDS, what="the fleet to wait for the Redis")
        loading_redis.finish_loading()

        def indexed() -> bool:
            assert fleet.poll() is None, "the fleet exited"
            assert worker.poll() is None, "the worker exited"
            try:
                return bool(next(client.scan_iter(f"{BLOCK_KEY_PREFIX}*", count=1000), None))
            except redis.BusyLoadingError:
                return False

        wait_until(indexed, timeout=120, interval=0.2, what="the worker to index the fleet")
    finally:
        client.close()
        fleet.terminate()
        fleet.wait(timeout=patient(30))
        reading.join(timeout=patient(30))
        stop_process(worker)
    text = "".join(output)
    assert "fleet: waiting for Redis" in text and "(loading its data)" in text
    assert "fleet up: 1 pods" in text
