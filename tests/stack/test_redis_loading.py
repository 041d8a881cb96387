"""After hours of use, the stack's Redis restarts with a large append-only file and answers
LOADING for a while: the fleet and the worker started meanwhile wait for it and come up."""

import os
import subprocess
import sys

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from kvadmin.fleet.fleet import REPLAY_PORT_OFFSET
from kvadmin.redis_server import RedisServer
from scoring.keys import BLOCK_KEY_PREFIX
from tests.conftest import ROOT, start_worker, stop_process
from tests.fleet.conftest import free_base_port
from tests.waiting import patient, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

KEYS = 30_000  # of 1000 random bytes: an append-only file of about 30 MB
LOAD_DELAY_US = 200  # per key while loading: about 6 s of LOADING


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


@pytest.fixture
def loading_redis(tmp_path):
    """The stack's Redis started again on a large append-only file, still loading it."""
    server = RedisServer(data_dir=tmp_path / "redis").start()
    fill(server)
    server.stop()
    size = sum(path.stat().st_size for path in (tmp_path / "redis").rglob("appendonly*"))
    assert size > 20 * 2**20, f"the append-only file has {size} bytes"
    process = subprocess.Popen(
        [*server.command(), "--key-load-delay", str(LOAD_DELAY_US)],
        stdout=subprocess.DEVNULL,
    )
    client = redis.Redis(port=server.port, socket_timeout=1, retry=Retry(NoBackoff(), 0))

    def loading() -> bool:
        try:
            return bool(int(client.info("persistence")["loading"]))
        except redis.BusyLoadingError:
            return True
        except redis.ConnectionError:
            return False

    wait_until(loading, what="Redis to answer LOADING")
    yield server
    client.close()
    process.terminate()
    process.wait(timeout=patient(10))


def test_the_fleet_and_a_worker_started_while_redis_loads_come_up(
    loading_redis: RedisServer, subprocess_env: dict[str, str]
) -> None:
    env = subprocess_env | {"REDIS_URL": loading_redis.url}
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
    client = redis.Redis.from_url(loading_redis.url, socket_timeout=5)
    try:

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
        output = fleet.communicate(timeout=patient(30))[0]
        stop_process(worker)
    assert "fleet: waiting for Redis" in output and "(loading its data)" in output
    assert "fleet up: 1 pods" in output
