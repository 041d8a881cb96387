"""Fixtures for ingestion: engine publishers on free ports and ingest loops reading them."""

import threading
from collections.abc import Callable, Iterator

import pytest
import redis

from kvadmin.fleet.publisher import Publisher
from kvadmin.fleet.wire import Encoding
from kvadmin.index.streams import StreamId
from kvadmin.index.writer import Applier
from kvadmin.ingest.reader import IngestLoop
from kvadmin.ingest.streams import StreamSpec
from scoring.values import ValueFormat
from tests.index import MODEL
from tests.waiting import patient


def spec_for(publisher: Publisher, pod: str = "vllm-0.default", rank: int = 0) -> StreamSpec:
    return StreamSpec(
        id=StreamId(pod, rank),
        model=MODEL,
        kind=publisher.encoding.engine,
        events_endpoint=publisher.endpoint,
        replay_endpoint=publisher.replay_endpoint,
        topic=publisher.topic,
        block_size=16,
    )


def snapshot(client: redis.Redis, status: bool = True, skip: str = "") -> dict[str, object]:
    """Every key of the index database and its content, without the stream status hashes
    unless `status` (a test may scan; the product never does), nor the key `skip`."""
    readers = {
        "hash": client.hgetall,
        "string": client.get,
        "set": client.smembers,
        "zset": lambda key: client.zrange(key, 0, -1, withscores=True),
    }
    return {
        key: readers[client.type(key)](key)
        for key in client.scan_iter()
        if (status or not key.startswith("kvadmin:stream:")) and key != skip
    }


@pytest.fixture
def applier(redis_client: redis.Redis) -> Applier:
    """The index writer on this test's empty index database."""
    return Applier(redis_client)


@pytest.fixture
def publisher() -> Iterator[Publisher]:
    """A vLLM (v0.26 map encoding) rank-0 publisher with a replay socket."""
    with Publisher(encoding=Encoding.VLLM_MAP, topic=b"kv-events") as pub:
        yield pub


StartLoop = Callable[..., IngestLoop]


@pytest.fixture
def start_loop(redis_url: str) -> Iterator[StartLoop]:
    """Run ingest loops in threads (as the worker bootstep does); all stopped after the test."""
    running: list[tuple[IngestLoop, threading.Thread]] = []

    def start(
        specs: list[StreamSpec],
        url: str = redis_url,
        value_format: ValueFormat = ValueFormat.TIERED,
        **options,
    ) -> IngestLoop:
        client = redis.Redis.from_url(url, decode_responses=True)
        applier = Applier(client, value_format=value_format)
        loop = IngestLoop(applier, lambda: specs, lambda: 0, **options)
        thread = threading.Thread(target=loop.run, daemon=True)
        thread.start()
        running.append((loop, thread))
        return loop

    yield start
    for loop, thread in running:
        loop.stop()
        thread.join(timeout=patient(15))
        assert not thread.is_alive(), "the ingest loop did not stop"
