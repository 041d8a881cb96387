"""The benchmark's kthena baseline writes the same router-facing format and has kthena's
defects: placeholders dropped, any removal drops the pod's ownership."""

import redis

from bench.baseline import KthenaBaseline
from kvadmin.index.events import AllBlocksCleared, BlockRemoved, BlockStored, EventBatch
from scoring.hashing import hash_block
from scoring.keys import block_key, engine_hash_key
from tests.index import MODEL

TOKENS = tuple(range(16))
KEY = block_key(MODEL, hash_block(TOKENS))


def test_the_baseline_writes_kthena_keys_and_drops_placeholders(redis_client: redis.Redis) -> None:
    baseline = KthenaBaseline(redis_client)
    events = [BlockStored(("1",), TOKENS, 16, "GPU"), BlockStored(("1",), (), 0, "CPU")]

    baseline.apply_batch("p.ns", MODEL, "vllm", EventBatch(0.0, events), now=100)

    assert redis_client.hgetall(KEY) == {"p.ns": "100|GPU"}
    assert redis_client.ttl(engine_hash_key("vllm", "p.ns", "1")) > 86000


def test_the_baseline_forgets_the_block_on_any_removal(redis_client: redis.Redis) -> None:
    baseline = KthenaBaseline(redis_client)
    baseline.apply_batch(
        "p.ns", MODEL, "vllm", EventBatch(0.0, [BlockStored(("1",), TOKENS, 16, "GPU")]), 100
    )

    baseline.apply_batch("p.ns", MODEL, "vllm", EventBatch(0.0, [BlockRemoved(("1",), "CPU")]), 101)

    assert not redis_client.exists(KEY)


def test_the_baseline_clears_by_scanning(redis_client: redis.Redis) -> None:
    baseline = KthenaBaseline(redis_client)
    baseline.apply_batch(
        "p.ns", MODEL, "vllm", EventBatch(0.0, [BlockStored(("1",), TOKENS, 16, "GPU")]), 100
    )

    baseline.apply_batch("p.ns", MODEL, "vllm", EventBatch(0.0, [AllBlocksCleared()]), 101)

    assert redis_client.keys("*") == []
