"""Bytes from an engine's KV-event stream -> plain event objects (SPEC 4.1, 4.2).

Pure: no sockets, no Redis. One payload gives one `EventBatch`; one bad or unknown event is
skipped and counted in `batch.skipped`, never the whole batch (SPEC 5.1).

Two paths give the same result; the second one is the definition:
1. Fast: msgspec decodes the whole payload into typed structs in C, including the type and
   range checks of hashes and token ids. The typed shapes are those engines send, picked from
   the leading bytes: an array batch of array events (vLLM <= 0.25, SGLang before its map
   era), an array batch of map events (vLLM >= 0.26, SGLang's map era) or a map batch (vLLM
   development builds of mid-2026).
2. Careful: when msgspec rejects anything typed (an unknown tag, a hash of the wrong type, a
   future field of another type, a malformed batch), the payload is decoded loosely and each
   event is judged on its own by plain type checks. This costs one exception per odd batch
   and none per event.
"""

from collections.abc import Sequence
from typing import Annotated, Any, NamedTuple

import msgspec

from kvadmin.ingest.events import AllBlocksCleared, BlockRemoved, BlockStored, Event, EventBatch

UNKNOWN_TAG = "unknown_tag"
BAD_HASH = "bad_hash"
MALFORMED = "malformed"

SEQ_BYTES = 8
END_OF_REPLAY = b"\xff" * SEQ_BYTES
"""The seq frame of the replay answer's end marker (its payload frame is empty)."""

_DIGEST_SIZES = (16, 32)
_MAX_TOKEN = 0xFFFFFFFF  # standardized hashing writes each token as 4-byte unsigned (SPEC 2.1)


class UndecodableBatch(ValueError):
    """The payload is not a KV-event batch at all: not msgpack, or not [ts, events, rank?]."""


class BadFrames(ValueError):
    """A ZMQ message does not have the frame layout of a KV-event stream."""


class PublishedBatch(NamedTuple):
    """One message of the stream: `topic` is None for replay layouts that carry none."""

    topic: bytes | None
    seq: int
    batch: EventBatch


def decode_batch(payload: bytes) -> EventBatch:
    """Decode one msgpack batch payload; raises `UndecodableBatch` when it is not a batch."""
    if not payload:
        raise UndecodableBatch("empty payload")
    typed = _typed_decoder(payload)
    if typed is not None:
        try:
            shaped = typed.decode(payload)
        except msgspec.ValidationError:
            pass  # valid msgpack, unusual content: the careful path judges each event
        except msgspec.DecodeError as exc:
            raise UndecodableBatch(f"not msgpack: {exc}") from None
        else:
            return _from_typed(shaped)
    return _decode_loose(payload)


def undecodable_batch() -> EventBatch:
    """What an undecodable payload applies as: no events, one `undecodable` skip and no
    publish time (0), so its seq still counts as applied and the skip is counted."""
    return EventBatch(ts=0.0, events=[], skipped={"undecodable": 1})


def decode_frames(frames: Sequence[bytes]) -> PublishedBatch:
    """Decode one PUB message `[topic, seq(8 bytes big-endian), payload]`."""
    topic, seq, payload = split_frames(frames)
    return PublishedBatch(topic, seq, decode_batch(payload))


def split_frames(frames: Sequence[bytes]) -> tuple[bytes, int, bytes]:
    """Check one PUB message's frames and read its seq, leaving the payload undecoded: a
    consumer tracking seq needs the seq even of a batch it then cannot decode."""
    if len(frames) != 3:
        raise BadFrames(f"a published message is [topic, seq, payload], not {len(frames)} frames")
    topic, seq_frame, payload = frames
    return bytes(topic), _seq(seq_frame), payload


