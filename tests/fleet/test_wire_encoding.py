"""The emulated payloads are byte for byte what each engine generation's msgspec structs encode,
and they decode back to the events they were made from."""

from typing import Any

import msgspec
import pytest

from kvadmin.fleet import wire
from kvadmin.fleet.wire import Encoding
from kvadmin.index.events import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    Event,
    engine_hash_text,
    engine_hash_value,
)
from kvadmin.ingest.decode import decode_batch

TS = 1789095808.8378847
TOKENS = list(range(151000, 151032))
HASHES: list[int | bytes] = [2**64 - 1, 7]
DIGEST = bytes(range(32))
Hash = int | bytes


# The engines' structs, field for field (vllm/distributed/kv_events.py and
# sglang/srt/disaggregation/kv_events.py of each generation).


class VllmBatch(msgspec.Struct, array_like=True, omit_defaults=True):
    ts: float
    events: list[Any]
    data_parallel_rank: int | None = None


class VllmMapEvent(msgspec.Struct, omit_defaults=True, tag=True):
    pass


class VllmMapStored(VllmMapEvent, tag="BlockStored"):
    block_hashes: list[Hash]
    parent_block_hash: Hash | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: list[tuple[Any, ...] | None] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None
    locality: str | None = None
    session_id: str | None = None


class VllmMapRemoved(VllmMapEvent, tag="BlockRemoved"):
    block_hashes: list[Hash]
    medium: str | None
    group_idx: int | None = None
    locality: str | None = None


class VllmMapCleared(VllmMapEvent, tag="AllBlocksCleared"):
    pass


class VllmRowEvent(msgspec.Struct, array_like=True, omit_defaults=True, tag=True):
    pass


class VllmRowStored(VllmRowEvent, tag="BlockStored"):
    block_hashes: list[Hash]
    parent_block_hash: Hash | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: list[tuple[Any, ...] | None] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None


class VllmRowRemoved(VllmRowEvent, tag="BlockRemoved"):
    block_hashes: list[Hash]
    medium: str | None
    group_idx: int | None = None


class VllmRowCleared(VllmRowEvent, tag="AllBlocksCleared"):
    pass


class LegacyBatch(msgspec.Struct, array_like=True, omit_defaults=True):
    ts: float
    events: list[Any]


class LegacyStored(VllmRowEvent, tag="BlockStored"):
    block_hashes: list[int]
    parent_block_hash: int | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None


class LegacyRemoved(VllmRowEvent, tag="BlockRemoved"):
    block_hashes: list[int]


class SglangBatch(msgspec.Struct, array_like=True):
    ts: float
    events: list[Any]
    attn_dp_rank: int | None = None


class SglangRowEvent(msgspec.Struct, array_like=True, tag=True):
    pass


class SglangRowStored(SglangRowEvent, tag="BlockStored"):
    block_hashes: list[int]
    parent_block_hash: int | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None = None


class SglangMetadata(msgspec.Struct, omit_defaults=True):
    cache_salt: str | None = None
    session_id: str | None = None


class SglangRowStoredWithMetadata(SglangRowStored, tag="BlockStored", kw_only=True):
    metadata: SglangMetadata


class SglangRowRemoved(SglangRowEvent, tag="BlockRemoved"):
    block_hashes: list[int]
    medium: str | None = None


class SglangRowCleared(SglangRowEvent, tag="AllBlocksCleared"):
    pass


class SglangMapEvent(msgspec.Struct, omit_defaults=True, tag=True):
    pass


class SglangMapStored(SglangMapEvent, tag="BlockStored"):
    block_hashes: list[int]
    parent_block_hash: int | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None = None
    cache_salt: str | None = None
    session_id: str | None = None
    lora_name: str | None = None


class SglangMapRemoved(SglangMapEvent, tag="BlockRemoved"):
    block_hashes: list[int]
    medium: str | None = None


class SglangMapCleared(SglangMapEvent, tag="AllBlocksCleared"):
    pass


