"""Engine KV-event batches, encoded byte for byte as vLLM and SGLang do (compatibility.md 4.2), for
the emulated publishers (`publisher.py`), the ingestion tests and the benchmarks.

Engines encode with msgspec; a msgspec struct encodes exactly like a list (array_like) or a dict
with its fields in declaration order, and `omit_defaults` leaves out default-valued map keys but
never array slots. So each encoding below is written as plain lists and dicts in the engine's
field order, and `tests/fleet/test_wire_encoding.py` checks the bytes against engine-shaped
structs.

Hashes go on the wire as the engine's native values: `int` (vLLM unsigned, possibly >= 2^63;
SGLang signed) or `bytes` (vLLM digests). kvadmin events carry hash TEXT; `wire_event` turns it
back with `events.engine_hash_value`.
"""

import time
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any

import msgspec

from kvadmin.index.events import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    Event,
    engine_hash_value,
)

NativeHash = int | bytes
WireEvent = list[Any] | dict[str, Any]
"""One event in an encoding's wire shape, ready for msgpack."""


class Encoding(StrEnum):
    """A publisher generation: the payload shape it sends and its replay frame layout."""

    VLLM_MAP = "vllm-map"
    """vLLM >= 0.26: `[ts, events, rank]`, events are tagged maps (`"type"`), default-valued
    optional fields left out; stores carry `extra_keys`, `group_idx`, `kv_cache_spec_kind`."""
    VLLM_ARRAY = "vllm-array"
    """vLLM <= 0.25: every event a positional array with every field up to
    `kv_cache_spec_sliding_window`, nulls included."""
    VLLM_LEGACY = "vllm-legacy"
    """The first KV-event releases: a 2-element batch, no medium, no rank."""
    SGLANG_ARRAY = "sglang-array"
    """SGLang until September 2026: positional events ending at medium; a salted store appends
    a `{"cache_salt": ...}` map."""
    SGLANG_MAP = "sglang-map"
    """SGLang since September 2026: tagged-map events, unset optional fields left out."""

    @property
    def engine(self) -> str:
        return self.value.partition("-")[0]

    @property
    def maps(self) -> bool:
        return self in (Encoding.VLLM_MAP, Encoding.SGLANG_MAP)

    @property
    def replay_topic_frame(self) -> bool:
        """Whether replay answers carry the topic frame (vLLM >= 0.26, SGLang >= 0.5.23)."""
        return self.maps


# Events -------------------------------------------------------------------------------------


