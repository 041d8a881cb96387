"""Removals of engine hashes the stream does not hold change nothing and are counted; the same
hash can be stored and removed again and again (vLLM, compatibility.md 4.2)."""

import redis

from kvadmin.index.events import BlockRemoved, BlockStored, EventBatch
from kvadmin.index.writer import Applier
from scoring.hashing import hash_block
from scoring.keys import block_key, engine_hash_key
from tests.index import MODEL

TOKENS = tuple(range(16))
KEY = block_key(MODEL, hash_block(TOKENS))


def test_an_unknown_removal_is_counted_and_changes_nothing(
    applier: Applier, redis_client: redis.Redis
) -> None:
    applier.apply_batch(
        "p.ns", MODEL, "vllm", 0, 0, EventBatch(0.0, [BlockStored(("1",), TOKENS, 16, "GPU")]), 100
    )

    result = applier.apply_batch(
        "p.ns", MODEL, "vllm", 1, 0, EventBatch(0.0, [BlockRemoved(("1", "2"), "GPU")]), 101
    )

    assert result.counts["unknown_removals"] == 2
    assert result.counts["blocks_removed"] == 0
    assert redis_client.hget(KEY, "p.ns") == "100|GPU"


def test_a_hash_can_be_stored_and_removed_repeatedly(
    applier: Applier, redis_client: redis.Redis
) -> None:
    for round_ in range(3):
        events = [BlockStored(("1",), TOKENS, 16, "GPU"), BlockRemoved(("1",), "GPU")]
        applier.apply_batch("p.ns", MODEL, "vllm", 0, round_, EventBatch(0.0, events), 100)
        assert not redis_client.exists(KEY)
        assert not redis_client.exists(engine_hash_key("vllm", "p.ns", "1"))

    applier.apply_batch(
        "p.ns", MODEL, "vllm", 0, 3, EventBatch(0.0, [BlockStored(("1",), TOKENS, 16, "GPU")]), 100
    )
    assert redis_client.hget(KEY, "p.ns") == "100|GPU"
