"""Ownership written at or before a pod's last (re)start does not count (compatibility.md 2.4 step
1): the ingest reader records when a publisher starts a run, and scoring drops what is older."""

import time

import pytest

from kvadmin.engines.models import Engine
from kvadmin.index import status
from kvadmin.index.streams import StreamId
from kvadmin.routing import service
from tests.index import MODEL, block_tokens
from tests.ingest.blocks import stored
from tests.ingest.conftest import spec_for
from tests.routing.conftest import hold
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db

POD = "vllm-0.default"
STREAM = StreamId(POD, 0)


@pytest.fixture
def engine(db) -> Engine:
    """vllm-0, registered and serving MODEL."""
    return Engine.objects.create(pod=POD, model=MODEL, events_endpoint="tcp://127.0.0.1:5557")


def _started_at(redis_client) -> int | None:
    value = status.read_statuses(redis_client, [STREAM])[0].status.get("started_at")
    return int(value) if value is not None else None


def test_owners_written_before_the_last_start_are_dropped(engine, redis_client) -> None:
    request = [t for n in range(3) for t in block_tokens(n)]
    hold(redis_client, POD, request, ["GPU"] * 3, written_at=1000)
    assert service.score(MODEL, token_ids=request, record=False).chosen == POD
    redis_client.hset("kvadmin:stream:vllm-0.default|0", "started_at", 1000)
    decision = service.score(MODEL, token_ids=request, record=False)
    assert decision.scores == [] and decision.dropped.stale == [POD]


def test_a_data_parallel_pod_started_when_its_earliest_rank_did(engine, redis_client) -> None:
    """A rank restarting alone is not a start of the pod: rank 0 may hold the block still."""
    engine.dp_size = 2
    engine.save()
    request = list(block_tokens(0))
    hold(redis_client, POD, request, ["GPU"], written_at=1500)
    redis_client.hset("kvadmin:stream:vllm-0.default|0", "started_at", 1000)
    assert service.score(MODEL, token_ids=request, record=False).scores[0].pod == POD
    redis_client.hset("kvadmin:stream:vllm-0.default|1", "started_at", 2000)
    assert service.score(MODEL, token_ids=request, record=False).scores[0].pod == POD
    redis_client.hset("kvadmin:stream:vllm-0.default|0", "started_at", 1600)  # every rank
    assert service.score(MODEL, token_ids=request, record=False).dropped.stale == [POD]


def test_the_reader_records_a_start_and_the_new_run_counts(
    engine, publisher, start_loop, redis_client
) -> None:
    start_loop([spec_for(publisher)])
    wait_until(lambda: status.read_statuses(redis_client, [STREAM])[0].connected, what="connect")
    assert _started_at(redis_client) is not None  # the first connection is a start
    publisher.wait_for_subscribers()
    publisher.publish([stored(1)])
    seq = publisher.publish([stored(3)])
    wait_until(lambda: status.last_seq(redis_client, STREAM) >= seq, what="first run applied")
    before_restart = int(time.time())
    publisher.restart()
    publisher.publish([stored(2)])
    wait_until(
        lambda: int(status.read_statuses(redis_client, [STREAM])[0].status.get("restarts", 0)) == 1,
        what="restart",
    )
    assert _started_at(redis_client) >= before_restart - 1
    decision = wait_until(
        lambda: (
            (found := service.score(MODEL, token_ids=list(block_tokens(2)), record=False)).scores
            and found
        ),
        what="the new run's block to count",
    )
    assert decision.scores[0].pod == POD and decision.scores[0].matched_blocks == 1
    assert decision.dropped.stale == []
