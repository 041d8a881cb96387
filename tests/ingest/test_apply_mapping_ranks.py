"""kthena's engine-hash mapping key `vllm:kv:block:{pod}@{engine hash}` is per pod: it stays
while any data-parallel rank of the pod holds the engine block, whichever way the other rank
lets it go (removal, clear, publisher restart, garbage collection), and goes with the last.
The keys exist with KVADMIN_SIDECAR_MAPPING_KEYS on (test_apply_mapping_setting.py: off)."""

import pytest
import redis

from kvadmin.index.events import AllBlocksCleared, BlockRemoved, BlockStored, Event, EventBatch
from kvadmin.index.writer import Applier
from scoring.hashing import hash_block
from scoring.keys import ENGINE_HASH_TTL_SECONDS, engine_hash_key
from tests.engine_blocks import stream_blocks
from tests.index import MODEL

POD = "p.ns"
TOKENS = tuple(range(16))
STD = str(hash_block(TOKENS))
MAPPING = engine_hash_key("vllm", POD, "7")


class _Pod:
    """A DP-2 pod: each rank its own stream and seq counter."""

    def __init__(self, applier: Applier) -> None:
        self.applier, self.seqs = applier, {0: 0, 1: 0}

    def send(self, rank: int, *events: Event, now: float = 100) -> None:
        seq = self.seqs[rank]
        self.seqs[rank] += 1
        batch = EventBatch(ts=0.0, events=list(events))
        self.applier.apply_batch(POD, MODEL, "vllm", rank, seq, batch, now=now)


@pytest.fixture
def applier(redis_client: redis.Redis) -> Applier:
    """The index writer keeping kthena's sidecar mapping keys."""
    return Applier(redis_client, mapping_keys=True)


@pytest.fixture
def pod(applier: Applier) -> _Pod:
    """Both ranks stored engine block 7 (the same prompt served on each rank)."""
    pod = _Pod(applier)
    pod.send(0, BlockStored(("7",), TOKENS, 16, "GPU"))
    pod.send(1, BlockStored(("7",), TOKENS, 16, "GPU"))
    return pod


def test_a_removal_on_one_rank_keeps_the_key_the_other_rank_holds(
    pod: _Pod, redis_client: redis.Redis
) -> None:
    pod.send(0, BlockRemoved(("7",), "GPU"))
    assert redis_client.get(MAPPING) == STD
    assert 0 < redis_client.ttl(MAPPING) <= ENGINE_HASH_TTL_SECONDS

    pod.send(1, BlockRemoved(("7",), "GPU"))
    assert not redis_client.exists(MAPPING)


def test_a_clear_on_one_rank_keeps_the_key(pod: _Pod, redis_client: redis.Redis) -> None:
    pod.send(1, AllBlocksCleared())
    assert redis_client.get(MAPPING) == STD

    pod.send(0, AllBlocksCleared())
    assert not redis_client.exists(MAPPING)


def test_a_rank_restart_keeps_the_key(
    pod: _Pod, applier: Applier, redis_client: redis.Redis
) -> None:
    applier.purge_stream(POD, "0")  # rank 0's publisher restarted: its stream is purged
    assert redis_client.get(MAPPING) == STD

    applier.purge_stream(POD, "1")
    assert not redis_client.exists(MAPPING)


def test_a_placeholder_of_the_other_rank_still_resolves_after_one_rank_let_go(
    pod: _Pod, redis_client: redis.Redis
) -> None:
    """The reason the key matters inside kvadmin too: offload placeholders carry no tokens."""
    pod.send(0, BlockRemoved(("7",), "GPU"))
    pod.send(0, BlockStored(("7",), (), 0, "CPU"))  # rank 0 reloads it from CPU offload
    assert stream_blocks(redis_client, POD, 0).get("7") == f"{STD}|CPU"


def test_garbage_collection_of_one_rank_keeps_the_key_the_other_holds(
    applier: Applier, redis_client: redis.Redis
) -> None:
    """Rank 0's copy is stale; rank 1 stored the block again since the cutoff."""
    pod = _Pod(applier)
    pod.send(0, BlockStored(("7",), TOKENS, 16, "CPU"), now=100)
    pod.send(1, BlockStored(("7",), TOKENS, 16, "GPU"), now=100)
    pod.send(1, BlockStored(("7",), TOKENS, 16, "GPU"), now=500)
    step = applier.expire_step(POD, "0", "0", cutoff=300)
    assert step.ownerships == 1
    assert "7" not in stream_blocks(redis_client, POD, 0)
    assert redis_client.get(MAPPING) == STD
