"""Untrusted batches are bounded: nesting, events per batch, hashes and token ids per event,
the shape of media and LoRA names. Beyond a batch limit the batch is undecodable; beyond an
event limit that event alone is skipped, counted by its reason."""

import msgspec
import pytest
from django.test import override_settings

from kvadmin.ingest.decode import UndecodableBatch, decode_batch

TS = 1.5


def _pack(*events: object, rank: int | None = 0) -> bytes:
    return msgspec.msgpack.encode([TS, list(events), rank])


def _stored(hashes: int = 1, tokens: int = 16, medium: object = "GPU", **fields) -> dict:
    return {
        "type": "BlockStored",
        "block_hashes": list(range(1, hashes + 1)),
        "token_ids": list(range(tokens)),
        "block_size": 16,
        "medium": medium,
        **fields,
    }


def _nested(depth: int) -> bytes:
    return b"\x91" * depth + b"\x01"


@pytest.mark.parametrize("depth", [100_000, 20_000])
def test_a_batch_nested_past_the_decoder_is_undecodable_not_a_recursion_error(depth) -> None:
    for payload in (
        _nested(depth),  # the whole payload
        b"\x93\xcb" + msgspec.msgpack.encode(TS)[1:] + b"\x90" + _nested(depth),  # in the rank
        b"\x92\xcb" + msgspec.msgpack.encode(TS)[1:] + b"\x91\x82\xa4type\xb0AllBlocksCleared"
        b"\xa1x" + _nested(depth),  # in an unknown field of an event
    ):
        with pytest.raises(UndecodableBatch, match="nested deeper"):
            decode_batch(payload)


@override_settings(KVADMIN={"INGEST_MAX_DEPTH": 8})
def test_the_careful_path_refuses_nesting_beyond_the_limit() -> None:
    """An unknown tag sends the batch down the careful path, which builds every value."""

    def row(extra: object) -> list:
        return ["BlockStored", [1], None, [], 0, None, "GPU", None, extra]

    deep = [[[[[[[[1]]]]]]]]  # 8 deep, inside an event inside the batch: 11
    with pytest.raises(UndecodableBatch, match="nested deeper than 8"):
        decode_batch(_pack(row(deep), ["Odd"]))
    assert len(decode_batch(_pack(row([[1]]), ["Odd"])).events) == 1


@override_settings(KVADMIN={"INGEST_MAX_EVENTS": 3})
def test_more_events_than_the_limit_make_the_batch_undecodable() -> None:
    clear = {"type": "AllBlocksCleared"}
    assert len(decode_batch(_pack(clear, clear, clear)).events) == 3
    with pytest.raises(UndecodableBatch, match="4 events; the limit is 3"):
        decode_batch(_pack(clear, clear, clear, clear))
    with pytest.raises(UndecodableBatch, match="4 events"):  # the careful path too
        decode_batch(_pack(clear, clear, clear, ["Odd"]))


@override_settings(KVADMIN={"INGEST_MAX_HASHES": 4, "INGEST_MAX_TOKENS": 64})
def test_an_event_beyond_the_hash_or_token_limits_is_skipped_alone() -> None:
    batch = decode_batch(
        _pack(
            _stored(hashes=5, tokens=16),
            _stored(hashes=4, tokens=65),
            {"type": "BlockRemoved", "block_hashes": [1, 2, 3, 4, 5]},
            _stored(hashes=4, tokens=64),
        )
    )
    assert len(batch.events) == 1
    assert batch.skipped == {"too_many_hashes": 2, "too_many_tokens": 1}


@pytest.mark.parametrize(
    "medium",
    [
        "gpu",
        "",
        "GPU\n",
        "CPU-PINNED",
        "A" * 33,
        "X" * (2 * 1024 * 1024),
        "GPU|CPU",
        "ÉCRAN",
        "1GPU",
    ],
)
def test_a_medium_outside_the_engines_vocabulary_skips_that_event_only(medium) -> None:
    for event in (
        _stored(medium=medium),
        {"type": "BlockRemoved", "block_hashes": [1], "medium": medium},
    ):
        batch = decode_batch(_pack(event, _stored(medium="CPU_PINNED")))
        assert [e.medium for e in batch.events] == ["CPU_PINNED"]
        assert batch.skipped == {"bad_medium": 1}


@pytest.mark.parametrize(
    "medium", ["GPU", "CPU", "CPU_PINNED", "CPU_TIER1", "SHARED_STORAGE", "A" * 32]
)
def test_the_engines_media_are_accepted(medium) -> None:
    assert decode_batch(_pack(_stored(medium=medium))).events[0].medium == medium


@pytest.mark.parametrize("name", ["x" * 257, "sql\nadapter", "a\x00b", "tab\there"])
def test_a_lora_name_too_long_or_with_control_characters_skips_the_event(name) -> None:
    batch = decode_batch(_pack(_stored(lora_name=name), _stored(lora_name="sql-adapter")))
    assert [e.lora_name for e in batch.events] == ["sql-adapter"]
    assert batch.skipped == {"bad_lora_name": 1}


@pytest.mark.parametrize("ts", [float("inf"), float("-inf"), float("nan")])
def test_a_batch_ts_that_is_not_finite_is_undecodable(ts) -> None:
    with pytest.raises(UndecodableBatch, match="finite"):
        decode_batch(msgspec.msgpack.encode([ts, [], 0]))
