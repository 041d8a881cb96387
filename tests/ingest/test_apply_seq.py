"""Exactly once (compatibility.md 4.1): a batch at or below the stream's last applied seq changes
nothing, and a run of batches is applied in one round trip with its counters."""

import redis

from kvadmin.index.events import BlockRemoved, BlockStored, EventBatch
from kvadmin.index.scripts import load
from kvadmin.index.streams import StreamId
from kvadmin.index.writer import Applier
from kvadmin.ingest.streams import StreamSpec
from scoring.hashing import hash_block
from scoring.keys import block_key, refcount_key, residency_key, residency_score, stream_status_key
from tests.index import MODEL

TOKENS = tuple(range(16))
STD = hash_block(TOKENS)
STREAM = StreamSpec(
    id=StreamId("p.ns", 0),
    model=MODEL,
    kind="vllm",
    events_endpoint="tcp://127.0.0.1:5557",
    replay_endpoint=None,
    topic=b"",
    block_size=16,
)


def _stored(engine_hash: str = "1") -> EventBatch:
    return EventBatch(ts=0.0, events=[BlockStored((engine_hash,), TOKENS, 16, "GPU")])


def test_a_duplicate_seq_is_not_applied_twice(applier: Applier, redis_client: redis.Redis) -> None:
    first = applier.apply_batch("p.ns", MODEL, "vllm", 0, 5, _stored("1"), now=100)
    again = applier.apply_batch("p.ns", MODEL, "vllm", 0, 5, _stored("2"), now=200)
    older = applier.apply_batch("p.ns", MODEL, "vllm", 0, 4, _stored("2"), now=200)

    assert (first.applied, again.duplicate, older.duplicate) == (True, True, True)
    assert redis_client.hgetall(refcount_key("p.ns")) == {}  # one holder: the residency alone
    assert redis_client.zscore(residency_key("p.ns", "GPU"), str(STD)) == residency_score(100)
    assert redis_client.hget(block_key(MODEL, STD), "p.ns") == "100|GPU"
    status = redis_client.hgetall(stream_status_key("p.ns", 0))
    assert (status["last_seq"], status["batches"], status["blocks_stored"]) == ("5", "1", "1")


def test_a_run_of_batches_is_one_round_trip(own_client: redis.Redis) -> None:
    """On a redis-server of its own: its counters are those of this test's commands alone."""
    applier = Applier(own_client)
    applier.apply_batch("p.ns", MODEL, "vllm", 0, 1, _stored("1"), now=100)
    own_client.config_resetstat()

    results = applier.apply_batches(
        STREAM,
        [
            (1, _stored("9")),
            (2, _stored("2")),
            (3, EventBatch(ts=0.0, events=[BlockRemoved(("1",), "GPU")], skipped={"bad_hash": 2})),
        ],
        now=101,
    )

    assert [r.applied for r in results] == [False, True, True]
    assert results[2].counts["blocks_removed"] == 1
    assert results[2].counts["skipped_bad_hash"] == 2
    assert own_client.info("commandstats")["cmdstat_evalsha"]["calls"] == 1
    status = own_client.hgetall(stream_status_key("p.ns", 0))
    assert status["last_seq"] == "3"
    assert (status["batches"], status["events"], status["skipped_bad_hash"]) == ("3", "3", "2")
    assert not own_client.exists(refcount_key("p.ns"))  # engine hash 2 alone holds it
    assert own_client.hget(block_key(MODEL, STD), "p.ns") == "101|GPU"


def test_a_long_run_is_split_between_calls(own_client: redis.Redis) -> None:
    applier = Applier(own_client, blocks_per_call=2)
    own_client.script_load(load("apply").text)  # as a server that ran the writer has it
    own_client.config_resetstat()

    results = applier.apply_batches(STREAM, [(seq, _stored(str(seq))) for seq in range(5)], now=1)

    assert all(r.applied for r in results)
    assert own_client.info("commandstats")["cmdstat_evalsha"]["calls"] == 3


def test_a_reset_last_seq_accepts_seq_zero_again(
    applier: Applier, redis_client: redis.Redis
) -> None:
    """The ingest loop writes -1 after a publisher restart (kvadmin.index.status)."""
    applier.apply_batch("p.ns", MODEL, "vllm", 0, 7, _stored("1"), now=100)
    redis_client.hset(stream_status_key("p.ns", 0), "last_seq", -1)

    assert applier.apply_batch("p.ns", MODEL, "vllm", 0, 0, _stored("2"), now=100).applied


def test_pipelined_calls_survive_a_flushed_script_cache(own_client: redis.Redis) -> None:
    """A restarted Redis has no scripts: every call sent ahead fails, and is sent again (on a
    redis-server of its own, whose script cache no other client fills meanwhile)."""
    applier = Applier(own_client, blocks_per_call=1)
    own_client.script_flush()

    results = applier.apply_batches(STREAM, [(seq, _stored(str(seq))) for seq in range(4)], now=1)

    assert all(r.applied for r in results)
    assert own_client.hget(refcount_key("p.ns"), f"{STD}|GPU") == "4"  # four engine hashes
    assert own_client.hget(stream_status_key("p.ns", 0), "batches") == "4"
