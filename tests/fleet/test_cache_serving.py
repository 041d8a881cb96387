"""Serving a prompt: full blocks only are stored, and the hit is the leading cached run."""

from kvadmin.fleet.cache import GPU, CacheModel
from kvadmin.index.events import BlockStored
from scoring.hashing import hash_block


def test_it_stores_full_blocks_only_in_one_vllm_event_with_tokens() -> None:
    cache = CacheModel("vllm", gpu_blocks=8)
    result = cache.serve(list(range(40)))
    assert result.cached_tokens == 0
    [event] = result.events
    assert isinstance(event, BlockStored)
    assert len(event.block_hashes) == 2
    assert event.token_ids == tuple(range(32))
    assert (event.block_size, event.medium, event.parent_block_hash) == (16, GPU, None)
    assert cache.contents() == {(hash_block(range(0, 16)), GPU), (hash_block(range(16, 32)), GPU)}


def test_sglang_stores_one_event_per_page_chained_by_parent() -> None:
    cache = CacheModel("sglang", gpu_blocks=8)
    first, second = cache.serve(list(range(32))).events
    assert isinstance(first, BlockStored) and isinstance(second, BlockStored)
    assert first.token_ids == tuple(range(16))
    assert second.parent_block_hash == first.block_hashes[0]


def test_a_repeated_prompt_hits_its_cached_prefix_and_stores_only_the_rest() -> None:
    cache = CacheModel("vllm", gpu_blocks=8)
    cache.serve(list(range(33)))
    result = cache.serve(list(range(64)))
    assert result.cached_tokens == 32
    assert result.hit_tokens == {GPU: 32}
    [event] = result.events
    assert isinstance(event, BlockStored)
    assert event.token_ids == tuple(range(32, 64))
    assert event.parent_block_hash == cache.blocks_of(range(32))[-1]


def test_a_fully_cached_block_aligned_prompt_still_recomputes_its_last_token() -> None:
    """Engines always compute at least one prompt token, so the last block is not a hit."""
    cache = CacheModel("vllm", gpu_blocks=8)
    cache.serve(list(range(48)))
    again = cache.serve(list(range(48)))
    assert again.cached_tokens == 32
    assert again.events == []
    assert cache.serve(list(range(49))).cached_tokens == 48


def test_a_different_first_block_misses_everything() -> None:
    cache = CacheModel("vllm", gpu_blocks=8)
    cache.serve(list(range(64)))
    assert cache.serve([999] + list(range(1, 64))).cached_tokens == 0


def test_clear_drops_every_tier_and_announces_it() -> None:
    cache = CacheModel("sglang", gpu_blocks=4)
    cache.serve(list(range(64)))
    assert [type(e).__name__ for e in cache.clear()] == ["AllBlocksCleared"]
    assert cache.contents() == set()
    assert cache.serve(list(range(64))).cached_tokens == 0
