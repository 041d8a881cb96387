"""Bytes from an engine's KV-event stream -> plain event objects (compatibility.md 4.1, 4.2).

Pure: no sockets, no Redis. One payload gives one `EventBatch`; one bad or unknown event is
skipped and counted in `batch.skipped`, never the whole batch (compatibility.md 5.1).

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

Engines are untrusted, so every size is bounded (the INGEST_MAX_* knobs, `Limits`): a batch nested
deeper than INGEST_MAX_DEPTH or with more than INGEST_MAX_EVENTS events is undecodable; an event
with more hashes or token ids than allowed, a medium that is not an upper-case identifier of at most
32 characters (the engines' vocabulary, compatibility.md 3) or a LoRA name longer than 256
characters or with control characters is skipped, and counted by its reason. The depth is measured
on the careful path, which builds the whole payload: the fast path builds only the typed fields,
whose depth its shapes fix, and skips everything else. Any failure of the decoder on one payload
(msgspec raises RecursionError, not DecodeError, past its own depth limit) makes that payload
undecodable: it never escapes as another exception.

Events moving upstream (compatibility.md 4.2), one rule: a known tag applies with the fields
kvadmin reads, whatever else it carries; an unknown tag is skipped, counted, and named.
- Extra fields are ignored, as map keys or as trailing positional elements: vLLM's
  `extra_keys`, `group_idx`, `kv_cache_spec_kind`, ..., `remaining_copy_counts` (kvadmin counts
  a pod's holders of a block itself, per rank and medium), `origin`, `session_id`.
- A `BlockRemoved` with many hashes (SGLang batches one per radix node) removes each of them,
  within the INGEST_MAX_HASHES bound like a store.
- Any upper-case identifier is a medium (vLLM's later `STORAGE` for its file-system tier too);
  its weight comes from the weights configuration, the 1.0 fallback when it has none.
- An unknown tag (`BlockInactive`, `TierBlocksCleared`, anything newer) skips that event only:
  kvadmin changes the index only for events whose meaning it knows. Skipping is exact for an
  event that changes no ownership (an inactive block is still held); for one that does, the
  index keeps the blocks until their own removals or garbage collection take them, which errs
  towards a cache hit the router then misses, never towards losing one. Each such event counts
  as `unknown_tag` and by its tag (`EventBatch.unknown_tags`, the stream's status, /metrics,
  the pod's page) so an operator sees a new engine version coming. Tags are untrusted text:
  only identifiers of at most UNKNOWN_TAG_MAX_LENGTH characters are named, and at most
  UNKNOWN_TAGS_MAX distinct ones per batch (and per stream, kept by the applier); the rest
  are counted in `unknown_tag` only.
"""

import math
from collections.abc import Sequence
from typing import Annotated, Any, NamedTuple

import msgspec

from kvadmin.conf import knob
from kvadmin.index.events import (
    UNKNOWN_TAGS_MAX,
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    Event,
    EventBatch,
)

UNKNOWN_TAG = "unknown_tag"
BAD_HASH = "bad_hash"
MALFORMED = "malformed"
BAD_MEDIUM = "bad_medium"
BAD_LORA_NAME = "bad_lora_name"
TOO_MANY_HASHES = "too_many_hashes"
TOO_MANY_TOKENS = "too_many_tokens"

MEDIUM_MAX_LENGTH = 32
UNKNOWN_TAG_MAX_LENGTH = 48
LORA_NAME_MAX_LENGTH = 256

SEQ_BYTES = 8
END_OF_REPLAY = b"\xff" * SEQ_BYTES
"""The seq frame of the replay answer's end marker (its payload frame is empty)."""

_DIGEST_SIZES = (16, 32)
# standardized hashing writes each token as 4-byte unsigned (compatibility.md 2.1)
_MAX_TOKEN = 0xFFFFFFFF


class UndecodableBatch(ValueError):
    """The payload is not a KV-event batch at all: not msgpack, not [ts, events, rank?], or
    beyond the limits. `kind` tells failures apart for logging once per kind."""

    def __init__(self, message: str, kind: str = "shape") -> None:
        super().__init__(message)
        self.kind = kind


class Limits(NamedTuple):
    """The INGEST_MAX_* knobs (see kvadmin.conf)."""

    depth: int
    events: int
    hashes: int
    tokens: int

    @classmethod
    def current(cls) -> "Limits":
        return cls(
            knob("INGEST_MAX_DEPTH"),
            knob("INGEST_MAX_EVENTS"),
            knob("INGEST_MAX_HASHES"),
            knob("INGEST_MAX_TOKENS"),
        )


