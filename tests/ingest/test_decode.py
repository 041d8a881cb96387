"""Every engine's batch and event encodings decode to the same kvadmin events (compatibility.md
4.2).

Payloads are written out literally, as the engines' msgspec structs put them on the wire, so a
mistake in the wire emulator cannot hide a mistake here.
"""

import json
from typing import Any

import msgspec
import pytest

from kvadmin.index.events import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    EventBatch,
    engine_hash_text,
)
from kvadmin.ingest.decode import decode_batch
from tests.conftest import CONFORMANCE

TOKENS = list(range(100, 132))  # two blocks of 16
TS = 1789095808.8378847


def pack(value: Any) -> bytes:
    return msgspec.msgpack.encode(value)


def only_event(payload: bytes) -> Any:
    batch = decode_batch(payload)
    assert batch.skipped == {}
    assert len(batch.events) == 1
    return batch.events[0]


# Batches ------------------------------------------------------------------------------------


def test_it_decodes_a_three_element_batch_with_its_rank() -> None:
    batch = decode_batch(pack([TS, [["AllBlocksCleared"]], 3]))
    assert batch == EventBatch(ts=TS, events=[AllBlocksCleared()], rank=3)


def test_it_decodes_a_very_old_two_element_batch_without_rank() -> None:
    batch = decode_batch(pack([TS, [["AllBlocksCleared"]]]))
    assert batch == EventBatch(ts=TS, events=[AllBlocksCleared()], rank=None)


def test_a_nil_rank_is_no_rank() -> None:
    assert decode_batch(pack([TS, [], None])).rank is None


@pytest.mark.parametrize("rank_key", ["data_parallel_rank", "attn_dp_rank"])
def test_it_decodes_a_map_batch_with_either_rank_key(rank_key: str) -> None:
    payload = pack({"ts": TS, "events": [{"type": "AllBlocksCleared"}], rank_key: 2})
    assert decode_batch(payload) == EventBatch(ts=TS, events=[AllBlocksCleared()], rank=2)


def test_a_map_batch_without_rank_and_with_unknown_keys_decodes() -> None:
    payload = pack({"future": [1, 2], "events": [], "ts": TS})
    assert decode_batch(payload) == EventBatch(ts=TS, events=[], rank=None)


def test_extra_trailing_batch_elements_are_ignored() -> None:
    assert decode_batch(pack([TS, [], 1, "future", {"x": 1}])).rank == 1


def test_an_integer_ts_is_taken_as_seconds() -> None:
    batch = decode_batch(pack([1789095808, []]))
    assert batch.ts == 1789095808.0 and isinstance(batch.ts, float)


def test_an_array_batch_of_map_events_decodes() -> None:
    """vLLM >= 0.26 and SGLang's map era keep the positional batch around map events."""
    events = [{"type": "BlockRemoved", "block_hashes": [7], "medium": "GPU"}, ["AllBlocksCleared"]]
    batch = decode_batch(pack([TS, events, 0]))
    assert batch.events == [BlockRemoved(("7",), "GPU"), AllBlocksCleared()]


# vLLM ---------------------------------------------------------------------------------------


def test_it_decodes_a_store_captured_from_vllm_0_26() -> None:
    """The realistic store of the conformance file, in the shape vLLM 0.26 sends it: a map
    event with extra_keys, group_idx and kv_cache_spec_kind, which kvadmin ignores."""
    real = json.loads(CONFORMANCE.read_text())["realistic_vllm_store"]
    event = {
        "type": "BlockStored",
        "block_hashes": [real["engine_hash"]],
        "parent_block_hash": None,
        "token_ids": real["token_ids"],
        "block_size": 16,
        "lora_id": None,
        "medium": "GPU",
        "lora_name": None,
        "extra_keys": [None],
        "group_idx": 0,
        "kv_cache_spec_kind": "full_attention",
    }
    assert only_event(pack([TS, [event], 0])) == BlockStored(
        block_hashes=(str(real["engine_hash"]),),
        token_ids=tuple(real["token_ids"]),
        block_size=16,
        medium="GPU",
    )