def decode_replay_frames(frames: Sequence[bytes]) -> PublishedBatch | None:
    """Decode one message a DEALER receives from a replay socket; None for the end marker.

    Both layouts exist: `[b"", seq, payload]` (vLLM <= 0.25, older SGLang) and
    `[b"", topic, seq, payload]` (vLLM >= 0.26, SGLang 0.5.23 and later).
    """
    if len(frames) == 3:
        delimiter, seq_frame, payload = frames
        topic = None
    elif len(frames) == 4:
        delimiter, topic_frame, seq_frame, payload = frames
        topic = bytes(topic_frame)
    else:
        raise BadFrames(
            f"a replay message has 3 or 4 frames ([b'', topic?, seq, payload]), not {len(frames)}"
        )
    if len(delimiter):
        raise BadFrames("a replay message starts with an empty delimiter frame")
    if bytes(seq_frame) == END_OF_REPLAY:
        return None
    return PublishedBatch(topic, _seq(seq_frame), decode_batch(payload))


def _seq(frame: bytes) -> int:
    if len(frame) != SEQ_BYTES:
        raise BadFrames(f"the seq frame has {SEQ_BYTES} bytes, not {len(frame)}")
    return int.from_bytes(frame, "big")


# The fast path ------------------------------------------------------------------------------

_Hash = int | bytes
_Token = Annotated[int, msgspec.Meta(ge=0, le=_MAX_TOKEN)]
_Size = Annotated[int, msgspec.Meta(ge=0)]


class _StoredRow(msgspec.Struct, array_like=True, tag="BlockStored", gc=False):
    block_hashes: list[_Hash]
    parent_block_hash: _Hash | None = None
    token_ids: tuple[_Token, ...] | None = None
    block_size: _Size | None = None
    lora_id: Any = None
    medium: str | None = None
    lora_name: Any = None  # SGLang's {"cache_salt": ...} map sits in this slot


class _RemovedRow(msgspec.Struct, array_like=True, tag="BlockRemoved", gc=False):
    block_hashes: list[_Hash]
    medium: str | None = None


class _ClearedRow(msgspec.Struct, array_like=True, tag="AllBlocksCleared", gc=False):
    pass


class _StoredMap(msgspec.Struct, tag="BlockStored", tag_field="type", gc=False):
    block_hashes: list[_Hash]
    parent_block_hash: _Hash | None = None
    token_ids: tuple[_Token, ...] | None = None
    block_size: _Size | None = None
    medium: str | None = None
    lora_name: Any = None


class _RemovedMap(msgspec.Struct, tag="BlockRemoved", tag_field="type", gc=False):
    block_hashes: list[_Hash]
    medium: str | None = None


class _ClearedMap(msgspec.Struct, tag="AllBlocksCleared", tag_field="type", gc=False):
    pass


class _RowBatch(msgspec.Struct, array_like=True, gc=False):
    ts: float
    events: list[_StoredRow | _RemovedRow | _ClearedRow]
    rank: int | None = None


class _RowBatchOfMaps(msgspec.Struct, array_like=True, gc=False):
    ts: float
    events: list[_StoredMap | _RemovedMap | _ClearedMap]
    rank: int | None = None


class _MapBatch(msgspec.Struct, gc=False):
    ts: float
    events: list[_StoredMap | _RemovedMap | _ClearedMap]
    data_parallel_rank: int | None = None
    attn_dp_rank: int | None = None


_ROWS = msgspec.msgpack.Decoder(_RowBatch)
_ROWS_OF_MAPS = msgspec.msgpack.Decoder(_RowBatchOfMaps)
_MAPS = msgspec.msgpack.Decoder(_MapBatch)
_STORED = (_StoredRow, _StoredMap)
_REMOVED = (_RemovedRow, _RemovedMap)


def _typed_decoder(payload: bytes) -> msgspec.msgpack.Decoder | None:
    """Pick the typed shape from the leading msgpack bytes; None when no typed shape fits."""
    lead = payload[0]
    if 0x80 <= lead <= 0x8F or lead in (0xDE, 0xDF):
        return _MAPS
    if 0x90 <= lead <= 0x9F or lead in (0xDC, 0xDD):
        return _ROWS_OF_MAPS if _first_event_is_map(payload) else _ROWS
    return None


