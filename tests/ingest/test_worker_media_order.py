"""A worker's ingest loop orders media by the tier weights active when it writes, drains
included (compatibility.md 5.4): after a saved version changes the order, the drain that a
restarted rank's purge runs leaves the values the new weights name, not kthena's defaults.

The loop is the one a Celery worker runs (`runner.build_loop`: the registry's streams, the
active weights), on real publishers of a DP-2 pod, into real Redis."""

import threading
from collections.abc import Iterator

import pytest
import redis
import zmq

from kvadmin.engines.models import Engine
from kvadmin.fleet.publisher import Publisher, open_ranks
from kvadmin.fleet.wire import Encoding, block_stored
from kvadmin.index import status
from kvadmin.index.streams import StreamId
from kvadmin.ingest.runner import build_loop
from kvadmin.redis_server import free_port
from kvadmin.weights.active import forget_cached_weights
from kvadmin.weights.config import WeightConfig
from kvadmin.weights.versions import current_version, save_version
from tests.index import MODEL, engine_hash
from tests.ingest.blocks import key, stored
from tests.waiting import patient, wait_until

pytestmark = pytest.mark.django_db(transaction=True)
POD = "vllm-0.default"
BLOCK = 1


def _ranks() -> list[Publisher]:
    """Ranks 0 and 1 on a base port and the next one, as a DP-2 engine binds them."""
    for _attempt in range(20):
        events, replay = free_port(), free_port()
        try:
            return open_ranks(
                2,
                f"tcp://127.0.0.1:{events}",
                f"tcp://127.0.0.1:{replay}",
                encoding=Encoding.VLLM_MAP,
                topic=b"kv-events",
            )
        except zmq.ZMQError:  # the port after a free one was taken: try others
            continue
    raise AssertionError("no two consecutive free ports")


@pytest.fixture
def ranks(redis_client: redis.Redis) -> Iterator[list[Publisher]]:
    """A registered DP-2 engine read by a worker's ingest loop, both ranks connected, under
    kthena's default weights (nothing saved yet)."""
    forget_cached_weights()
    publishers = _ranks()
    Engine.objects.create(
        pod=POD,
        model=MODEL,
        kind="vllm",
        dp_size=2,
        events_endpoint=publishers[0].endpoint,
        replay_endpoint=publishers[0].replay_endpoint,
        topic="kv-events",
    )
    loop = build_loop(worker_id="media-order")
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    try:
        for publisher in publishers:
            stream = StreamId(POD, publisher.rank)
            wait_until(
                lambda s=stream: status.read_statuses(redis_client, [s])[0].connected,
                what=f"rank {publisher.rank} connected",
            )
            publisher.wait_for_subscribers()
        yield publishers
    finally:
        loop.stop()
        thread.join(timeout=patient(15))
        for publisher in publishers:
            publisher.close()
        forget_cached_weights()


def _publish(redis_client: redis.Redis, publisher: Publisher, *events) -> None:
    seq = publisher.publish(list(events))
    stream = StreamId(POD, publisher.rank)
    wait_until(lambda: status.last_seq(redis_client, stream) >= seq, what="applied")


def _medium(redis_client: redis.Redis) -> str:
    return redis_client.hget(key(BLOCK), POD).partition("|")[2]


def test_a_drain_after_a_weight_change_names_the_new_best_medium(
    ranks: list[Publisher], redis_client: redis.Redis
) -> None:
    rank0, rank1 = ranks
    offloaded = block_stored(Encoding.VLLM_MAP, [engine_hash(BLOCK)], [], 0, medium="DISK")
    _publish(redis_client, rank0, stored(BLOCK, medium="CPU"), offloaded)  # CPU and DISK
    _publish(redis_client, rank1, stored(BLOCK, medium="GPU"))
    assert _medium(redis_client) == "GPU"
    # kthena's defaults rank DISK (the 1.0 fallback) above CPU (0.8); these the other way.
    save_version(
        WeightConfig.validated({"cpu": 0.9, "disk": 0.5}),
        author="erin",
        reason="CPU reloads faster than disk",
        base_version=current_version().version,
    )

    rank1.restart()  # its purge drains its GPU copy: CPU and DISK are left
    rank1.publish([stored(BLOCK + 1)])
    wait_until(lambda: redis_client.hget(key(BLOCK + 1), POD), what="the new run applied")

    assert status.read_statuses(redis_client, [StreamId(POD, 1)])[0].status["restarts"] == "1"
    assert _medium(redis_client) == "CPU"
