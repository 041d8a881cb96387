"""Engine hashes in each engine's own format: chained, so equal content under different prefixes
differs, while the standardized hash of that content is the same."""

import random

from kvadmin.fleet.cache import GPU, CacheModel
from kvadmin.index.events import engine_hash_value
from scoring.hashing import hash_block


def _random_prompts(count: int, blocks: int = 4) -> list[list[int]]:
    rng = random.Random(5)
    return [[rng.randrange(150_000) for _ in range(16 * blocks)] for _ in range(count)]


def test_the_same_block_under_different_prefixes_has_different_vllm_hashes() -> None:
    cache = CacheModel("vllm", gpu_blocks=8)
    shared = list(range(100, 116))
    first = cache.blocks_of(list(range(16)) + shared)
    second = cache.blocks_of(list(range(50, 66)) + shared)
    assert first[1] != second[1]
    cache.serve(list(range(16)) + shared)
    cache.serve(list(range(50, 66)) + shared)
    assert {(h, m) for h, m in cache.contents() if h == hash_block(shared)} == {
        (hash_block(shared), GPU)
    }
    assert len(cache.engine_contents()) == 4


def test_vllm_hashes_are_unsigned_64_bit_and_reach_above_2_to_the_63() -> None:
    cache = CacheModel("vllm", gpu_blocks=8)
    values = [int(k) for p in _random_prompts(20) for k in cache.blocks_of(p)]
    assert all(0 <= v < 2**64 for v in values)
    assert any(v >= 2**63 for v in values)


def test_sglang_hashes_are_signed_64_bit_and_some_are_negative() -> None:
    cache = CacheModel("sglang", gpu_blocks=8)
    values = [int(k) for p in _random_prompts(20) for k in cache.blocks_of(p)]
    assert all(-(2**63) <= v < 2**63 for v in values)
    assert any(v < 0 for v in values)


def test_vllm_bytes_hashes_are_32_byte_digests_sent_as_bytes() -> None:
    cache = CacheModel("vllm", gpu_blocks=8, bytes_hashes=True)
    [key] = cache.blocks_of(list(range(16)))
    assert len(key) == 64
    assert engine_hash_value(key) == bytes.fromhex(key)


def test_the_hash_seed_separates_engine_namespaces_but_not_standardized_hashes() -> None:
    prompt = list(range(32))
    one, other = CacheModel("vllm", 8, hash_seed=b"a"), CacheModel("vllm", 8, hash_seed=b"b")
    assert set(one.blocks_of(prompt)).isdisjoint(other.blocks_of(prompt))
    one.serve(prompt)
    other.serve(prompt)
    assert one.contents() == other.contents()
