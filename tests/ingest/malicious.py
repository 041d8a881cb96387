"""Hypothesis strategies for KV-event payloads an attacker or a broken engine sends.

`rejected_payloads` are payloads whose every event must be refused, or the whole batch: the
index must not change when one is applied. `any_payloads` adds random bytes and random msgpack.
"""

import msgspec
from hypothesis import strategies as st

TS = 1.5
_ENCODE = msgspec.msgpack.encode


def _pack(events: list, rank: object = 0) -> bytes:
    return _ENCODE([TS, events, rank])


def _deep(depth: int) -> bytes:
    return b"\x91" * depth + b"\x01"


# Values that are no engine hash, token id, medium or LoRA name.
_huge_ints = st.sampled_from([2**64 - 1, -(2**63), 2**63, -1, 2**32, -(2**31)])
_bad_hashes = st.one_of(
    st.binary(max_size=64).filter(lambda b: len(b) not in (16, 32)),
    st.text(max_size=8),
    st.floats(),
    st.none(),
    st.lists(st.integers(-(2**63), 2**64 - 1), max_size=2),  # what msgpack can carry
)
_bad_tokens = st.lists(st.sampled_from([-1, 2**32, 2**63, -(2**63), "1", 1.5, None]), min_size=1)
_bad_media = st.one_of(
    st.text(max_size=40).filter(lambda m: not (m.isascii() and m.isupper() and len(m) <= 32)),
    st.builds(lambda n: "A" * n, st.integers(33, 4096)),
    st.sampled_from(["gpu", "GPU\n", "GPU|CPU", "CPU-PINNED", "1GPU", "X" * 100_000]),
)
_bad_lora_names = st.one_of(
    st.builds(lambda n: "a" * n, st.integers(257, 10_000)),
    st.sampled_from(["a\nb", "\x00", "tab\t", "x\x7f"]),
)


def _stored(**fields) -> dict:
    event = {"type": "BlockStored", "block_hashes": [7], "token_ids": list(range(16))}
    event |= {"block_size": 16, "medium": "GPU"}
    return event | fields


_bad_events = st.one_of(
    st.builds(lambda h: _stored(block_hashes=[h]), _bad_hashes),
    st.builds(lambda t: _stored(token_ids=t), _bad_tokens),
    st.builds(lambda m: _stored(medium=m), _bad_media),
    st.builds(lambda m: {"type": "BlockRemoved", "block_hashes": [7], "medium": m}, _bad_media),
    st.builds(lambda n: _stored(lora_name=n), _bad_lora_names),
    st.builds(lambda s: _stored(block_size=s), st.sampled_from([-1, -(2**63), "16", 1.5])),
    st.builds(lambda t: {"type": t}, st.text(max_size=20).filter(lambda t: t not in _TAGS)),
    st.sampled_from([None, 7, "BlockStored", [], [None], {}, {"type": None}]),
)
_TAGS = ("BlockStored", "BlockRemoved", "AllBlocksCleared")

_invalid_utf8 = st.sampled_from(
    [
        # a batch map whose key, and an event whose medium, are str headers over invalid UTF-8
        b"\x82\xa2ts\xcb?\xf8\x00\x00\x00\x00\x00\x00\xa6ev\xff\xfets\x90",
        b"\x93\xcb?\xf8\x00\x00\x00\x00\x00\x00\x91\x83\xa4type\xabBlockStored"
        b"\xacblock_hashes\x91\x07\xa6medium\xa3\xc3\x28\x00\x00",
    ]
)

rejected_payloads = st.one_of(
    st.builds(_deep, st.integers(20_000, 120_000)),
    st.builds(
        lambda d: _pack([{"type": "AllBlocksCleared", "x": msgspec.Raw(_deep(d))}]),
        st.integers(20_000, 60_000),
    ),
    st.builds(lambda d: _ENCODE([TS, [], msgspec.Raw(_deep(d))]), st.integers(20_000, 60_000)),
    st.builds(lambda events: _pack(events), st.lists(_bad_events, min_size=1, max_size=5)),
    st.builds(lambda ts: _ENCODE([ts, [], 0]), st.sampled_from([float("inf"), float("nan")])),
    st.sampled_from([b"\xdd\xff\xff\xff\xff", b"\xdc\xff\xff\x01", b"\xc1", b"\x93\xcb"]),
    _invalid_utf8,
)

_msgpack_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**64 - 1),
        st.floats(),
        st.text(max_size=20),
        st.binary(max_size=40),
    ),
    lambda inner: (
        st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=8), inner, max_size=6)
    ),
    max_leaves=40,
)

any_payloads = st.one_of(
    rejected_payloads,
    st.binary(max_size=300),
    st.builds(_ENCODE, _msgpack_values),
    st.builds(
        lambda events, rank: _pack(events, rank),
        st.lists(_msgpack_values, max_size=6),
        st.one_of(_huge_ints, st.none()),
    ),
)
