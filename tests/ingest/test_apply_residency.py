"""Per-medium residency (compatibility.md 5.4): a block held in GPU and CPU is in both; removing one
medium keeps the other, and the matrix value names the best medium still held."""

import pytest
import redis

from kvadmin.index.events import BlockRemoved, BlockStored, EventBatch
from kvadmin.index.writer import Applier
from scoring.hashing import hash_block
from scoring.keys import block_key, pod_media_key, residency_key, residency_score
from scoring.weights import MediaPreference, TierWeights
from tests.index import MODEL

POD = "vllm-0.default"
TOKENS = tuple(range(16))
STD = hash_block(TOKENS)
KEY = block_key(MODEL, STD)


class _Stream:
    """Rank 0 of one vLLM pod, one batch per call, time moving one second per batch."""

    def __init__(self, applier: Applier) -> None:
        self.applier, self.seq = applier, 0

    def send(self, *events: object) -> dict[str, int]:
        batch = EventBatch(ts=0.0, events=list(events))  # type: ignore[arg-type]
        result = self.applier.apply_batch(
            POD, MODEL, "vllm", 0, self.seq, batch, now=100 + self.seq
        )
        self.seq += 1
        return result.counts


@pytest.fixture
def stream(applier: Applier) -> _Stream:
    """Rank 0 of one vLLM pod sending batches to the writer."""
    return _Stream(applier)


def test_a_block_offloaded_to_cpu_is_resident_in_both_and_valued_gpu(
    stream: _Stream, redis_client: redis.Redis
) -> None:
    stream.send(BlockStored(("7",), TOKENS, 16, "GPU"))
    stream.send(BlockStored(("7",), (), 0, "CPU"))

    assert redis_client.hget(KEY, POD) == "101|GPU"
    assert redis_client.zscore(residency_key(POD, "GPU"), str(STD)) == residency_score(100)
    assert redis_client.zscore(residency_key(POD, "CPU"), str(STD)) == residency_score(101)
    assert redis_client.smembers(pod_media_key(POD)) == {"GPU", "CPU"}


def test_removing_gpu_keeps_cpu_with_its_own_store_time(
    stream: _Stream, redis_client: redis.Redis
) -> None:
    stream.send(BlockStored(("7",), TOKENS, 16, "GPU"))
    stream.send(BlockStored(("7",), (), 0, "CPU"))
    stream.send(BlockStored(("7",), TOKENS, 16, "GPU"))  # a GPU hit refreshes the GPU copy

    stream.send(BlockRemoved(("7",), "GPU"))

    assert redis_client.hget(KEY, POD) == "101|CPU"
    assert redis_client.zscore(residency_key(POD, "GPU"), str(STD)) is None
    assert redis_client.smembers(pod_media_key(POD)) == {"CPU"}


def test_removing_cpu_keeps_the_gpu_value_untouched(
    stream: _Stream, redis_client: redis.Redis
) -> None:
    stream.send(BlockStored(("7",), TOKENS, 16, "GPU"))
    stream.send(BlockStored(("7",), (), 0, "CPU"))

    stream.send(BlockRemoved(("7",), "CPU"))

    assert redis_client.hget(KEY, POD) == "101|GPU"
    assert redis_client.zcard(residency_key(POD, "CPU")) == 0


def test_the_field_and_then_the_key_go_with_the_last_medium(
    stream: _Stream, redis_client: redis.Redis
) -> None:
    redis_client.hset(KEY, "other.ns", "5|GPU")
    stream.send(BlockStored(("7",), TOKENS, 16, "GPU"))
    stream.send(BlockStored(("7",), (), 0, "CPU"))

    stream.send(BlockRemoved(("7",), "GPU"), BlockRemoved(("7",), "CPU"))
    assert redis_client.hgetall(KEY) == {"other.ns": "5|GPU"}

    redis_client.hdel(KEY, "other.ns")
    stream.send(BlockStored(("7",), TOKENS, 16, "GPU"))
    stream.send(BlockRemoved(("7",), "GPU"))
    assert not redis_client.exists(KEY)


def test_the_best_medium_does_not_depend_on_arrival_order(
    stream: _Stream, redis_client: redis.Redis
) -> None:
    stream.send(BlockStored(("8",), TOKENS, 16, "CPU"))  # LMCache stores to CPU with tokens
    assert redis_client.hget(KEY, POD) == "100|CPU"

    stream.send(BlockStored(("7",), TOKENS, 16, "GPU"))
    assert redis_client.hget(KEY, POD) == "101|GPU"

    stream.send(BlockStored(("8",), TOKENS, 16, "CPU"))
    assert redis_client.hget(KEY, POD) == "102|GPU"


def test_the_preference_can_follow_tier_weights(redis_client: redis.Redis) -> None:
    """With kthena's weights an unlisted DISK weighs the 1.0 fallback: it scores above CPU."""
    preference = MediaPreference.from_tier_weights(TierWeights({"gpu": 1.0, "cpu": 0.8}))
    applier = Applier(redis_client, preference=lambda: preference)
    for seq, medium in enumerate(("CPU", "DISK")):
        batch = EventBatch(ts=0.0, events=[BlockStored((str(seq),), TOKENS, 16, medium)])
        applier.apply_batch(POD, MODEL, "vllm", 0, seq, batch, now=100)

    assert redis_client.hget(KEY, POD) == "100|DISK"


def test_a_removal_without_medium_removes_a_pre_medium_entry(
    stream: _Stream, redis_client: redis.Redis
) -> None:
    stream.send(BlockStored(("7",), TOKENS, 16, None))
    assert redis_client.hget(KEY, POD) == "100"

    counts = stream.send(BlockRemoved(("7",), None))

    assert counts["blocks_removed"] == 1
    assert not redis_client.exists(KEY)


def test_a_removal_without_medium_removes_the_primary_tier_only(
    stream: _Stream, redis_client: redis.Redis
) -> None:
    """Older engines evict GPU blocks without naming the medium; the offloaded copy stays."""
    stream.send(BlockStored(("7",), TOKENS, 16, "GPU"))
    stream.send(BlockStored(("7",), (), 0, "CPU"))

    stream.send(BlockRemoved(("7",), None))

    assert redis_client.hget(KEY, POD) == "101|CPU"
    assert redis_client.zcard(residency_key(POD, "GPU")) == 0


def test_a_removal_from_a_medium_not_held_changes_nothing(
    stream: _Stream, redis_client: redis.Redis
) -> None:
    stream.send(BlockStored(("7",), TOKENS, 16, "GPU"))

    counts = stream.send(BlockRemoved(("7",), "CPU"))

    assert counts["unknown_removals"] == 1
    assert redis_client.hget(KEY, POD) == "100|GPU"
