"""Event formats moving upstream decode without breaking (compatibility.md 4.2): SGLang's
`BlockRemoved` of many hashes, vLLM's `STORAGE` medium, fields and event types this kvadmin does
not know yet. Payloads are built as the engines' msgspec structs encode them."""

import msgspec
import redis

from kvadmin.index.events import UNKNOWN_TAGS_MAX, BlockRemoved, BlockStored
from kvadmin.index.writer import Applier
from kvadmin.ingest.decode import decode_batch
from scoring.keys import residency_key
from scoring.weights import TierWeights
from tests.index import MODEL

encode = msgspec.msgpack.encode
TOKENS = list(range(64 * 16))
HASHES = [-(10**15) - n for n in range(64)]  # SGLang: signed 64-bit


def test_sglang_removes_a_radix_node_of_many_blocks_in_one_event(redis_client: redis.Redis) -> None:
    """SGLang batches one `BlockRemoved` per radix node: every hash of it goes."""
    stored = ["BlockStored", HASHES, None, TOKENS, 16, None]
    removed = ["BlockRemoved", HASHES]
    applier = Applier(redis_client)
    for seq, event in enumerate((stored, removed)):
        batch = decode_batch(encode([1.0, [event], 0]))
        assert not batch.skipped
        applier.apply_batch("sglang-0.ns", MODEL, "sglang", 0, seq, batch, now=100)
        if seq == 0:
            assert redis_client.zcard(residency_key("sglang-0.ns", "")) == 64
    assert batch.events == [BlockRemoved(tuple(str(h) for h in HASHES), None)]
    assert not redis_client.exists(residency_key("sglang-0.ns", ""))


def test_vllm_storage_medium_and_extra_fields_apply() -> None:
    """vLLM's later file-system medium, with the fields later builds and forks add."""
    events = [
        {
            "type": "BlockStored",
            "block_hashes": [7],
            "parent_block_hash": None,
            "token_ids": TOKENS[:16],
            "block_size": 16,
            "lora_id": None,
            "medium": "STORAGE",
            "lora_name": None,
            "extra_keys": [None],
            "group_idx": 0,
            "kv_cache_spec_kind": "full",
            "origin": "local",
            "session_id": "s-1",
        },
        {
            "type": "BlockRemoved",
            "block_hashes": [7],
            "medium": "GPU",
            "group_idx": 0,
            "remaining_copy_counts": [1],
            "snapshot_version": 0,
        },
    ]
    batch = decode_batch(encode({"ts": 1.0, "events": events, "data_parallel_rank": 0}))
    assert batch.events == [
        BlockStored(("7",), tuple(TOKENS[:16]), 16, "STORAGE"),
        BlockRemoved(("7",), "GPU"),
    ]
    assert not batch.skipped
    assert TierWeights().weight_for("STORAGE") == 1.0  # kthena: the fallback
    assert TierWeights({"storage": 0.4}).weight_for("STORAGE") == 0.4


def test_positional_events_with_trailing_extras_apply() -> None:
    stored = ["BlockStored", [7], None, TOKENS[:16], 16, None, "GPU", None, [None], 0, "x"]
    removed = ["BlockRemoved", [7], "GPU", 0, [0], "x"]
    batch = decode_batch(encode([1.0, [stored, removed], 0]))
    assert [type(e) for e in batch.events] == [BlockStored, BlockRemoved]
    assert not batch.skipped


def test_unknown_event_types_are_skipped_and_named_in_either_encoding() -> None:
    known = {"type": "BlockRemoved", "block_hashes": [7], "medium": "GPU"}
    maps = [{"type": "BlockInactive", "block_hashes": [7]}, known, {"type": "TierBlocksCleared"}]
    rows = [["BlockInactive", [7]], ["BlockRemoved", [7], "GPU"], ["BlockInactive", [8]]]
    by_map = decode_batch(encode({"ts": 1.0, "events": maps}))
    by_row = decode_batch(encode([1.0, rows, 0]))

    assert by_map.events == by_row.events == [BlockRemoved(("7",), "GPU")]
    assert by_map.unknown_tags == {"BlockInactive": 1, "TierBlocksCleared": 1}
    assert by_row.unknown_tags == {"BlockInactive": 2}
    assert by_row.skipped == {"unknown_tag": 2}


def test_a_batch_names_a_bounded_number_of_well_formed_tags() -> None:
    tags = [f"Future{n}" for n in range(UNKNOWN_TAGS_MAX + 5)]
    tags += ["x" * 49, "Not a name", "Bad\u202eTag", ""]
    batch = decode_batch(encode([1.0, [[tag] for tag in tags], 0]))
    assert batch.skipped == {"unknown_tag": len(tags)}
    assert batch.unknown_tags == {f"Future{n}": 1 for n in range(UNKNOWN_TAGS_MAX)}
