"""ApplySession: script calls of several streams in flight on one connection, replies read
later. Each submission's results arrive once, in seq order; commands sent after calls run
after them; a failing call of one pod never re-runs the calls of another, and a stream's
call never applies after its failed predecessor."""

import pytest
import redis

from kvadmin.index.events import BlockStored, EventBatch
from kvadmin.index.scripts import load
from kvadmin.index.session import ApplyResult
from kvadmin.index.streams import StreamId
from kvadmin.index.writer import Applier
from kvadmin.ingest.streams import StreamSpec
from scoring.hashing import hash_block
from scoring.keys import POD_MODELS_KEY, block_key, stream_status_key
from tests.index import MODEL, OTHER_MODEL
from tests.waiting import wait_until

TOKENS = tuple(range(16 * 8))
STDS = [hash_block(TOKENS[i : i + 16]) for i in range(0, len(TOKENS), 16)]


def _stream(pod: str, model: str = MODEL) -> StreamSpec:
    return StreamSpec(StreamId(pod, 0), model, "vllm", "tcp://127.0.0.1:1", None, b"", 16)


def _batches(first: int, count: int) -> list[tuple[int, EventBatch]]:
    """One GPU store per batch: seq s stores block s."""
    return [
        (seq, EventBatch(0.0, [BlockStored((str(seq),), TOKENS[16 * seq : 16 * seq + 16], 16)]))
        for seq in range(first, first + count)
    ]


def test_results_of_interleaved_streams_arrive_once_in_seq_order(
    redis_client: redis.Redis,
) -> None:
    applier = Applier(redis_client, blocks_per_call=1)
    received: dict[str, list[list[ApplyResult]]] = {"a.ns": [], "b.ns": []}
    session = applier.session(window=3)
    try:
        session.submit(_stream("a.ns"), _batches(0, 4), 100, done=received["a.ns"].append)
        session.submit(_stream("b.ns"), _batches(0, 2), 100, done=received["b.ns"].append)
        session.submit(_stream("a.ns"), _batches(4, 2), 100, done=received["a.ns"].append)
        session.wait()
    finally:
        session.close()

    assert [[r.seq for r in run] for run in received["a.ns"]] == [[0, 1, 2, 3], [4, 5]]
    assert [[r.seq for r in run] for run in received["b.ns"]] == [[0, 1]]
    assert all(r.applied for runs in received.values() for run in runs for r in run)
    assert redis_client.hget(stream_status_key("a.ns", 0), "last_seq") == "5"
    assert redis_client.hget(block_key(MODEL, STDS[5]), "a.ns") == "100"  # no medium


def test_sent_commands_run_after_the_calls_before_them(redis_client: redis.Redis) -> None:
    """The reader records the applied digest this way: it must not overtake the batch."""
    applier = Applier(redis_client)
    session = applier.session(window=4)
    try:
        session.submit(_stream("a.ns"), _batches(0, 3), 100)
        pipe = redis_client.pipeline(transaction=False)
        pipe.rename(stream_status_key("a.ns", 0), "moved")  # fails unless the calls ran first
        session.send(pipe)
        session.wait()
    finally:
        session.close()

    assert redis_client.hget("moved", "last_seq") == "2"
    assert not redis_client.exists(stream_status_key("a.ns", 0))


def test_a_model_change_reruns_only_that_pods_calls(redis_client: redis.Redis) -> None:
    applier = Applier(redis_client, blocks_per_call=1)
    applier.apply_batches(_stream("a.ns"), _batches(0, 2), now=100)
    results: list[list[ApplyResult]] = []
    session = applier.session(window=8)
    try:
        session.submit(_stream("a.ns", model=OTHER_MODEL), _batches(2, 3), 100, done=results.append)
        session.submit(_stream("b.ns"), _batches(0, 3), 100, done=results.append)
        session.wait()
    finally:
        session.close()

    assert [[r.applied for r in run] for run in results] == [[True] * 3, [True] * 3]
    assert redis_client.hget(POD_MODELS_KEY, "a.ns") == OTHER_MODEL
    # a.ns's blocks of its old model are purged; b.ns's of that model stay
    assert redis_client.hgetall(block_key(MODEL, STDS[0])) == {"b.ns": "100"}
    assert redis_client.hgetall(block_key(OTHER_MODEL, STDS[2])) == {"a.ns": "100"}
    assert redis_client.hget(stream_status_key("b.ns", 0), "batches") == "3"  # not run twice


def test_a_failed_session_refuses_more_work(redis_client: redis.Redis) -> None:
    applier = Applier(redis_client)
    session = applier.session(window=4)
    pipe = redis_client.pipeline(transaction=False)
    pipe.hset(stream_status_key("a.ns", 0), "last_seq", "1")
    pipe.incr(stream_status_key("a.ns", 0))  # WRONGTYPE: the key holds a hash
    session.send(pipe)
    with pytest.raises(redis.ResponseError):
        session.wait()
    with pytest.raises(RuntimeError, match="failed before"):
        session.submit(_stream("a.ns"), _batches(0, 1), 100)
    session.close()

    assert not applier.apply_batches(_stream("a.ns"), _batches(1, 1), now=100)[0].applied


def test_a_call_whose_predecessor_failed_does_not_apply(own_client: redis.Redis) -> None:
    """A missing script fails a call; another client loads the script before the stream's
    next call arrives. That call must fail too, or batch 0 would be refused as applied when
    it runs again, and lost. (On a redis-server of its own: its NOSCRIPT count and script
    cache are this test's alone.)"""
    applier = Applier(own_client)
    own_client.script_flush()
    missing = own_client.info("errorstats").get("errorstat_NOSCRIPT", {}).get("count", 0)
    results: list[list[ApplyResult]] = []
    session = applier.session(window=4)
    try:
        session.submit(_stream("a.ns"), _batches(0, 1), 100, done=results.append)
        wait_until(
            lambda: own_client.info("errorstats")["errorstat_NOSCRIPT"]["count"] > missing,
            what="the first call to fail for want of the script",
        )
        own_client.script_load(load("apply").text)
        session.submit(_stream("a.ns"), _batches(1, 1), 100, done=results.append)
        session.wait()
    finally:
        session.close()

    assert [[(r.seq, r.applied) for r in run] for run in results] == [[(0, True)], [(1, True)]]
    assert own_client.hget(block_key(MODEL, STDS[0]), "a.ns") == "100"
    assert own_client.hget(stream_status_key("a.ns", 0), "batches") == "2"