def encoded(batch: msgspec.Struct) -> bytes:
    return msgspec.msgpack.encode(batch)


def test_vllm_map_era_bytes() -> None:
    events = [
        wire.block_stored(Encoding.VLLM_MAP, HASHES, TOKENS, parent_block_hash=DIGEST[:16]),
        wire.block_stored(Encoding.VLLM_MAP, [DIGEST], [], 0, medium="CPU", session_id="s"),
        wire.block_removed(Encoding.VLLM_MAP, [7], medium=None),
        wire.all_blocks_cleared(Encoding.VLLM_MAP),
    ]
    stored = dict(extra_keys=[None, None], group_idx=0, kv_cache_spec_kind="full_attention")
    engine = VllmBatch(
        TS,
        [
            VllmMapStored(HASHES, DIGEST[:16], TOKENS, 16, None, "GPU", None, **stored),
            VllmMapStored(
                [DIGEST],
                None,
                [],
                0,
                None,
                "CPU",
                None,
                extra_keys=[None],
                group_idx=0,
                kv_cache_spec_kind="full_attention",
                session_id="s",
            ),
            VllmMapRemoved([7], None, group_idx=0),
            VllmMapCleared(),
        ],
        0,
    )
    assert wire.encode_batch(Encoding.VLLM_MAP, events, ts=TS, rank=0) == encoded(engine)


def test_vllm_array_era_bytes() -> None:
    events = [
        wire.block_stored(Encoding.VLLM_ARRAY, HASHES, TOKENS, lora_id=3, lora_name="sql"),
        wire.block_removed(Encoding.VLLM_ARRAY, HASHES),
        wire.all_blocks_cleared(Encoding.VLLM_ARRAY),
    ]
    engine = VllmBatch(
        TS,
        [
            VllmRowStored(
                HASHES, None, TOKENS, 16, 3, "GPU", "sql", [None, None], 0, "full_attention"
            ),
            VllmRowRemoved(HASHES, "GPU", 0),
            VllmRowCleared(),
        ],
        2,
    )
    assert wire.encode_batch(Encoding.VLLM_ARRAY, events, ts=TS, rank=2) == encoded(engine)


def test_vllm_legacy_bytes_have_no_medium_and_no_rank() -> None:
    events = [
        wire.block_stored(Encoding.VLLM_LEGACY, [5], TOKENS[:16], medium="GPU"),
        wire.block_removed(Encoding.VLLM_LEGACY, [5], medium="GPU"),
    ]
    engine = LegacyBatch(TS, [LegacyStored([5], None, TOKENS[:16], 16, None), LegacyRemoved([5])])
    assert wire.encode_batch(Encoding.VLLM_LEGACY, events, ts=TS, rank=0) == encoded(engine)


def test_sglang_array_era_bytes_with_and_without_cache_salt() -> None:
    signed = [-(2**63), -1]
    events = [
        wire.block_stored(Encoding.SGLANG_ARRAY, signed, TOKENS, parent_block_hash=-5),
        wire.block_stored(Encoding.SGLANG_ARRAY, [-2], TOKENS[:16], cache_salt="tenant-a"),
        wire.block_removed(Encoding.SGLANG_ARRAY, signed, medium="CPU_PINNED"),
        wire.all_blocks_cleared(Encoding.SGLANG_ARRAY),
    ]
    engine = SglangBatch(
        TS,
        [
            SglangRowStored(signed, -5, TOKENS, 16, None, "GPU"),
            SglangRowStoredWithMetadata(
                [-2], None, TOKENS[:16], 16, None, "GPU", metadata=SglangMetadata("tenant-a")
            ),
            SglangRowRemoved(signed, "CPU_PINNED"),
            SglangRowCleared(),
        ],
        1,
    )
    assert wire.encode_batch(Encoding.SGLANG_ARRAY, events, ts=TS, rank=1) == encoded(engine)


