"""Writing a block index into the test Redis, the way ingestion leaves it (compatibility.md 2.2)."""

from collections.abc import Mapping

import redis

from scoring.keys import block_key

MODEL = "Qwen/Qwen3-8B"


def write_index(
    client: redis.Redis, index: Mapping[int, Mapping[str, str]], model: str = MODEL
) -> None:
    """`index`: block hash -> pod -> raw value text."""
    pipeline = client.pipeline(transaction=False)
    for block, owners in index.items():
        if owners:
            pipeline.hset(block_key(model, block), mapping=dict(owners))
    pipeline.execute()
