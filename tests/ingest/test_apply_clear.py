"""AllBlocksCleared (compatibility.md 4.2, 5.7) clears the publishing stream's whole cache: its own
engine blocks only, released in bounded chunks, with no keyspace scan."""

import pytest
import redis

from kvadmin.index.events import AllBlocksCleared, BlockStored, Event, EventBatch
from kvadmin.index.writer import Applier
from scoring.hashing import hash_block
from scoring.keys import block_key, engine_hash_key, retired_set_key
from tests.engine_blocks import by_stream, stream_blocks
from tests.index import MODEL

TOKENS = tuple(range(16 * 35))
STDS = [hash_block(TOKENS[i : i + 16]) for i in range(0, len(TOKENS), 16)]
HASHES = tuple(str(1000 + i) for i in range(len(STDS)))


def _send(applier: Applier, pod: str, rank: int, seq: int, *events: Event) -> dict[str, int]:
    batch = EventBatch(ts=0.0, events=list(events))
    return applier.apply_batch(pod, MODEL, "vllm", rank, seq, batch, now=100).counts


def _store_all() -> BlockStored:
    return BlockStored(HASHES, TOKENS, 16, "GPU")


@pytest.fixture
def applier(redis_client: redis.Redis) -> Applier:
    """Small chunks, so 35 blocks take several drain steps; with kthena's mapping keys, which
    a clear takes with the blocks."""
    return Applier(redis_client, chunk_size=10, mapping_keys=True)


def test_a_clear_drops_the_stream_and_nothing_else(
    applier: Applier, redis_client: redis.Redis
) -> None:
    _send(applier, "a.ns", 0, 0, _store_all())
    _send(applier, "a.ns", 1, 0, BlockStored(HASHES[:1], TOKENS[:16], 16, "GPU"))
    _send(applier, "b.ns", 0, 0, _store_all())

    counts = _send(applier, "a.ns", 0, 1, AllBlocksCleared())

    assert counts["clears"] == 1
    assert redis_client.hgetall(block_key(MODEL, STDS[0])) == {"a.ns": "100|GPU", "b.ns": "100|GPU"}
    for std in STDS[1:]:
        assert redis_client.hgetall(block_key(MODEL, std)) == {"b.ns": "100|GPU"}
    assert stream_blocks(redis_client, "a.ns", 0) == {}
    assert len(stream_blocks(redis_client, "a.ns", 1)) == 1
    assert len(stream_blocks(redis_client, "b.ns", 0)) == len(HASHES)
    assert set(by_stream(redis_client)) == {"engine blocks a.ns|1", "engine blocks b.ns|0"}
    assert not redis_client.exists(engine_hash_key("vllm", "a.ns", HASHES[5]))
    assert not redis_client.exists(retired_set_key("a.ns"))


def test_blocks_stored_after_a_clear_in_the_same_batch_stay(
    applier: Applier, redis_client: redis.Redis
) -> None:
    _send(applier, "a.ns", 0, 0, _store_all())

    _send(
        applier, "a.ns", 0, 1, AllBlocksCleared(), BlockStored(HASHES[:1], TOKENS[:16], 16, "GPU")
    )

    assert redis_client.hget(block_key(MODEL, STDS[0]), "a.ns") == "100|GPU"
    assert redis_client.get(engine_hash_key("vllm", "a.ns", HASHES[0])) == str(STDS[0])
    assert all(not redis_client.exists(block_key(MODEL, std)) for std in STDS[1:])


def test_a_clear_releases_in_chunks_without_scanning(own_client: redis.Redis) -> None:
    """On a redis-server of its own: its counters are those of this test's commands alone."""
    applier = Applier(own_client, chunk_size=10, mapping_keys=True)
    _send(applier, "a.ns", 0, 0, _store_all())
    own_client.config_resetstat()

    _send(applier, "a.ns", 0, 1, AllBlocksCleared())

    stats = own_client.info("commandstats")
    assert "cmdstat_scan" not in stats
    assert "cmdstat_keys" not in stats
    assert stats["cmdstat_evalsha"]["calls"] >= 1 + len(HASHES) // 10
    assert not own_client.keys("matrix:*")