def test_sglang_map_era_bytes() -> None:
    events = [
        wire.block_stored(Encoding.SGLANG_MAP, [-3], TOKENS[:16], cache_salt="t", session_id="s"),
        wire.block_stored(Encoding.SGLANG_MAP, [-4], TOKENS[:16], medium=None, lora_name="sql"),
        wire.block_removed(Encoding.SGLANG_MAP, [-3], medium="DISK"),
        wire.block_removed(Encoding.SGLANG_MAP, [-4], medium=None),
        wire.all_blocks_cleared(Encoding.SGLANG_MAP),
    ]
    engine = SglangBatch(
        TS,
        [
            SglangMapStored([-3], None, TOKENS[:16], 16, None, "GPU", "t", "s"),
            SglangMapStored([-4], None, TOKENS[:16], 16, None, lora_name="sql"),
            SglangMapRemoved([-3], "DISK"),
            SglangMapRemoved([-4]),
            SglangMapCleared(),
        ],
        0,
    )
    assert wire.encode_batch(Encoding.SGLANG_MAP, events, ts=TS, rank=0) == encoded(engine)


def test_extra_fields_are_keys_in_map_encodings_and_trailing_values_in_arrays() -> None:
    extra = {"locality": "REMOTE", "group_idx": None}
    as_map = wire.block_removed(Encoding.VLLM_MAP, [1], extra=extra)
    assert as_map == {
        "type": "BlockRemoved",
        "block_hashes": [1],
        "medium": "GPU",
        "locality": "REMOTE",
    }
    as_row = wire.block_removed(Encoding.SGLANG_ARRAY, [1], extra=extra)
    assert as_row == ["BlockRemoved", [1], "GPU", "REMOTE", None]


EVENTS: list[Event] = [
    BlockStored((str(2**64 - 1), "5"), tuple(TOKENS), 16, "GPU", "-9", "sql"),
    BlockStored((DIGEST.hex(),), (), 0, "CPU"),
    BlockRemoved(("5",), "GPU"),
    AllBlocksCleared(),
]


@pytest.mark.parametrize("encoding", list(Encoding))
def test_kvadmin_events_go_out_with_native_hashes_and_decode_back(encoding: Encoding) -> None:
    batch = decode_batch(wire.encode_batch(encoding, EVENTS, ts=TS, rank=4))
    assert batch.ts == TS and batch.skipped == {}
    assert batch.rank == (None if encoding is Encoding.VLLM_LEGACY else 4)
    carries_medium = encoding is not Encoding.VLLM_LEGACY
    carries_lora = encoding in (Encoding.VLLM_MAP, Encoding.VLLM_ARRAY, Encoding.SGLANG_MAP)
    stored, placeholder, removed, cleared = batch.events
    assert stored == BlockStored(
        (str(2**64 - 1), "5"),
        tuple(TOKENS),
        16,
        "GPU" if carries_medium else None,
        "-9",
        "sql" if carries_lora else None,
    )
    assert placeholder.block_hashes == (DIGEST.hex(),) and not placeholder.token_ids
    assert removed == BlockRemoved(("5",), "GPU" if carries_medium else None)
    assert cleared == AllBlocksCleared()


def test_wire_values_are_native_ints_and_bytes() -> None:
    event = wire.wire_event(Encoding.VLLM_MAP, EVENTS[0])
    assert isinstance(event, dict)
    assert event["block_hashes"] == [2**64 - 1, 5] and event["parent_block_hash"] == -9
    placeholder = wire.wire_event(Encoding.VLLM_ARRAY, EVENTS[1])
    assert placeholder[1] == [DIGEST]


@pytest.mark.parametrize("value", [0, 2**64 - 1, -(2**63), bytes(16), DIGEST])
def test_engine_hash_value_inverts_engine_hash_text(value: int | bytes) -> None:
    assert engine_hash_value(engine_hash_text(value)) == value


def test_encodings_name_their_engine_and_replay_layout() -> None:
    assert [e.engine for e in Encoding] == ["vllm", "vllm", "vllm", "sglang", "sglang"]
    assert {e for e in Encoding if e.replay_topic_frame} == {Encoding.VLLM_MAP, Encoding.SGLANG_MAP}
