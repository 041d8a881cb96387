"""Tokens that do not pair with the hashes (vLLM hybrid models skip blocks, compatibility.md 4.2):
no crash, counted, and only hashes the index already knows are updated."""

import redis

from kvadmin.index.events import BlockStored, EventBatch
from kvadmin.index.writer import Applier
from scoring.hashing import hash_block
from scoring.keys import block_key, stream_status_key
from tests.index import MODEL

TOKENS = tuple(range(16))
STD = hash_block(TOKENS)


def test_mismatched_tokens_update_known_hashes_only(
    applier: Applier, redis_client: redis.Redis
) -> None:
    applier.apply_batch(
        "p.ns", MODEL, "vllm", 0, 0, EventBatch(0.0, [BlockStored(("1",), TOKENS, 16, "GPU")]), 100
    )
    skipping = BlockStored(("1", "2", "3"), tuple(range(40)), 16, "CPU")

    result = applier.apply_batch("p.ns", MODEL, "vllm", 0, 1, EventBatch(0.0, [skipping]), 101)

    assert result.counts["token_mismatch"] == 1
    assert result.counts["blocks_stored"] == 1
    assert result.counts["unresolved_placeholders"] == 2
    assert redis_client.hget(block_key(MODEL, STD), "p.ns") == "101|GPU"
    assert redis_client.hget(stream_status_key("p.ns", 0), "token_mismatch") == "1"
    assert not redis_client.exists(block_key(MODEL, hash_block(range(16, 32))))


def test_tokens_without_a_block_size_do_not_pair(
    applier: Applier, redis_client: redis.Redis
) -> None:
    result = applier.apply_batch(
        "p.ns", MODEL, "vllm", 0, 0, EventBatch(0.0, [BlockStored(("1",), TOKENS, 0, "GPU")]), 100
    )

    assert result.counts["token_mismatch"] == 1
    assert not redis_client.keys("matrix:*")
