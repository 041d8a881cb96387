"""Plain event objects: what the decoder produces and the applier consumes (compatibility.md 4.2).

Events are frozen msgspec Structs rather than dataclasses: the decoder makes one per event on
the ingest hot path, and a Struct is several times cheaper to build.

Engine hashes are kept as their key text (see `engine_hash_text`), opaque ids in the engine's
own namespace: never mixed with standardized hashes.
"""

from dataclasses import dataclass, field

import msgspec


def engine_hash_text(value: int | bytes) -> str:
    """The text of an engine hash inside Redis keys: decimal for integers (signed SGLang,
    unsigned vLLM), lower-case hex for raw digest bytes."""
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def engine_hash_value(text: str) -> int | bytes:
    """The engine's own value back from its key text (inverse of `engine_hash_text`), for
    whoever must put it on the wire again. Digest hex (32 or 64 characters) cannot be mistaken
    for a decimal 64-bit integer, which has at most 20 digits and a sign."""
    if len(text) in (32, 64):
        return bytes.fromhex(text)
    return int(text)


class BlockStored(msgspec.Struct, frozen=True, gc=False):
    block_hashes: tuple[str, ...]
    token_ids: tuple[int, ...] = ()
    """Empty for a placeholder: vLLM's offloading connector re-announces known blocks in a new
    tier without their tokens."""
    block_size: int = 0
    medium: str | None = None
    parent_block_hash: str | None = None
    lora_name: str | None = None


class BlockRemoved(msgspec.Struct, frozen=True, gc=False):
    block_hashes: tuple[str, ...]
    medium: str | None = None


class AllBlocksCleared(msgspec.Struct, frozen=True, gc=False):
    pass


Event = BlockStored | BlockRemoved | AllBlocksCleared

UNKNOWN_TAGS_MAX = 16
"""Distinct unknown event tags a batch names, and a stream's status keeps (the first ones)."""


@dataclass(slots=True)
class EventBatch:
    """One published batch. `ts` is the engine's publish time (unix seconds), 0 when unknown.
    `skipped` counts events dropped while decoding, by reason (e.g. "unknown_tag",
    "bad_hash", "malformed"); the rest of the batch still applies. `unknown_tags` itemizes the
    "unknown_tag" ones by tag, bounded by `UNKNOWN_TAGS_MAX`. `digest` identifies the payload
    it was read from ("" when unknown): the apply script keeps it with the stream's last seq,
    in the same write, so a later reader can tell whether the engine's replay of that seq is
    the batch applied."""

    ts: float
    events: list[Event]
    rank: int | None = None
    skipped: dict[str, int] = field(default_factory=dict)
    unknown_tags: dict[str, int] = field(default_factory=dict)
    digest: str = ""