def block_stored(
    encoding: Encoding,
    block_hashes: Sequence[NativeHash],
    token_ids: Sequence[int] = (),
    block_size: int = 16,
    *,
    parent_block_hash: NativeHash | None = None,
    medium: str | None = "GPU",
    lora_id: int | None = None,
    lora_name: str | None = None,
    cache_salt: str | None = None,
    session_id: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> WireEvent:
    """A `BlockStored` as `encoding` sends it. Fields the encoding has no slot for (medium in
    VLLM_LEGACY, cache_salt in vLLM, lora_name in SGLANG_ARRAY...) are not sent, as that engine
    would not. `extra` fields come last: keys in map encodings (a None value is left out, as
    `omit_defaults` does), appended values in array encodings."""
    hashes, tokens = list(block_hashes), list(token_ids)
    head = [hashes, parent_block_hash, tokens, block_size, lora_id]
    match encoding:
        case Encoding.VLLM_MAP:
            event = _tagged_map("BlockStored", _STORED_KEYS, [*head, medium, lora_name])
            optional = {
                "extra_keys": [None] * len(hashes),
                "group_idx": 0,
                "kv_cache_spec_kind": "full_attention",
                "session_id": session_id,
            }
            return _with_optional(event, optional, extra)
        case Encoding.VLLM_ARRAY:
            vllm_tail = [medium, lora_name, [None] * len(hashes), 0, "full_attention", None]
            return _tagged_row("BlockStored", [*head, *vllm_tail], extra)
        case Encoding.VLLM_LEGACY:
            return _tagged_row("BlockStored", head, extra)
        case Encoding.SGLANG_ARRAY:
            # SGLang appends its request metadata as a map only when some of it is set.
            metadata = _with_optional({}, {"cache_salt": cache_salt, "session_id": session_id})
            row = [*head, medium, metadata] if metadata else [*head, medium]
            return _tagged_row("BlockStored", row, extra)
        case Encoding.SGLANG_MAP:
            event = _tagged_map("BlockStored", _STORED_KEYS[:5], head)
            optional = {
                "medium": medium,
                "cache_salt": cache_salt,
                "session_id": session_id,
                "lora_name": lora_name,
            }
            return _with_optional(event, optional, extra)


def block_removed(
    encoding: Encoding,
    block_hashes: Sequence[NativeHash],
    *,
    medium: str | None = "GPU",
    extra: Mapping[str, Any] | None = None,
) -> WireEvent:
    """A `BlockRemoved` as `encoding` sends it (see `block_stored` for `extra`)."""
    hashes = list(block_hashes)
    match encoding:
        case Encoding.VLLM_MAP:
            event = _tagged_map("BlockRemoved", _REMOVED_KEYS, [hashes, medium])
            return _with_optional(event, {"group_idx": 0}, extra)
        case Encoding.VLLM_ARRAY:
            return _tagged_row("BlockRemoved", [hashes, medium, 0], extra)
        case Encoding.VLLM_LEGACY:
            return _tagged_row("BlockRemoved", [hashes], extra)
        case Encoding.SGLANG_ARRAY:
            return _tagged_row("BlockRemoved", [hashes, medium], extra)
        case Encoding.SGLANG_MAP:
            event = _tagged_map("BlockRemoved", _REMOVED_KEYS[:1], [hashes])
            return _with_optional(event, {"medium": medium}, extra)


def all_blocks_cleared(encoding: Encoding) -> WireEvent:
    return {"type": "AllBlocksCleared"} if encoding.maps else ["AllBlocksCleared"]


def wire_event(encoding: Encoding, event: Event) -> WireEvent:
    """A kvadmin event (hash text) back on the wire with the engine's native hash values."""
    match event:
        case BlockStored():
            parent = event.parent_block_hash
            return block_stored(
                encoding,
                [engine_hash_value(text) for text in event.block_hashes],
                event.token_ids,
                event.block_size,
                parent_block_hash=None if parent is None else engine_hash_value(parent),
                medium=event.medium,
                lora_name=event.lora_name,
            )
        case BlockRemoved():
            hashes = [engine_hash_value(text) for text in event.block_hashes]
            return block_removed(encoding, hashes, medium=event.medium)
        case AllBlocksCleared():
            return all_blocks_cleared(encoding)
    raise TypeError(f"not a KV event: {event!r}")


_ENCODER = msgspec.msgpack.Encoder()


def encode_batch(
    encoding: Encoding,
    events: Iterable[WireEvent | Event],
    *,
    ts: float | None = None,
    rank: int | None = 0,
) -> bytes:
    """The msgpack payload of one batch; kvadmin events are converted with `wire_event`."""
    shaped = [e if isinstance(e, list | dict) else wire_event(encoding, e) for e in events]
    when = time.time() if ts is None else float(ts)
    if encoding is Encoding.VLLM_LEGACY:
        return _ENCODER.encode([when, shaped])
    return _ENCODER.encode([when, shaped, rank])


_STORED_KEYS = (
    "block_hashes",
    "parent_block_hash",
    "token_ids",
    "block_size",
    "lora_id",
    "medium",
    "lora_name",
)
_REMOVED_KEYS = ("block_hashes", "medium")


def _tagged_map(tag: str, keys: Sequence[str], values: Sequence[Any]) -> dict[str, Any]:
    return {"type": tag, **dict(zip(keys, values, strict=True))}


def _with_optional(event: dict[str, Any], *optional: Mapping[str, Any] | None) -> dict[str, Any]:
    for fields in optional:
        for key, value in (fields or {}).items():
            if value is None:
                event.pop(key, None)
            else:
                event[key] = value
    return event


def _tagged_row(tag: str, values: list[Any], extra: Mapping[str, Any] | None) -> list[Any]:
    return [tag, *values, *(extra or {}).values()]
