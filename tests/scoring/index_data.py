"""Writing a block index into the test Redis, the way ingestion leaves it (compatibility.md 2.2,
2.7), in either value format."""

from collections.abc import Mapping

import pytest
import redis

from scoring.keys import block_key, pod_media_key, residency_key, residency_score
from scoring.values import ValueFormat, parse_value
from tests.index import MODEL

VALUE_FORMATS = [pytest.param(fmt, id=fmt.value) for fmt in ValueFormat]
"""Both value formats, for the kthena-format checks that must hold under each."""


def write_index(
    client: redis.Redis,
    index: Mapping[int, Mapping[str, str]],
    model: str = MODEL,
    value_format: ValueFormat = ValueFormat.TIERED,
) -> None:
    """`index`: block hash -> pod -> raw value text, as the tiered format writes it. Under the
    legacy format the matrix gets the timestamp alone and the medium goes to the pod's
    residency (its media SET and per-medium ZSET), as the writer keeps it in either format."""
    pipeline = client.pipeline(transaction=False)
    for block, owners in index.items():
        if not owners:
            continue
        if value_format is ValueFormat.TIERED:
            pipeline.hset(block_key(model, block), mapping=dict(owners))
            continue
        for pod, raw in owners.items():
            value = parse_value(raw)
            pipeline.hset(block_key(model, block), pod, value.timestamp)
            medium = value.medium or ""
            score = residency_score(value.seconds) if value.seconds is not None else 0
            pipeline.zadd(residency_key(pod, medium), {str(block): score})
            pipeline.sadd(pod_media_key(pod), medium)
    pipeline.execute()
