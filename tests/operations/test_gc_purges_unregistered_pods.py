"""Pods the engine registry no longer lists (removed while Redis was away, say) are purged by
garbage collection; registered pods keep their fresh entries."""

import time

import redis

from kvadmin.index import gc
from kvadmin.index.writer import Applier
from scoring.keys import GC_LOCK_KEY, POD_MODELS_KEY, block_key, residency_key, stream_status_key
from tests.index import MODEL, IngestedIndex, std


def test_an_unregistered_pod_is_purged(redis_client: redis.Redis, index: IngestedIndex) -> None:
    index.store("kept.ns", [1, 2], at=time.time())
    index.store("gone.ns", [1, 2, 3], at=time.time())

    report = gc.collect_garbage(Applier(redis_client), 86400, registered=lambda: {"kept.ns"})

    assert (report.pods_purged, report.purged_blocks) == (1, 3)
    assert redis_client.hkeys(POD_MODELS_KEY) == ["kept.ns"]
    assert redis_client.hgetall(block_key(MODEL, std(1))).keys() == {"kept.ns"}
    assert redis_client.exists(block_key(MODEL, std(3))) == 0
    assert redis_client.exists(residency_key("gone.ns", "GPU")) == 0
    assert redis_client.exists(stream_status_key("gone.ns", 0)) == 0
    assert redis_client.hget(stream_status_key("kept.ns", 0), "last_seq") == "0"
    assert (report.ownerships, report.blocks) == (0, 0), "kept.ns's entries are fresh"


def test_a_second_collector_finds_the_run_taken(redis_client: redis.Redis) -> None:
    """Another process got there first: one run at a time."""
    lock = redis_client.lock(GC_LOCK_KEY, timeout=30)
    assert lock.acquire(blocking=False)
    try:
        try:
            gc.collect_garbage(Applier(redis_client), 86400, registered=set)
        except gc.AnotherRunIsActive:
            pass
        else:
            raise AssertionError("ran while another run held the lock")
    finally:
        lock.release()
    assert gc.last_run(redis_client) is None


def test_a_run_is_due_after_the_interval(redis_client: redis.Redis) -> None:
    assert gc.due(redis_client, 600)
    before = time.time()
    report = gc.collect_garbage(Applier(redis_client), 86400, registered=set)

    assert not gc.due(redis_client, 600, now=report.started_at + 599)
    assert gc.due(redis_client, 600, now=report.started_at + 600)
    assert before <= report.started_at <= report.finished_at