def _first_event_is_map(payload: bytes) -> bool:
    """Peek past `[` and ts at the first event of an array batch; False when unsure."""
    try:
        at = _skip_array_header(payload, 0)
        at = _skip_number(payload, at)
        at = _skip_array_header(payload, at)
        lead = payload[at]
    except (IndexError, ValueError):
        return False
    return 0x80 <= lead <= 0x8F or lead in (0xDE, 0xDF)


def _skip_array_header(payload: bytes, at: int) -> int:
    lead = payload[at]
    if 0x90 <= lead <= 0x9F:
        return at + 1
    if lead == 0xDC:
        return at + 3
    if lead == 0xDD:
        return at + 5
    raise ValueError("not an array")


_NUMBER_SIZES = {0xCA: 5, 0xCB: 9, 0xCC: 2, 0xCD: 3, 0xCE: 5, 0xCF: 9}
_NUMBER_SIZES |= {0xD0: 2, 0xD1: 3, 0xD2: 5, 0xD3: 9}


def _skip_number(payload: bytes, at: int) -> int:
    lead = payload[at]
    if lead <= 0x7F or lead >= 0xE0:
        return at + 1
    if lead in _NUMBER_SIZES:
        return at + _NUMBER_SIZES[lead]
    raise ValueError("not a number")


def _from_typed(shaped: _RowBatch | _RowBatchOfMaps | _MapBatch) -> EventBatch:
    if type(shaped) is _MapBatch:
        rank = shaped.data_parallel_rank
        if rank is None:
            rank = shaped.attn_dp_rank
    else:
        rank = shaped.rank
    batch = EventBatch(shaped.ts, [], rank)
    events = batch.events
    for raw in shaped.events:
        if isinstance(raw, _STORED):
            event = _stored(
                raw.block_hashes,
                raw.parent_block_hash,
                raw.token_ids or (),
                raw.block_size or 0,
                raw.medium,
                raw.lora_name,
            )
        elif isinstance(raw, _REMOVED):
            event = _removed(raw.block_hashes, raw.medium)
        else:
            event = AllBlocksCleared()
        if type(event) is str:
            _skip(batch, event)
        else:
            events.append(event)
    return batch


# The careful path ---------------------------------------------------------------------------

_LOOSE = msgspec.msgpack.Decoder()


def _decode_loose(payload: bytes) -> EventBatch:
    """Decode without a schema and judge every event alone: the definition of the result."""
    try:
        shaped = _LOOSE.decode(payload)
    except msgspec.DecodeError as exc:
        raise UndecodableBatch(f"not msgpack: {exc}") from None
    if type(shaped) is list:
        if len(shaped) < 2:
            raise UndecodableBatch(
                f"a batch array is [ts, events, rank?], got {len(shaped)} element(s)"
            )
        ts, raw_events = shaped[0], shaped[1]
        rank = shaped[2] if len(shaped) > 2 else None
    elif type(shaped) is dict:
        if "ts" not in shaped or "events" not in shaped:
            raise UndecodableBatch(f"a batch map needs 'ts' and 'events', got {sorted(shaped)!r}")
        ts, raw_events = shaped["ts"], shaped["events"]
        rank = shaped.get("data_parallel_rank")
        if rank is None:
            rank = shaped.get("attn_dp_rank")
    else:
        raise UndecodableBatch(f"a batch is a msgpack array or map, not {type(shaped).__name__}")
    if type(ts) not in (int, float):
        raise UndecodableBatch(f"batch ts must be a number, not {type(ts).__name__}")
    if type(raw_events) is not list:
        raise UndecodableBatch(f"batch events must be an array, not {type(raw_events).__name__}")
    if rank is not None and type(rank) is not int:
        raise UndecodableBatch(f"batch rank must be an integer or nil, not {type(rank).__name__}")
    batch = EventBatch(ts=float(ts), events=[], rank=rank)
    for raw in raw_events:
        event = _loose_event(raw)
        if type(event) is str:
            _skip(batch, event)
        else:
            batch.events.append(event)
    return batch


