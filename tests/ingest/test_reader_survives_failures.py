"""Whatever a round of the ingest loop meets, the loop carries on: a Redis held BUSY by a long
script, a refused command (MOVED), the registry failing, a bug. Each is counted, logged once
while it lasts, backed off, and the batches published meanwhile are applied after it."""

import logging
import threading

import pytest
import redis

from kvadmin.fleet.publisher import Publisher
from kvadmin.index import status
from kvadmin.index.session import ApplySession
from kvadmin.index.streams import StreamId
from kvadmin.index.writer import Applier
from kvadmin.ingest.reader import IngestLoop
from kvadmin.ingest.streams import StreamSpec
from kvadmin.redis_server import RedisServer
from tests.ingest.blocks import key, stored
from tests.ingest.conftest import spec_for
from tests.redis_busy import held_busy
from tests.waiting import patient, wait_until

STREAM = StreamId("vllm-0.default", 0)
POD = STREAM.pod

FAULTS = [
    pytest.param(redis.ResponseError("MOVED 3999 127.0.0.1:6381"), "redis_error", id="moved"),
    pytest.param(ZeroDivisionError("a bug"), "ZeroDivisionError", id="bug"),
]


class FaultyApplier(Applier):
    """The real applier, whose next sessions raise the queued faults (the loop's apply seam)."""

    def __init__(self, client: redis.Redis) -> None:
        super().__init__(client)
        self.faults: list[Exception] = []

    def session(self, window: int = 1) -> ApplySession:
        if self.faults:
            raise self.faults.pop(0)
        return super().session(window)


class Registry:
    """The loop's stream list, whose next reads raise the queued faults (the registry seam)."""

    def __init__(self, specs: list[StreamSpec]) -> None:
        self.specs = specs
        self.faults: list[Exception] = []
        self.version = 0

    def load(self) -> list[StreamSpec]:
        if self.faults:
            raise self.faults.pop(0)
        return self.specs


def _run(loop: IngestLoop) -> threading.Thread:
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    return thread


def _stop(loop: IngestLoop, thread: threading.Thread) -> None:
    loop.stop()
    thread.join(timeout=patient(15))
    assert not thread.is_alive(), "the ingest loop did not stop"


def _applied(client: redis.Redis, *blocks: int) -> bool:
    return all(client.hget(key(n), POD) for n in blocks)


def _connected(client: redis.Redis) -> bool:
    return status.read_statuses(client, [STREAM])[0].connected


def _logged(caplog: pytest.LogCaptureFixture, what: str) -> int:
    return sum(
        what in record.getMessage() and record.levelno >= logging.WARNING
        for record in caplog.records
    )


@pytest.mark.parametrize(("fault", "kind"), FAULTS)
def test_a_failing_apply_is_survived(
    publisher: Publisher, own_redis: RedisServer, caplog, fault: Exception, kind: str
) -> None:
    client = redis.Redis.from_url(own_redis.url, decode_responses=True)
    applier = FaultyApplier(client)
    loop = IngestLoop(applier, lambda: [spec_for(publisher)], lambda: 0)
    thread = _run(loop)
    try:
        wait_until(lambda: _connected(client), what="connect")
        publisher.wait_for_subscribers()
        applier.faults = [fault, fault, fault]  # three rounds in a row
        publisher.publish([stored(1)])
        wait_until(lambda: _applied(client, 1), timeout=30, what="block 1 applied after faults")
        assert thread.is_alive()
        assert loop.guard.counts[kind] == 3
        assert _logged(caplog, "retrying with backoff") == 1, "one line for three rounds"
        publisher.publish([stored(2)])
        wait_until(lambda: _applied(client, 2), what="block 2 applied: the loop carries on")
    finally:
        _stop(loop, thread)
        client.close()


@pytest.mark.parametrize(("fault", "kind"), FAULTS)
def test_a_failing_registry_is_survived(
    publisher: Publisher, own_redis: RedisServer, fault: Exception, kind: str
) -> None:
    client = redis.Redis.from_url(own_redis.url, decode_responses=True)
    registry = Registry([spec_for(publisher)])
    registry.faults = [fault, fault]
    loop = IngestLoop(Applier(client), registry.load, lambda: registry.version)
    thread = _run(loop)
    try:
        wait_until(lambda: _connected(client), timeout=30, what="connect after faults")
        assert loop.guard.counts[kind] == 2
        publisher.wait_for_subscribers()
        publisher.publish([stored(1)])
        wait_until(lambda: _applied(client, 1), what="block 1 applied")
    finally:
        _stop(loop, thread)
        client.close()


def test_a_redis_held_busy_by_a_script_is_an_outage_the_loop_outlives(
    publisher: Publisher, own_redis: RedisServer
) -> None:
    client = redis.Redis.from_url(own_redis.url, decode_responses=True)
    loop = IngestLoop(Applier(client), lambda: [spec_for(publisher)], lambda: 0)
    thread = _run(loop)
    try:
        wait_until(lambda: _connected(client), what="connect")
        publisher.wait_for_subscribers()
        publisher.publish([stored(1)])
        wait_until(lambda: _applied(client, 1), what="block 1 applied")

        with held_busy(own_redis.url):
            publisher.publish([stored(2)])  # the loop's script call meets BUSY
            wait_until(lambda: loop.guard.counts["redis_unavailable"], what="a BUSY round")

        wait_until(lambda: _applied(client, 2), timeout=30, what="block 2 applied after BUSY")
        publisher.publish([stored(3)])
        wait_until(lambda: _applied(client, 3), what="block 3 applied: the loop carries on")
        assert thread.is_alive()
    finally:
        _stop(loop, thread)
        client.close()
