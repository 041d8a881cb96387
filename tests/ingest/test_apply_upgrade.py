"""An index written before issue 35 (one engine-blocks hash per stream) is upgraded by the first
command that touches each pod, and from then on it is the index today's writer would have made
from the same events."""

import pytest
import redis

from kvadmin.index.events import AllBlocksCleared, BlockRemoved, BlockStored, Event, EventBatch
from kvadmin.index.writer import Applier
from scoring import keys
from tests.engine_blocks import bucket_keys, stream_blocks
from tests.index import MAPPING_KEYS, MODEL
from tests.operations.synthetic import snapshot

POD = "p.ns"
TOKENS = tuple(range(16 * 40))
HASHES = tuple(str(18_000_000_000_000_000_000 + i) for i in range(40))
SHORT = ("7", "deadbeef")  # a short hash and a hex one live whole in their buckets
UNCOUNTED = ("kvadmin:gc:", "kvadmin:stream:")
"""The stream status counts the clear's batch only where it was sent."""


def _send(applier: Applier, rank: int, seq: int, *events: Event) -> None:
    applier.apply_batch(POD, MODEL, "vllm", rank, seq, EventBatch(ts=0.0, events=list(events)), 100)


def _first(applier: Applier) -> None:
    """Two ranks holding blocks in GPU and CPU, one of them on both ranks."""
    _send(applier, 0, 0, BlockStored(HASHES[:30], TOKENS[: 16 * 30], 16, "GPU"))
    _send(applier, 0, 1, BlockStored(HASHES[:10], (), 0, "CPU"))
    _send(applier, 1, 0, BlockStored(HASHES[30:], TOKENS[16 * 30 :], 16, "GPU"))
    _send(applier, 1, 1, BlockStored(SHORT, TOKENS[:32], 16, "GPU"))


def _then(applier: Applier) -> None:
    """Removals, placeholders and stores over blocks of both ranks."""
    _send(applier, 0, 2, BlockRemoved(HASHES[:5], "GPU"), BlockStored(HASHES[30:32], (), 0, "CPU"))
    _send(applier, 1, 2, BlockRemoved((SHORT[0], HASHES[35]), "GPU"))


def _to_legacy(client: redis.Redis, stream: str, retired: bool = False) -> None:
    """Put one stream's engine blocks back as builds before issue 35 kept them: live in one
    hash, or retired by a clear not yet drained (that build's clear moved the generation on
    first, then named the retired hash after it)."""
    blocks = stream_blocks(client, POD, stream)
    client.delete(*bucket_keys(client, POD, stream))
    if not retired:
        client.hset(keys.legacy_engine_blocks_key(POD, stream), mapping=blocks)
        return
    generation = client.hincrby(keys.stream_status_key(POD, stream), "generation", 1)
    client.hset(keys.legacy_retired_blocks_key(POD, stream, generation), mapping=blocks)
    client.sadd(keys.legacy_retired_set_key(POD), f"{stream}|{generation}")


def _legacy_keys(client: redis.Redis) -> list[str]:
    return [
        key
        for pattern in ("kvadmin:eh:*", "kvadmin:eh-retired:*", "kvadmin:retired:*")
        for key in client.scan_iter(pattern)
    ]


@pytest.fixture(params=MAPPING_KEYS, ids=["mapping-keys-on", "mapping-keys-off"])
def applier(request, redis_client: redis.Redis) -> Applier:
    """Small chunks, so the upgrade takes several steps."""
    return Applier(redis_client, chunk_size=7, mapping_keys=request.param)


def test_later_events_apply_to_an_upgraded_index_as_to_a_new_one(
    applier: Applier, redis_client: redis.Redis
) -> None:
    _first(applier)
    _then(applier)
    expected = snapshot(redis_client)
    redis_client.flushdb()
    _first(applier)
    _to_legacy(redis_client, "0")
    _to_legacy(redis_client, "1")
    assert _legacy_keys(redis_client)

    _then(applier)

    assert not _legacy_keys(redis_client)
    assert snapshot(redis_client) == expected


def test_retired_blocks_of_the_old_layout_are_released(
    applier: Applier, redis_client: redis.Redis
) -> None:
    """A clear that build applied but did not drain: the upgrade releases its blocks."""
    _first(applier)
    _send(applier, 1, 2, AllBlocksCleared())
    expected = snapshot(redis_client, skip=UNCOUNTED)
    redis_client.flushdb()
    _first(applier)
    _to_legacy(redis_client, "0")
    _to_legacy(redis_client, "1", retired=True)

    applier.drain_pod(POD)

    assert not _legacy_keys(redis_client)
    assert snapshot(redis_client, skip=UNCOUNTED) == expected


def test_a_purge_of_a_pod_in_the_old_layout_upgrades_it_first(
    applier: Applier, redis_client: redis.Redis
) -> None:
    """A purge of a pod left in the old layout leaves nothing of it behind."""
    _first(applier)
    _to_legacy(redis_client, "0")
    _to_legacy(redis_client, "1")

    assert applier.purge_pod(POD) > 0

    assert not _legacy_keys(redis_client)
    assert not [key for key in redis_client.scan_iter("*") if POD in key and "stream:" not in key]
