"""Fuzzing the decoder: whatever the bytes, one batch's payload gives an `EventBatch` within
the limits or raises `UndecodableBatch`, never anything else (a RecursionError or a decoder
bug escaping crash-looped the ingest loop)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from kvadmin.index.events import BlockRemoved, BlockStored
from kvadmin.ingest.decode import (
    LORA_NAME_MAX_LENGTH,
    MEDIUM_MAX_LENGTH,
    Limits,
    UndecodableBatch,
    decode_batch,
)
from tests.conftest import examples
from tests.ingest.malicious import any_payloads, rejected_payloads


def _decoded_or_refused(payload: bytes):
    try:
        return decode_batch(payload)
    except UndecodableBatch:
        return None


@settings(deadline=None)
@given(payload=any_payloads)
def test_any_payload_decodes_within_the_limits_or_is_undecodable(payload: bytes) -> None:
    batch = _decoded_or_refused(payload)
    if batch is None:
        return
    limits = Limits.current()
    assert len(batch.events) <= limits.events
    for event in batch.events:
        if isinstance(event, BlockStored | BlockRemoved):
            assert len(event.block_hashes) <= limits.hashes
            if event.medium is not None:
                assert len(event.medium) <= MEDIUM_MAX_LENGTH
                assert event.medium.isascii() and event.medium.isupper()
        if isinstance(event, BlockStored):
            assert len(event.token_ids) <= limits.tokens
            assert event.lora_name is None or len(event.lora_name) <= LORA_NAME_MAX_LENGTH


@settings(max_examples=examples(150), deadline=None)
@given(payload=rejected_payloads)
def test_a_malicious_payload_yields_no_event(payload: bytes) -> None:
    batch = _decoded_or_refused(payload)
    assert batch is None or (not batch.events and batch.skipped)


@settings(max_examples=examples(25), deadline=None)
@given(payload=st.binary(min_size=1, max_size=64))
def test_the_first_bytes_of_a_nested_payload_never_escape(payload: bytes) -> None:
    _decoded_or_refused(b"\x91" * 30_000 + payload)
