"""Offload placeholder stores (compatibility.md 4.2, 5.5): no tokens, the engine hashes of blocks
stored earlier; they add the new medium to the blocks they name."""

import redis

from kvadmin.index.events import BlockRemoved, BlockStored, EventBatch
from kvadmin.index.writer import Applier
from scoring.hashing import hash_block
from scoring.keys import (
    block_key,
    residency_key,
    residency_score,
    stream_status_key,
)
from tests.engine_blocks import stream_blocks
from tests.index import MODEL

POD = "p.ns"
TOKENS = tuple(range(32))
FIRST, SECOND = hash_block(TOKENS[:16]), hash_block(TOKENS[16:])


def _send(applier: Applier, rank: int, seq: int, *events: BlockStored) -> dict[str, int]:
    batch = EventBatch(ts=0.0, events=list(events))
    return applier.apply_batch(POD, MODEL, "vllm", rank, seq, batch, now=100 + seq).counts


def test_a_placeholder_adds_cpu_to_blocks_stored_with_tokens(
    applier: Applier, redis_client: redis.Redis
) -> None:
    _send(applier, 0, 0, BlockStored(("1", "2"), TOKENS, 16, "GPU"))

    counts = _send(applier, 0, 1, BlockStored(("1", "2"), (), 0, "CPU"))

    assert counts["blocks_stored"] == 2
    assert counts.get("token_mismatch", 0) == 0
    assert set(redis_client.zrange(residency_key(POD, "CPU"), 0, -1)) == {str(FIRST), str(SECOND)}
    assert stream_blocks(redis_client, POD, 0) == {
        "1": f"{FIRST}|GPU,CPU",
        "2": f"{SECOND}|GPU,CPU",
    }


def test_an_unresolvable_placeholder_is_counted_and_writes_nothing(
    applier: Applier, redis_client: redis.Redis
) -> None:
    counts = _send(applier, 0, 0, BlockStored(("404",), (), 0, "CPU"))

    assert counts["unresolved_placeholders"] == 1
    assert counts["blocks_stored"] == 0
    assert redis_client.hget(stream_status_key(POD, 0), "unresolved_placeholders") == "1"
    assert not redis_client.exists(residency_key(POD, "CPU"))


def test_a_placeholder_resolves_through_another_ranks_mapping(
    applier: Applier, redis_client: redis.Redis
) -> None:
    """Rank 1 missed its own store; the engine hash names the same content on every rank."""
    _send(applier, 0, 0, BlockStored(("1",), TOKENS[:16], 16, "GPU"))

    counts = _send(applier, 1, 0, BlockStored(("1",), (), 0, "CPU"))

    assert counts["blocks_stored"] == 1
    assert stream_blocks(redis_client, POD, 1) == {"1": f"{FIRST}|CPU"}
    assert redis_client.hget(block_key(MODEL, FIRST), POD) == "100|GPU"
    assert redis_client.zscore(residency_key(POD, "CPU"), str(FIRST)) == residency_score(100)


def test_a_placeholder_after_the_block_was_dropped_does_not_resurrect_it(
    applier: Applier, redis_client: redis.Redis
) -> None:
    _send(applier, 0, 0, BlockStored(("1",), TOKENS[:16], 16, "GPU"))
    applier.apply_batch(
        POD, MODEL, "vllm", 0, 1, EventBatch(ts=0.0, events=[BlockRemoved(("1",), "GPU")]), now=101
    )

    counts = _send(applier, 0, 2, BlockStored(("1",), (), 0, "CPU"))

    assert counts["unresolved_placeholders"] == 1
    assert not redis_client.exists(block_key(MODEL, FIRST))
