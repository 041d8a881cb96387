"""Reference counting (compatibility.md 5.6): a pod keeps a block while any (rank, engine hash) pair
holds it, whether two engine hashes share content or two DP ranks hold the same block."""

import pytest
import redis

from kvadmin.index.events import BlockRemoved, BlockStored, Event, EventBatch
from kvadmin.index.writer import Applier
from scoring.hashing import hash_block
from scoring.keys import (
    block_key,
    refcount_key,
    residency_key,
    residency_score,
)
from tests.engine_blocks import stream_blocks
from tests.index import MODEL

POD = "p.ns"
TOKENS = tuple(range(16))
STD = hash_block(TOKENS)
KEY = block_key(MODEL, STD)


class _Pod:
    """One pod's streams, each with its own seq counter."""

    def __init__(self, applier: Applier) -> None:
        self.applier, self.seqs = applier, {0: 0, 1: 0}

    def send(self, rank: int, *events: Event) -> dict[str, int]:
        seq = self.seqs[rank]
        self.seqs[rank] += 1
        batch = EventBatch(ts=0.0, events=list(events))
        return self.applier.apply_batch(POD, MODEL, "vllm", rank, seq, batch, now=100).counts


@pytest.fixture
def pod(applier: Applier) -> _Pod:
    """A two-rank pod sending its streams' batches to the writer."""
    return _Pod(applier)


def test_two_engine_hashes_with_the_same_content_keep_the_block_until_both_go(
    pod: _Pod, redis_client: redis.Redis
) -> None:
    """The same 16 tokens under two prefixes: two engine hashes, one standardized hash."""
    pod.send(0, BlockStored(("1",), TOKENS, 16, "GPU"), BlockStored(("2",), TOKENS, 16, "GPU"))
    assert redis_client.hget(refcount_key(POD), f"{STD}|GPU") == "2"

    pod.send(0, BlockRemoved(("1",), "GPU"))
    assert redis_client.hget(KEY, POD) == "100|GPU"

    pod.send(0, BlockRemoved(("2",), "GPU"))
    assert not redis_client.exists(KEY)
    assert not redis_client.exists(refcount_key(POD))


def test_a_second_holder_counts_within_the_batch_that_adds_it(
    pod: _Pod, redis_client: redis.Redis
) -> None:
    """The script looks the refcounts up once per call (here at the release of block 3): a
    count it creates afterwards must count at once."""
    other = tuple(range(16, 32))
    pod.send(0, BlockStored(("1",), TOKENS, 16, "GPU"), BlockStored(("3",), other, 16, "GPU"))
    pod.send(
        0,
        BlockRemoved(("3",), "GPU"),
        BlockStored(("2",), TOKENS, 16, "GPU"),
        BlockRemoved(("1",), "GPU"),
    )

    assert redis_client.hget(KEY, POD) == "100|GPU"
    assert redis_client.zscore(residency_key(POD, "GPU"), str(STD)) == residency_score(100)


def test_two_ranks_holding_a_block_keep_it_until_both_remove_it(
    pod: _Pod, redis_client: redis.Redis
) -> None:
    pod.send(0, BlockStored(("1",), TOKENS, 16, "GPU"))
    pod.send(1, BlockStored(("1",), TOKENS, 16, "GPU"))

    pod.send(0, BlockRemoved(("1",), "GPU"))
    assert redis_client.hget(KEY, POD) == "100|GPU"
    assert redis_client.zscore(residency_key(POD, "GPU"), str(STD)) == residency_score(100)

    pod.send(1, BlockRemoved(("1",), "GPU"))
    assert not redis_client.exists(KEY)
    assert not redis_client.exists(residency_key(POD, "GPU"))


def test_storing_a_held_block_again_does_not_count_twice(
    pod: _Pod, redis_client: redis.Redis
) -> None:
    pod.send(0, BlockStored(("1",), TOKENS, 16, "GPU"))
    pod.send(0, BlockStored(("1",), TOKENS, 16, "GPU"))
    assert not redis_client.exists(refcount_key(POD))  # one holder: the residency alone

    pod.send(0, BlockRemoved(("1",), "GPU"))
    assert not redis_client.exists(KEY)


def test_a_known_engine_hash_with_new_content_replaces_the_old_block(
    pod: _Pod, redis_client: redis.Redis
) -> None:
    other = tuple(range(100, 116))
    pod.send(0, BlockStored(("1",), TOKENS, 16, "GPU"))

    counts = pod.send(0, BlockStored(("1",), other, 16, "GPU"))

    assert counts["std_conflicts"] == 1
    assert not redis_client.exists(KEY)
    assert redis_client.hget(block_key(MODEL, hash_block(other)), POD) == "100|GPU"
    assert stream_blocks(redis_client, POD, 0) == {"1": f"{hash_block(other)}|GPU"}
