"""Purges (compatibility.md 5.7): removing an engine removes exactly that pod's entries, every rank,
in bounded steps and without scanning the keyspace; a stream purge removes one rank's."""

import pytest
import redis

from kvadmin.index.events import BlockStored, Event, EventBatch
from kvadmin.index.streams import StreamId
from kvadmin.index.writer import Applier
from kvadmin.ingest.streams import StreamSpec
from scoring.hashing import hash_block
from scoring.keys import (
    BLOCK_KEY_PREFIX,
    POD_MODELS_KEY,
    block_key,
    refcount_key,
    residency_key,
)
from tests.engine_blocks import bucket_keys
from tests.index import MODEL, OTHER_MODEL
from tests.ingest.conftest import snapshot

TOKENS = tuple(range(16 * 25))
STDS = [hash_block(TOKENS[i : i + 16]) for i in range(0, len(TOKENS), 16)]
HASHES = tuple(str(500 + i) for i in range(len(STDS)))


def _send(
    applier: Applier, pod: str, rank: int, seq: int, *events: Event, model: str = MODEL
) -> None:
    batch = EventBatch(ts=0.0, events=list(events))
    applier.apply_batch(pod, model, "vllm", rank, seq, batch, now=100)


def _fill(applier: Applier, pod: str) -> None:
    """Two ranks, GPU stores and a CPU offload: every kind of entry the index keeps."""
    _send(applier, pod, 0, 0, BlockStored(HASHES, TOKENS, 16, "GPU"))
    _send(applier, pod, 0, 1, BlockStored(HASHES[:5], (), 0, "CPU"))
    _send(applier, pod, 1, 0, BlockStored(HASHES[:3], TOKENS[:48], 16, "GPU"))


def _without(index: dict[str, object], pod: str) -> dict[str, object]:
    """What the snapshot should be once `pod` is gone: its keys, fields and stream status
    (which belongs to the ingest loop) aside."""
    kept: dict[str, object] = {}
    for key, content in index.items():
        if key.startswith("kvadmin:stream:"):
            continue
        if pod in key:
            continue
        if isinstance(content, dict) and (key.startswith("matrix:") or key.startswith("kvadmin:p")):
            content = {field: v for field, v in content.items() if field != pod}
            if not content:
                continue
        kept[key] = content
    return kept


@pytest.fixture
def applier(redis_client: redis.Redis) -> Applier:
    """Steps of 10 members, so one pod takes several."""
    return Applier(redis_client, chunk_size=10)


def test_purging_a_pod_removes_exactly_its_entries(
    applier: Applier, redis_client: redis.Redis
) -> None:
    _fill(applier, "a.ns")
    _fill(applier, "b.ns")
    redis_client.set("unrelated", "1")
    redis_client.hset(block_key(MODEL, 1), "kthena-only.ns", "5|GPU")
    before = snapshot(redis_client)

    removed = applier.purge_pod("a.ns")

    assert removed == len(STDS)
    assert snapshot(redis_client, status=False) == _without(before, "a.ns")
    assert redis_client.hget(block_key(MODEL, STDS[0]), "b.ns") == "100|GPU"


def test_a_pod_purge_takes_bounded_steps_and_never_scans(own_client: redis.Redis) -> None:
    """On a redis-server of its own: its counters are those of this test's commands alone."""
    applier = Applier(own_client, chunk_size=10)
    _fill(applier, "a.ns")
    own_client.config_resetstat()

    applier.purge_pod("a.ns")

    stats = own_client.info("commandstats")
    assert "cmdstat_scan" not in stats
    assert "cmdstat_keys" not in stats
    # 28 engine blocks + 25 GPU and 5 CPU residency members, 10 per step
    assert stats["cmdstat_evalsha"]["calls"] >= 6
    assert [key for key in own_client.keys("*a.ns*") if "stream:" not in key] == []


def test_a_stream_purge_keeps_the_other_ranks(applier: Applier, redis_client: redis.Redis) -> None:
    _fill(applier, "a.ns")

    applier.purge_stream("a.ns", 0)

    assert not bucket_keys(redis_client, "a.ns", "0")
    for std in STDS[:3]:
        assert redis_client.hget(block_key(MODEL, std), "a.ns") == "100|GPU"
    for std in STDS[3:]:
        assert not redis_client.exists(block_key(MODEL, std))
    assert redis_client.hget(POD_MODELS_KEY, "a.ns") == MODEL


def test_purging_the_last_stream_forgets_the_pod(
    applier: Applier, redis_client: redis.Redis
) -> None:
    _fill(applier, "a.ns")

    applier.purge_stream("a.ns", 0)
    applier.purge_stream("a.ns", 1)

    assert [key for key in redis_client.keys("*") if not key.startswith("kvadmin:stream:")] == []


def test_a_new_model_replaces_the_old_models_entries(
    applier: Applier, redis_client: redis.Redis
) -> None:
    """An engine restarted with another model: its old blocks are not cached any more."""
    _fill(applier, "a.ns")

    _send(applier, "a.ns", 0, 2, BlockStored(HASHES[:1], TOKENS[:16], 16, "GPU"), model=OTHER_MODEL)

    assert not redis_client.keys(f"{BLOCK_KEY_PREFIX}{MODEL}@*")
    assert redis_client.hgetall(block_key(OTHER_MODEL, STDS[0])) == {"a.ns": "100|GPU"}
    assert redis_client.hgetall(refcount_key("a.ns")) == {}
    assert redis_client.zrange(residency_key("a.ns", "GPU"), 0, -1) == [str(STDS[0])]


def test_a_model_change_found_in_pipelined_calls_purges_once(redis_client: redis.Redis) -> None:
    applier = Applier(redis_client, blocks_per_call=1)
    _fill(applier, "a.ns")
    stream = StreamSpec(
        StreamId("a.ns", 0), OTHER_MODEL, "vllm", "tcp://127.0.0.1:1", None, b"", 16
    )
    batches = [
        (seq, EventBatch(0.0, [BlockStored(HASHES[seq : seq + 1], TOKENS[16 * seq :][:16], 16)]))
        for seq in range(2, 5)
    ]

    results = applier.apply_batches(stream, batches, now=100)

    assert all(result.applied for result in results)
    assert not redis_client.keys(f"{BLOCK_KEY_PREFIX}{MODEL}@*")
    assert len(redis_client.keys(f"{BLOCK_KEY_PREFIX}{OTHER_MODEL}@*")) == 3