def test_it_decodes_vllm_array_era_stores_of_every_length() -> None:
    """Fields were appended release after release; missing trailing ones are nil."""
    head = ["BlockStored", [1, 2], 9, TOKENS, 16, None]
    expected = BlockStored(("1", "2"), tuple(TOKENS), 16, None, "9")
    assert only_event(pack([TS, [head]])) == expected
    with_medium = [*head, "GPU"]
    assert only_event(pack([TS, [with_medium], 0])).medium == "GPU"
    with_lora = [*with_medium, "sql-adapter"]
    assert only_event(pack([TS, [with_lora], 0])).lora_name == "sql-adapter"
    last_array_era = [*with_lora, [None, None], 0, "full_attention", None]
    assert only_event(pack([TS, [last_array_era], 0])) == BlockStored(
        ("1", "2"), tuple(TOKENS), 16, "GPU", "9", "sql-adapter"
    )


def test_it_decodes_vllm_removals_with_and_without_medium() -> None:
    assert only_event(pack([TS, [["BlockRemoved", [5]]]])) == BlockRemoved(("5",), None)
    removed = ["BlockRemoved", [5, 6], "CPU", 0]
    assert only_event(pack([TS, [removed], 0])) == BlockRemoved(("5", "6"), "CPU")
    as_map = {"type": "BlockRemoved", "block_hashes": [5], "medium": "GPU", "group_idx": 0}
    assert only_event(pack([TS, [as_map], 0])) == BlockRemoved(("5",), "GPU")


def test_it_keeps_offload_placeholder_stores() -> None:
    """vLLM's CPU offloading connector re-announces known engine hashes without tokens."""
    placeholder = {
        "type": "BlockStored",
        "block_hashes": [2**64 - 1],
        "parent_block_hash": None,
        "token_ids": [],
        "block_size": 0,
        "lora_id": None,
        "medium": "CPU",
        "lora_name": None,
    }
    event = only_event(pack([TS, [placeholder], 0]))
    assert event == BlockStored((str(2**64 - 1),), (), 0, "CPU")
    assert not event.token_ids  # a placeholder


# SGLang -------------------------------------------------------------------------------------


def test_it_decodes_sglang_array_era_signed_hashes() -> None:
    stored = ["BlockStored", [-(2**63), -1], 2**63 - 1, TOKENS, 16, None, "CPU_PINNED"]
    assert only_event(pack([TS, [stored], 1])) == BlockStored(
        (str(-(2**63)), "-1"), tuple(TOKENS), 16, "CPU_PINNED", str(2**63 - 1)
    )


def test_sglangs_trailing_cache_salt_map_is_ignored() -> None:
    """It sits in the slot where vLLM puts lora_name: it must not become one."""
    stored = ["BlockStored", [-4], None, TOKENS[:16], 16, None, "GPU", {"cache_salt": "tenant-a"}]
    assert only_event(pack([TS, [stored], 0])) == BlockStored(
        ("-4",), tuple(TOKENS[:16]), 16, "GPU"
    )


def test_it_decodes_sglang_map_era_events() -> None:
    stored = {
        "type": "BlockStored",
        "block_hashes": [-4],
        "parent_block_hash": -3,
        "token_ids": TOKENS[:16],
        "block_size": 16,
        "lora_id": None,
        "medium": "DISK",
        "cache_salt": "tenant-a",
        "session_id": "s-1",
    }
    removed = {"type": "BlockRemoved", "block_hashes": [-4]}
    batch = decode_batch(pack([TS, [stored, removed], 0]))
    assert batch.events == [
        BlockStored(("-4",), tuple(TOKENS[:16]), 16, "DISK", "-3"),
        BlockRemoved(("-4",), None),
    ]


# Fields -------------------------------------------------------------------------------------


