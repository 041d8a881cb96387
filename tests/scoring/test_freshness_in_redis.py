"""The Lua walk judges freshness exactly like Go's ParseInt comparison, at every edge: signs,
leading zeros, timestamps beyond 2**53 (where doubles round) and beyond int64 (no parse)."""

import pytest
import redis

from scoring.index import BaselineIndexReader, IndexReader
from scoring.values import ValueFormat
from tests.index import MODEL, VALUE_FORMATS, write_kthena_index

CASES = [
    # (timestamp text, pod start, kept)
    ("1001", 1000, True),
    ("1000", 1000, False),
    ("0001000", 1000, False),
    ("+1001", 1000, True),
    ("-4", -4, False),
    ("-0004", -4, False),
    ("-3", -4, True),
    ("-5", -4, False),
    ("-0", 0, False),
    ("+0", -1, True),
    ("1234567890123456", 1234567890123455, True),
    ("1234567890123456", 1234567890123456, False),
    ("9007199254740993", 2**53, True),
    ("9007199254740992", 2**53, False),
    ("9007199254740993", 2**53 + 1, False),
    ("9223372036854775807", 2**63 - 1, False),
    ("-9223372036854775808", -(2**63), False),
    ("9223372036854775808", 0, True),
    ("-9223372036854775809", 10, True),
    ("99999999999999999999", 10**20, True),
    ("5", -(10**20), True),
    ("5", 10**20, False),
    ("", 5, True),
    (" 5", 10, True),
    ("1e3", 10, True),
]


@pytest.mark.parametrize("value_format", VALUE_FORMATS)
@pytest.mark.parametrize(("timestamp", "started_at", "kept"), CASES)
def test_both_readers_judge_freshness_alike(
    redis_client: redis.Redis,
    timestamp: str,
    started_at: int,
    kept: bool,
    value_format: ValueFormat,
) -> None:
    index = {1: {"p": f"{timestamp}|GPU"}, 2: {"p": f"{timestamp}|GPU"}}
    write_kthena_index(redis_client, index, value_format=value_format)
    started = {"p": started_at}
    for reader in (BaselineIndexReader(), IndexReader()):
        for blocks in ([1], [2, 1]):  # judged as the first block, and further on
            walk = reader.walk(
                redis_client, MODEL, blocks, None, started, value_format=value_format
            )
            assert bool(walk.runs) is kept, (type(reader).__name__, blocks)
            assert bool(walk.dropped_stale) is not kept
