"""A restart of one data-parallel rank is no restart of its pod (compatibility.md 2.4 step 1):
the restarted rank's own entries go with its purge, and scoring keeps every block the other rank
still holds; a container restart (every rank starts a new run) drops what was written before it.

A DP-2 pod on real publishers, read by the real ingest loop into real Redis, scored as the
routing service reads it (its ranks' stream status as start keys)."""

import time

import pytest
import redis

from kvadmin.fleet.publisher import Publisher
from kvadmin.index import status
from kvadmin.index.streams import StreamId
from scoring.index import BaselineIndexReader, IndexReader, PrefixReader, score_request
from scoring.keys import block_value, rank_status_keys
from scoring.score import ScoreResult
from scoring.values import pod_start
from scoring.weights import TierWeights
from tests.index import MODEL, block_tokens
from tests.ingest.blocks import key, stored
from tests.ingest.conftest import spec_for
from tests.waiting import wait_until

POD = "vllm-0.default"
READERS = [
    pytest.param(IndexReader(), id="lua"),
    pytest.param(BaselineIndexReader(), id="baseline"),
]


@pytest.fixture
def ranks(start_loop, redis_client: redis.Redis):
    """Ranks 0 and 1 of one pod, both followed by one ingest loop and caught up."""
    publishers = [Publisher(data_parallel_rank=rank) for rank in (0, 1)]
    try:
        start_loop([spec_for(publisher, POD, rank) for rank, publisher in enumerate(publishers)])
        for rank, publisher in enumerate(publishers):
            stream = StreamId(POD, rank)
            wait_until(
                lambda stream=stream: status.read_statuses(redis_client, [stream])[0].connected,
                what=f"rank {rank} connected",
            )
            publisher.wait_for_subscribers()
        yield publishers
    finally:
        for publisher in publishers:
            publisher.close()


def _publish(redis_client: redis.Redis, publisher: Publisher, *blocks: int) -> None:
    seq = publisher.publish([stored(*blocks)])
    stream = StreamId(POD, publisher.rank)
    wait_until(lambda: status.last_seq(redis_client, stream) >= seq, what="applied")


def _restart(redis_client: redis.Redis, publisher: Publisher, *blocks: int) -> None:
    """The rank's publisher restarts and stores `blocks` in its new run."""
    stream = StreamId(POD, publisher.rank)
    publisher.restart()
    publisher.publish([stored(*blocks)])
    wait_until(
        lambda: status.read_statuses(redis_client, [stream])[0].status.get("restarts") == "1",
        what="restart",
    )
    wait_until(lambda: redis_client.hget(key(blocks[-1]), POD), what="new run applied")


def _next_second() -> None:
    """Let the clock pass a whole second: freshness compares whole seconds."""
    second = int(time.time())
    wait_until(lambda: int(time.time()) > second, what="the next second")


def _score(redis_client: redis.Redis, reader: PrefixReader, *blocks: int) -> ScoreResult:
    token_ids = [t for n in blocks for t in block_tokens(n)]
    start_keys = {POD: rank_status_keys(POD, 2)}
    weights = TierWeights()
    return score_request(
        redis_client, MODEL, token_ids, {POD}, {}, weights, reader=reader, start_keys=start_keys
    )


@pytest.mark.parametrize("reader", READERS)
def test_a_rank_restart_keeps_the_blocks_the_other_rank_holds(
    ranks: list[Publisher], redis_client: redis.Redis, reader: PrefixReader
) -> None:
    rank0, rank1 = ranks
    _publish(redis_client, rank0, 1, 2, 3)  # rank 0 holds 1 2 3
    _publish(redis_client, rank1, 1, 4)  # rank 1 holds 1 and 4
    _next_second()  # rank 1's restart comes a second after every store
    _restart(redis_client, rank1, 5)

    written = int(redis_client.hget(key(1), POD).partition("|")[0])
    assert (
        int(status.read_statuses(redis_client, [StreamId(POD, 1)])[0].status["started_at"])
        >= written
    )
    result = _score(redis_client, reader, 1, 2, 3)
    assert result.scores == {POD: 100}  # written before rank 1's start, held by rank 0
    assert result.dropped_stale == ()
    assert redis_client.hget(key(4), POD) is None  # rank 1's own old run went with its purge
    assert _score(redis_client, reader, 5).scores == {POD: 100}


@pytest.mark.parametrize("reader", READERS)
def test_a_container_restart_drops_what_was_written_before_it(
    ranks: list[Publisher], redis_client: redis.Redis, reader: PrefixReader
) -> None:
    """Every rank starts a new run: the earliest of their starts is the pod's, and an owner
    written at or before it is dropped, as kthena drops it at the container's start."""
    rank0, rank1 = ranks
    _publish(redis_client, rank0, 1)
    _publish(redis_client, rank1, 2)
    _restart(redis_client, rank0, 3)
    _restart(redis_client, rank1, 4)
    starts = [
        int(status.read_statuses(redis_client, [StreamId(POD, rank)])[0].status["started_at"])
        for rank in (0, 1)
    ]
    start = pod_start(starts)
    assert start == min(starts)
    # An entry of the old run that no purge released (kthena's own writer leaves those).
    redis_client.hset(key(1), POD, block_value(start, "GPU"))
    result = _score(redis_client, reader, 1)
    assert (result.scores, result.dropped_stale) == ({}, (POD,))
    assert _score(redis_client, reader, 3).scores == {POD: 100}
    assert _score(redis_client, reader, 4).scores == {POD: 100}