def test_unknown_map_keys_are_ignored_wherever_they_are() -> None:
    stored = {
        "zz_future": {"nested": [1.5, "x"]},
        "block_hashes": [1],
        "type": "BlockStored",
        "locality": "REMOTE",
        "medium": "GPU",
    }
    assert only_event(pack([TS, [stored], 0])) == BlockStored(("1",), (), 0, "GPU")


def test_fields_with_defaults_may_be_absent() -> None:
    minimal_map = {"type": "BlockStored", "block_hashes": [1]}
    minimal_row = ["BlockStored", [1]]
    expected = BlockStored(("1",))
    assert only_event(pack([TS, [minimal_map], 0])) == expected
    assert only_event(pack([TS, [minimal_row], 0])) == expected


def test_extra_trailing_event_elements_are_ignored() -> None:
    stored = ["BlockStored", [1], None, [], 0, None, "GPU", None, [None], 0, "x", None, 1, 2, 3]
    assert only_event(pack([TS, [stored], 0])) == BlockStored(("1",), (), 0, "GPU")
    assert only_event(pack([TS, [["AllBlocksCleared", 1, {"a": 2}]], 0])) == AllBlocksCleared()
    cleared_map = {"type": "AllBlocksCleared", "reason": "reset"}
    assert only_event(pack([TS, [cleared_map], 0])) == AllBlocksCleared()


def test_a_non_string_lora_name_is_no_lora_name() -> None:
    stored = {"type": "BlockStored", "block_hashes": [1], "lora_name": 7}
    assert only_event(pack([TS, [stored], 0])).lora_name is None


@pytest.mark.parametrize(
    "value",
    [0, 1, 2**63 - 1, 2**63, 2**64 - 1, -1, -(2**63), bytes(range(16)), bytes(range(32))],
    ids=["zero", "one", "i64-max", "2^63", "u64-max", "minus-one", "i64-min", "16B", "32B"],
)
def test_every_engine_hash_keeps_its_key_text(value: int | bytes) -> None:
    """Unsigned vLLM ints >= 2^63, signed SGLang ints and raw digests stay distinct ids."""
    payload = pack([TS, [["BlockStored", [value], value], ["BlockRemoved", [value]]], 0])
    stored, removed = decode_batch(payload).events
    assert stored.block_hashes == (engine_hash_text(value),)
    assert stored.parent_block_hash == engine_hash_text(value)
    assert removed.block_hashes == (engine_hash_text(value),)


def test_digest_hashes_become_lower_case_hex() -> None:
    digest = bytes.fromhex("ABCDEF" + "00" * 29)
    event = only_event(pack([TS, [["BlockRemoved", [digest]]], 0]))
    assert event.block_hashes == ("abcdef" + "00" * 29,)


def test_tokens_that_do_not_match_the_block_count_are_kept_as_sent() -> None:
    """vLLM hybrid models skip blocks; deciding what that means is the applier's job."""
    short = ["BlockStored", [1, 2, 3], None, TOKENS[:20], 16, None, "GPU"]
    event = only_event(pack([TS, [short], 0]))
    assert event.block_hashes == ("1", "2", "3")
    assert event.token_ids == tuple(TOKENS[:20])


def test_tokens_up_to_the_largest_4_byte_id_are_accepted() -> None:
    stored = ["BlockStored", [1], None, [0, 2**32 - 1], 2]
    assert only_event(pack([TS, [stored], 0])).token_ids == (0, 2**32 - 1)


def test_events_keep_their_order() -> None:
    events = [
        ["BlockStored", [1], None, TOKENS[:16], 16, None, "GPU"],
        ["BlockRemoved", [1], "GPU"],
        ["AllBlocksCleared"],
        ["BlockStored", [2], None, [], 0, None, "CPU"],
    ]
    assert [type(e) for e in decode_batch(pack([TS, events, 0])).events] == [
        BlockStored,
        BlockRemoved,
        AllBlocksCleared,
        BlockStored,
    ]
