"""One bad or unknown event is skipped and counted; the rest of its batch survives (compatibility.md
5.1)."""

from typing import Any

import msgspec
import pytest

from kvadmin.index.events import AllBlocksCleared, BlockRemoved, BlockStored
from kvadmin.ingest.decode import BAD_HASH, MALFORMED, UNKNOWN_TAG, decode_batch

TS = 1700000000.5
GOOD_STORE = ["BlockStored", [11], None, list(range(16)), 16, None, "GPU"]
GOOD_REMOVE = {"type": "BlockRemoved", "block_hashes": [11], "medium": "GPU"}


def pack(value: Any) -> bytes:
    return msgspec.msgpack.encode(value)


def between_good_events(bad: Any) -> tuple[list[Any], dict[str, int]]:
    """Decode a batch with `bad` in the middle: the good neighbours must come through."""
    batch = decode_batch(pack([TS, [GOOD_STORE, bad, GOOD_REMOVE], 0]))
    assert batch.events == [
        BlockStored(("11",), tuple(range(16)), 16, "GPU"),
        BlockRemoved(("11",), "GPU"),
    ]
    return batch.events, batch.skipped


@pytest.mark.parametrize(
    "event",
    [
        ["BlockInactive", [11], "GPU"],
        {"type": "BlockInactive", "block_hashes": [11]},
        ["blockstored", [11]],
        {"type": "", "block_hashes": [11]},
    ],
    ids=["array", "map", "wrong-case", "empty-tag"],
)
def test_an_unknown_tag_skips_only_that_event(event: Any) -> None:
    assert between_good_events(event)[1] == {UNKNOWN_TAG: 1}


@pytest.mark.parametrize(
    "bad_hash",
    [1.5, "123", [1], True, None, {"h": 1}, b"12345678", bytes(20), bytes(33), b""],
    ids=[
        "float",
        "str",
        "nested-list",
        "bool",
        "nil",
        "map",
        "8-bytes",
        "20-bytes",
        "33-bytes",
        "empty-bytes",
    ],
)
def test_a_hash_of_an_unexpected_type_skips_only_that_event(bad_hash: Any) -> None:
    stored = ["BlockStored", [12, bad_hash], None, list(range(32)), 16, None, "GPU"]
    assert between_good_events(stored)[1] == {BAD_HASH: 1}
    removed = {"type": "BlockRemoved", "block_hashes": [bad_hash], "medium": "GPU"}
    assert between_good_events(removed)[1] == {BAD_HASH: 1}


@pytest.mark.parametrize("bad_parent", [1.5, "9", b"short", True, [9]])
def test_a_bad_parent_hash_is_a_bad_hash(bad_parent: Any) -> None:
    stored = {"type": "BlockStored", "block_hashes": [12], "parent_block_hash": bad_parent}
    assert between_good_events(stored)[1] == {BAD_HASH: 1}


@pytest.mark.parametrize(
    "event",
    [
        5,
        "BlockStored",
        None,
        b"BlockStored",
        [],
        [1, [11]],
        [None],
        {"block_hashes": [11]},
        {"type": 3, "block_hashes": [11]},
        ["BlockStored"],
        ["BlockStored", 11],
        {"type": "BlockStored", "block_hashes": None},
        ["BlockRemoved", "11"],
        ["BlockStored", [11], None, "tokens"],
        ["BlockStored", [11], None, [1, "2"]],
        ["BlockStored", [11], None, [1, 2.0]],
        ["BlockStored", [11], None, [1, True]],
        ["BlockStored", [11], None, [-1]],
        ["BlockStored", [11], None, [2**32]],
        ["BlockStored", [11], None, [1], -16],
        ["BlockStored", [11], None, [1], "16"],
        ["BlockStored", [11], None, [1], 16.0],
        ["BlockStored", [11], None, [1], 16, None, 7],
        {"type": "BlockRemoved", "block_hashes": [11], "medium": ["GPU"]},
    ],
    ids=[
        "int",
        "str",
        "nil",
        "bytes",
        "empty-array",
        "non-string-tag",
        "nil-tag",
        "map-without-type",
        "map-with-int-type",
        "store-without-hashes",
        "hashes-not-an-array",
        "nil-hashes",
        "removed-hashes-not-an-array",
        "tokens-not-an-array",
        "string-token",
        "float-token",
        "bool-token",
        "negative-token",
        "token-over-4-bytes",
        "negative-block-size",
        "string-block-size",
        "float-block-size",
        "int-medium",
        "array-medium",
    ],
)
def test_a_malformed_event_skips_only_that_event(event: Any) -> None:
    assert between_good_events(event)[1] == {MALFORMED: 1}


def test_skips_are_counted_by_reason() -> None:
    events = [
        ["Future", 1],
        GOOD_STORE,
        {"type": "Future"},
        ["BlockRemoved", [1.5]],
        [],
        ["AllBlocksCleared"],
    ]
    batch = decode_batch(pack([TS, events, 0]))
    assert batch.skipped == {UNKNOWN_TAG: 2, BAD_HASH: 1, MALFORMED: 1}
    assert [type(e) for e in batch.events] == [BlockStored, AllBlocksCleared]


def test_a_batch_of_only_bad_events_still_decodes() -> None:
    batch = decode_batch(pack({"ts": TS, "events": [["Nope"], 3], "attn_dp_rank": 1}))
    assert (batch.events, batch.rank, batch.skipped) == ([], 1, {UNKNOWN_TAG: 1, MALFORMED: 1})


def test_a_clean_batch_counts_nothing() -> None:
    assert decode_batch(pack([TS, [GOOD_STORE, GOOD_REMOVE], 0])).skipped == {}
