"""The decoder's two paths (see kvadmin/ingest/decode.py): what engines really send takes the
fast typed path, and both paths agree on every payload."""

from typing import Any

import msgspec
import pytest

from kvadmin.fleet import wire
from kvadmin.index.events import BlockStored
from kvadmin.ingest import decode

TOKENS = list(range(500, 564))


def engine_batch(encoding: wire.Encoding) -> bytes:
    """A realistic batch: stores of 1-4 blocks, a placeholder, a removal, a clear."""
    return wire.encode_batch(
        encoding,
        [
            wire.block_stored(encoding, [2**64 - 5], TOKENS[:16], parent_block_hash=-7),
            wire.block_stored(encoding, [1, -2, 3, 2**63], TOKENS, cache_salt="tenant"),
            wire.block_stored(encoding, [1], [], 0, medium="CPU"),
            wire.block_removed(encoding, [bytes(32)]),
            wire.all_blocks_cleared(encoding),
        ],
        ts=1.25,
        rank=1,
    )


@pytest.mark.parametrize("encoding", list(wire.Encoding))
def test_every_engine_encoding_takes_the_fast_path(
    encoding: wire.Encoding, monkeypatch: pytest.MonkeyPatch
) -> None:
    def careful_path_used(payload: bytes) -> None:
        raise AssertionError(f"{encoding} fell back to the careful path")

    monkeypatch.setattr(decode, "_decode_loose", careful_path_used)
    batch = decode.decode_batch(engine_batch(encoding))
    assert len(batch.events) == 5 and batch.skipped == {}


def test_map_batches_take_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decode, "_decode_loose", None)
    events = [{"type": "BlockStored", "block_hashes": [1], "token_ids": TOKENS[:16]}]
    payload = msgspec.msgpack.encode({"ts": 1.0, "events": events, "data_parallel_rank": 0})
    assert decode.decode_batch(payload).events == [BlockStored(("1",), tuple(TOKENS[:16]))]


def test_a_batch_with_a_wrong_length_digest_stays_on_the_fast_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """msgspec types a digest as bytes; its length is checked per event, without falling back."""
    monkeypatch.setattr(decode, "_decode_loose", None)
    payload = msgspec.msgpack.encode([1.0, [["BlockRemoved", [b"short"]], ["AllBlocksCleared"]]])
    assert decode.decode_batch(payload).skipped == {decode.BAD_HASH: 1}


CORPUS: list[Any] = [
    *(msgspec.msgpack.decode(engine_batch(encoding)) for encoding in wire.Encoding),
    [1.0, []],
    [7, [["BlockStored", [1], None, [1, 2], 16]], None, "extra"],
    [1.0, [{"type": "BlockStored", "block_hashes": [1], "lora_name": {"x": 1}}], 0],
    [1.0, [["BlockStored", [1], 2, [3], 4, 5, "GPU", {"cache_salt": "s"}, "more"]], 0],
    [1.0, [["BlockStored", [b"x" * 16], b"y" * 32, [], 0, None, None, "lora"]], 0],
    [1.0, [["BlockRemoved", [b"short"]], ["BlockRemoved", [-1], None, 0]], 2],
    [1.0, [["BlockStored", [1.5]], ["Unknown"], ["AllBlocksCleared"]], 0],
    [1.0, [{"type": "BlockStored", "block_hashes": [1]}, ["BlockRemoved", [1]]], 0],
    {"ts": 1.0, "events": [{"type": "AllBlocksCleared"}], "attn_dp_rank": 3},
    {"ts": 1.0, "events": [["BlockRemoved", [1], "GPU"]], "data_parallel_rank": None},
    {"ts": 1.0, "events": [], "data_parallel_rank": 1, "attn_dp_rank": 2},
]


@pytest.mark.parametrize("batch", CORPUS)
def test_the_fast_path_agrees_with_the_careful_definition(batch: Any) -> None:
    payload = msgspec.msgpack.encode(batch)
    assert decode.decode_batch(payload) == decode._decode_loose(payload)