class BadFrames(ValueError):
    """A ZMQ message does not have the frame layout of a KV-event stream."""


def decode_batch(payload: bytes) -> EventBatch:
    """Decode one msgpack batch payload; raises `UndecodableBatch` (and nothing else) when it
    is not a batch, is beyond the limits, or the decoder fails on it in any way."""
    if not payload:
        raise UndecodableBatch("empty payload")
    limits = Limits.current()
    try:
        return _decode(payload, limits)
    except UndecodableBatch:
        raise
    except RecursionError:
        raise UndecodableBatch("nested deeper than the decoder goes", "too_deep") from None
    except Exception as exc:  # one payload's failure costs that batch, never its stream
        message = f"the decoder failed: {type(exc).__name__}: {exc}"
        raise UndecodableBatch(message, "decoder_error") from None


def _decode(payload: bytes, limits: Limits) -> EventBatch:
    typed = _typed_decoder(payload)
    if typed is not None:
        try:
            shaped = typed.decode(payload)
        except msgspec.ValidationError:
            pass  # valid msgpack, unusual content: the careful path judges each event
        except msgspec.DecodeError as exc:
            raise UndecodableBatch(f"not msgpack: {exc}", "not_msgpack") from None
        else:
            return _from_typed(shaped, limits)
    return _decode_loose(payload, limits)


def undecodable_batch() -> EventBatch:
    """What an undecodable payload applies as: no events, one `undecodable` skip and no
    publish time (0), so its seq still counts as applied and the skip is counted."""
    return EventBatch(ts=0.0, events=[], skipped={"undecodable": 1})


def split_frames(frames: Sequence[bytes]) -> tuple[bytes, int, bytes]:
    """Check one PUB message's frames and read its seq, leaving the payload undecoded: a
    consumer tracking seq needs the seq even of a batch it then cannot decode."""
    if len(frames) != 3:
        raise BadFrames(f"a published message is [topic, seq, payload], not {len(frames)} frames")
    topic, seq_frame, payload = frames
    return bytes(topic), _seq(seq_frame), payload