def _loose_event(raw: object) -> Event | str:
    """One event in either encoding, or the reason it is skipped."""
    if type(raw) is list:
        if not raw or type(raw[0]) is not str:
            return MALFORMED
        tag = raw[0]
        row = raw + [None] * (8 - len(raw))  # missing trailing elements are nil
        if tag == "BlockStored":
            return _loose_stored(row[1], row[2], row[3], row[4], row[6], row[7])
        if tag == "BlockRemoved":
            return _loose_removed(row[1], row[2])
    elif type(raw) is dict:
        tag = raw.get("type")
        if type(tag) is not str:
            return MALFORMED
        if tag == "BlockStored":
            return _loose_stored(
                raw.get("block_hashes"),
                raw.get("parent_block_hash"),
                raw.get("token_ids"),
                raw.get("block_size"),
                raw.get("medium"),
                raw.get("lora_name"),
            )
        if tag == "BlockRemoved":
            return _loose_removed(raw.get("block_hashes"), raw.get("medium"))
    else:
        return MALFORMED
    if tag == "AllBlocksCleared":
        return AllBlocksCleared()
    return UNKNOWN_TAG


def _loose_stored(
    hashes: Any, parent: Any, tokens: Any, block_size: Any, medium: Any, lora_name: Any
) -> BlockStored | str:
    if type(hashes) is not list:
        return MALFORMED
    if tokens is None:
        tokens = ()
    elif type(tokens) is not list or not all(
        type(token) is int and 0 <= token <= _MAX_TOKEN for token in tokens
    ):
        return MALFORMED
    if block_size is None:
        block_size = 0
    elif type(block_size) is not int or block_size < 0:
        return MALFORMED
    if medium is not None and type(medium) is not str:
        return MALFORMED
    return _stored(hashes, parent, tuple(tokens), block_size, medium, lora_name)


def _loose_removed(hashes: Any, medium: Any) -> BlockRemoved | str:
    if type(hashes) is not list or (medium is not None and type(medium) is not str):
        return MALFORMED
    return _removed(hashes, medium)


# Shared by both paths -----------------------------------------------------------------------


def _stored(
    hashes: list[Any],
    parent: Any,
    tokens: tuple[int, ...],
    block_size: int,
    medium: str | None,
    lora_name: Any,
) -> BlockStored | str:
    texts = _hash_texts(hashes)
    if texts is None:
        return BAD_HASH
    parent_text = None
    if parent is not None:
        parent_text = _hash_text(parent)
        if parent_text is None:
            return BAD_HASH
    # Positional (block_hashes, token_ids, block_size, medium, parent_block_hash, lora_name):
    # keywords would make this, the hottest call of ingestion, a quarter slower.
    lora_name = lora_name if type(lora_name) is str else None
    return BlockStored(texts, tokens, block_size, medium, parent_text, lora_name)


def _removed(hashes: list[Any], medium: str | None) -> BlockRemoved | str:
    texts = _hash_texts(hashes)
    if texts is None:
        return BAD_HASH
    return BlockRemoved(texts, medium)


def _hash_texts(hashes: list[Any]) -> tuple[str, ...] | None:
    """Engine hashes as key text, None if any is not an engine hash.

    Same text as `events.engine_hash_text`, inlined: this runs once per block on the hot path.
    """
    texts = []
    for value in hashes:
        if type(value) is int:
            texts.append(str(value))
        elif type(value) is bytes and len(value) in _DIGEST_SIZES:
            texts.append(value.hex())
        else:
            return None
    return tuple(texts)


def _hash_text(value: Any) -> str | None:
    texts = _hash_texts([value])
    return None if texts is None else texts[0]


def _skip(batch: EventBatch, reason: str) -> None:
    batch.skipped[reason] = batch.skipped.get(reason, 0) + 1
