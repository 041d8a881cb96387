"""The router-facing writes are exactly kthena's (compatibility.md 2.2, 2.3): matrix field values,
mapping keys and their TTL, for the realistic vLLM store of the shared conformance vectors; in
both value formats (compatibility.md 2.7: legacy values are the timestamp alone) and both
settings of the sidecar mapping keys (2.3: off, there are none, and the matrix is the same)."""

import json

import pytest
import redis

from kvadmin.index.events import BlockRemoved, BlockStored, EventBatch, engine_hash_text
from kvadmin.index.writer import Applier
from scoring.hashing import block_hashes
from scoring.keys import (
    block_key,
    engine_hash_key,
    residency_key,
    residency_score,
)
from scoring.values import ValueFormat
from tests.conftest import CONFORMANCE
from tests.engine_blocks import stream_blocks
from tests.index import MAPPING_KEYS, MODEL, VALUE_FORMATS

NOW = 1_700_000_000


@pytest.fixture(params=VALUE_FORMATS)
def value_format(request: pytest.FixtureRequest) -> ValueFormat:
    """Each value format in turn: the writer must follow kthena's layout under both."""
    return request.param


@pytest.fixture(params=MAPPING_KEYS)
def mapping_keys(request: pytest.FixtureRequest) -> bool:
    """Each setting of the sidecar mapping keys in turn."""
    return request.param


@pytest.fixture
def applier(redis_client: redis.Redis, value_format: ValueFormat, mapping_keys: bool) -> Applier:
    """The index writer in each value format and mapping-key setting."""
    return Applier(redis_client, value_format=value_format, mapping_keys=mapping_keys)


@pytest.fixture
def vector() -> dict:
    """kthena's own writes for one real vLLM block (Qwen3 chat prefix, one GPU block)."""
    return json.loads(CONFORMANCE.read_text())["realistic_vllm_store"]


def _store(vector: dict, medium: str | None = "GPU") -> EventBatch:
    stored = BlockStored(
        block_hashes=(engine_hash_text(vector["engine_hash"]),),
        token_ids=tuple(vector["token_ids"]),
        block_size=len(vector["token_ids"]),
        medium=medium,
    )
    return EventBatch(ts=0.0, events=[stored])


def test_it_writes_the_matrix_field_and_mapping_key_kthena_writes(
    applier: Applier,
    redis_client: redis.Redis,
    vector: dict,
    value_format: ValueFormat,
    mapping_keys: bool,
) -> None:
    writes = vector["writes"]
    applier.apply_batch(vector["pod"], vector["model"], vector["engine"], 0, 0, _store(vector), NOW)

    assert redis_client.hgetall(writes["block_key"]) == {
        writes["field"]: value_format.field_value(NOW, "GPU")
    }
    assert block_key(vector["model"], vector["standardized_hash"]) == writes["block_key"]
    if not mapping_keys:
        assert not redis_client.exists(writes["mapping_key"])
        return
    assert redis_client.get(writes["mapping_key"]) == writes["mapping_value"]
    assert writes["mapping_ttl"] - 5 < redis_client.ttl(writes["mapping_key"])
    assert redis_client.ttl(writes["mapping_key"]) <= writes["mapping_ttl"]


def test_the_stream_keeps_what_the_mapping_key_says_in_either_setting(
    applier: Applier, redis_client: redis.Redis, vector: dict
) -> None:
    """Engine-hash search, the block pages and placeholders read the stream's engine blocks."""
    applier.apply_batch(vector["pod"], vector["model"], vector["engine"], 0, 0, _store(vector), NOW)

    entry = stream_blocks(redis_client, vector["pod"], 0).get(
        engine_hash_text(vector["engine_hash"])
    )
    assert entry == f"{vector['writes']['mapping_value']}|GPU"


def test_a_store_without_medium_writes_the_legacy_value(
    applier: Applier, redis_client: redis.Redis, vector: dict
) -> None:
    applier.apply_batch("p.ns", MODEL, "vllm", 0, 0, _store(vector, medium=None), NOW)

    assert redis_client.hget(block_key(MODEL, vector["standardized_hash"]), "p.ns") == str(NOW)


def test_every_store_refreshes_the_timestamp(
    applier: Applier, redis_client: redis.Redis, vector: dict, value_format: ValueFormat
) -> None:
    applier.apply_batch("p.ns", MODEL, "vllm", 0, 0, _store(vector), NOW)
    applier.apply_batch("p.ns", MODEL, "vllm", 0, 1, _store(vector), NOW + 7)

    assert redis_client.hget(
        block_key(MODEL, vector["standardized_hash"]), "p.ns"
    ) == value_format.field_value(NOW + 7, "GPU")


def test_sglang_signed_hashes_get_sglang_mapping_keys(
    applier: Applier, redis_client: redis.Redis, vector: dict, mapping_keys: bool
) -> None:
    stored = BlockStored(
        block_hashes=(engine_hash_text(-42),), token_ids=tuple(vector["token_ids"]), block_size=16
    )
    applier.apply_batch("s.ns", MODEL, "sglang", 0, 0, EventBatch(ts=0.0, events=[stored]), NOW)

    mapping = engine_hash_key("sglang", "s.ns", -42)
    assert mapping == "sglang:kv:block:s.ns@-42"
    expected = str(vector["standardized_hash"]) if mapping_keys else None
    assert redis_client.get(mapping) == expected


def test_each_block_pairs_with_its_own_slice_of_the_tokens(
    applier: Applier, redis_client: redis.Redis, value_format: ValueFormat, mapping_keys: bool
) -> None:
    tokens = tuple(range(48))
    stored = BlockStored(("1", "2", "3"), tokens, 16, "GPU")
    applier.apply_batch("p.ns", MODEL, "vllm", 0, 0, EventBatch(ts=0.0, events=[stored]), NOW)

    for engine_hash, std in zip(("1", "2", "3"), block_hashes(tokens), strict=True):
        assert redis_client.get(engine_hash_key("vllm", "p.ns", engine_hash)) == (
            str(std) if mapping_keys else None
        )
        assert stream_blocks(redis_client, "p.ns", 0).get(engine_hash) == f"{std}|GPU"
        assert redis_client.hget(block_key(MODEL, std), "p.ns") == value_format.field_value(
            NOW, "GPU"
        )


def test_matrix_values_keep_whole_seconds_of_microsecond_residency(
    applier: Applier, redis_client: redis.Redis, vector: dict, value_format: ValueFormat
) -> None:
    """Residency orders stores to the microsecond; the router reads whole seconds, also when
    a removal hands the value over to the medium left (its time comes from residency)."""
    std = vector["standardized_hash"]
    engine_hash = engine_hash_text(vector["engine_hash"])
    offloaded = BlockStored((engine_hash,), (), 0, "CPU")
    evicted = BlockRemoved((engine_hash,), "GPU")
    applier.apply_batch("p.ns", MODEL, "vllm", 0, 0, _store(vector), NOW + 0.25)
    assert redis_client.hget(block_key(MODEL, std), "p.ns") == value_format.field_value(NOW, "GPU")

    applier.apply_batch("p.ns", MODEL, "vllm", 0, 1, EventBatch(0.0, [offloaded]), NOW + 3.5)
    applier.apply_batch("p.ns", MODEL, "vllm", 0, 2, EventBatch(0.0, [evicted]), NOW + 5.75)

    assert redis_client.hget(block_key(MODEL, std), "p.ns") == value_format.field_value(
        NOW + 3, "CPU"
    )
    assert redis_client.zscore(residency_key("p.ns", "CPU"), str(std)) == residency_score(NOW + 3.5)