def split_replay_frames(frames: Sequence[bytes]) -> tuple[bytes | None, int, bytes] | None:
    """Check one replay message's frames and read its topic (None in the older layout) and
    seq, leaving the payload undecoded (see `split_frames`); None for the end marker.

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
    return topic, _seq(seq_frame), payload


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


def _from_typed(shaped: _RowBatch | _RowBatchOfMaps | _MapBatch, limits: Limits) -> EventBatch:
    if type(shaped) is _MapBatch:
        rank = shaped.data_parallel_rank
        if rank is None:
            rank = shaped.attn_dp_rank
    else:
        rank = shaped.rank
    _check_batch(shaped.ts, len(shaped.events), limits)
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
                limits,
            )
        elif isinstance(raw, _REMOVED):
            event = _removed(raw.block_hashes, raw.medium, limits)
        else:
            event = AllBlocksCleared()
        if type(event) is str:
            _skip(batch, event)
        else:
            events.append(event)
    return batch


# The careful path ---------------------------------------------------------------------------

_LOOSE = msgspec.msgpack.Decoder()


def _decode_loose(payload: bytes, limits: Limits | None = None) -> EventBatch:
    """Decode without a schema and judge every event alone: the definition of the result."""
    limits = limits or Limits.current()
    try:
        shaped = _LOOSE.decode(payload)
    except msgspec.DecodeError as exc:
        raise UndecodableBatch(f"not msgpack: {exc}", "not_msgpack") from None
    if _deeper_than(shaped, limits.depth):
        raise UndecodableBatch(f"nested deeper than {limits.depth}", "too_deep")
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
    _check_batch(float(ts), len(raw_events), limits)
    batch = EventBatch(ts=float(ts), events=[], rank=rank)
    for raw in raw_events:
        event = _loose_event(raw, limits)
        if type(event) is str:
            _skip(batch, event)
            if event == UNKNOWN_TAG:
                _name_tag(batch, raw[0] if type(raw) is list else raw["type"])  # type: ignore[index]
        else:
            batch.events.append(event)
    return batch


def _name_tag(batch: EventBatch, tag: str) -> None:
    """Itemize an unknown tag if it reads as an event name and the batch names few enough."""
    tags = batch.unknown_tags
    if tag in tags:
        tags[tag] += 1
    elif len(tags) < UNKNOWN_TAGS_MAX and _is_tag(tag):
        tags[tag] = 1


def _is_tag(tag: str) -> bool:
    """An ASCII identifier (`BlockInactive`, `TierBlocksCleared`) of bounded length."""
    return 0 < len(tag) <= UNKNOWN_TAG_MAX_LENGTH and tag.isascii() and tag.isidentifier()


def _deeper_than(value: object, limit: int) -> bool:
    """Whether containers nest more than `limit` deep in a decoded value (no recursion: the
    value may be nested as deep as the decoder went)."""
    stack = [(value, 1)] if type(value) in (list, dict) else []
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if type(item) is dict else item
        stack.extend((child, depth + 1) for child in children if type(child) in (list, dict))
    return False


def _check_batch(ts: float, events: int, limits: Limits) -> None:
    if not math.isfinite(ts):
        raise UndecodableBatch(f"batch ts must be a finite number, not {ts}")
    if events > limits.events:
        message = f"the batch has {events} events; the limit is {limits.events}"
        raise UndecodableBatch(message, "too_many_events")


def _loose_event(raw: object, limits: Limits) -> Event | str:
    """One event in either encoding, or the reason it is skipped."""
    if type(raw) is list:
        if not raw or type(raw[0]) is not str:
            return MALFORMED
        tag = raw[0]
        row = raw + [None] * (8 - len(raw))  # missing trailing elements are nil
        if tag == "BlockStored":
            return _loose_stored(row[1], row[2], row[3], row[4], row[6], row[7], limits)
        if tag == "BlockRemoved":
            return _loose_removed(row[1], row[2], limits)
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
                limits,
            )
        if tag == "BlockRemoved":
            return _loose_removed(raw.get("block_hashes"), raw.get("medium"), limits)
    else:
        return MALFORMED
    if tag == "AllBlocksCleared":
        return AllBlocksCleared()
    return UNKNOWN_TAG


def _loose_stored(
    hashes: Any,
    parent: Any,
    tokens: Any,
    block_size: Any,
    medium: Any,
    lora_name: Any,
    limits: Limits,
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
    return _stored(hashes, parent, tuple(tokens), block_size, medium, lora_name, limits)


def _loose_removed(hashes: Any, medium: Any, limits: Limits) -> BlockRemoved | str:
    if type(hashes) is not list or (medium is not None and type(medium) is not str):
        return MALFORMED
    return _removed(hashes, medium, limits)


# Shared by both paths -----------------------------------------------------------------------


def _stored(
    hashes: list[Any],
    parent: Any,
    tokens: tuple[int, ...],
    block_size: int,
    medium: str | None,
    lora_name: Any,
    limits: Limits,
) -> BlockStored | str:
    if len(hashes) > limits.hashes:
        return TOO_MANY_HASHES
    if len(tokens) > limits.tokens:
        return TOO_MANY_TOKENS
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
    if medium is not None and not _is_medium(medium):
        return BAD_MEDIUM
    if type(lora_name) is not str:
        lora_name = None
    elif len(lora_name) > LORA_NAME_MAX_LENGTH or not lora_name.isprintable():
        return BAD_LORA_NAME
    return BlockStored(texts, tokens, block_size, medium, parent_text, lora_name)


def _removed(hashes: list[Any], medium: str | None, limits: Limits) -> BlockRemoved | str:
    if len(hashes) > limits.hashes:
        return TOO_MANY_HASHES
    texts = _hash_texts(hashes)
    if texts is None:
        return BAD_HASH
    if medium is not None and not _is_medium(medium):
        return BAD_MEDIUM
    return BlockRemoved(texts, medium)


_MEDIUM_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_MEDIUM_REST = _MEDIUM_FIRST | frozenset("0123456789_")
_MEDIA_SEEN: set[str] = set()
_MEDIA_SEEN_MAX = 1024


def _is_medium(medium: str) -> bool:
    """An upper-case identifier of at most MEDIUM_MAX_LENGTH characters (GPU, CPU_PINNED,
    SHARED_STORAGE, ...): media are stored once per block, so their size is bounded. The few
    media a fleet uses are remembered: this runs once per event on the hot path."""
    if medium in _MEDIA_SEEN:
        return True
    valid = (
        0 < len(medium) <= MEDIUM_MAX_LENGTH
        and medium[0] in _MEDIUM_FIRST
        and _MEDIUM_REST.issuperset(medium)
    )
    if valid and len(_MEDIA_SEEN) < _MEDIA_SEEN_MAX:
        _MEDIA_SEEN.add(medium)
    return valid


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
