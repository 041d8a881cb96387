"""A payload that is no batch at all raises one clear error: `UndecodableBatch`."""

from typing import Any

import msgspec
import pytest

from kvadmin.ingest.decode import UndecodableBatch, decode_batch

VALID = msgspec.msgpack.encode([1.5, [["AllBlocksCleared"]], 0])


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"", "empty payload"),
        (b"\xc1", "not msgpack"),
        (b"\xdd\xff\xff", "not msgpack"),
        (VALID[:-3], "not msgpack"),
        (VALID + b"\x00", "not msgpack"),
        (b'{"ts": 1.5, "events": []}', "not msgpack"),
    ],
    ids=["empty", "reserved-byte", "truncated-header", "truncated", "trailing-bytes", "json"],
)
def test_bytes_that_are_not_msgpack_are_undecodable(payload: bytes, message: str) -> None:
    with pytest.raises(UndecodableBatch, match=message):
        decode_batch(payload)


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        (5, "array or map, not int"),
        ("batch", "array or map, not str"),
        (None, "array or map, not NoneType"),
        (b"\x93", "array or map, not bytes"),
        ([], r"\[ts, events, rank\?\], got 0"),
        ([1.5], r"\[ts, events, rank\?\], got 1"),
        (["1.5", []], "ts must be a number, not str"),
        ([True, []], "ts must be a number, not bool"),
        ([None, []], "ts must be a number, not NoneType"),
        ([1.5, {"type": "AllBlocksCleared"}], "events must be an array, not dict"),
        ([1.5, None], "events must be an array, not NoneType"),
        ([1.5, [], "0"], "rank must be an integer or nil, not str"),
        ([1.5, [], 0.0], "rank must be an integer or nil, not float"),
        ({"ts": 1.5}, "needs 'ts' and 'events'"),
        ({"events": []}, "needs 'ts' and 'events'"),
        ({"ts": "now", "events": []}, "ts must be a number"),
        ({"ts": 1.5, "events": [], "data_parallel_rank": "1"}, "rank must be an integer"),
    ],
)
def test_msgpack_of_the_wrong_shape_is_undecodable(batch: Any, message: str) -> None:
    with pytest.raises(UndecodableBatch, match=message):
        decode_batch(msgspec.msgpack.encode(batch))


def test_undecodable_is_a_value_error_so_callers_may_catch_either() -> None:
    assert issubclass(UndecodableBatch, ValueError)


def test_any_bytes_like_payload_decodes() -> None:
    """Consumers may hand over a zero-copy frame buffer instead of bytes."""
    assert decode_batch(memoryview(VALID)) == decode_batch(bytearray(VALID))
