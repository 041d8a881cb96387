"""Lower tiers: GPU evictions offload first (vLLM placeholders, SGLang full stores), lower
tiers evict downwards, and a lower-tier hit is loaded back into GPU keeping its copy."""

from kvadmin.fleet.cache import CPU, CPU_PINNED, DISK, GPU, CacheModel, lower_tiers_for
from kvadmin.index.events import BlockRemoved, BlockStored
from scoring.hashing import hash_block


def _prompt(first: int, blocks: int) -> list[int]:
    return list(range(first, first + 16 * blocks))


def test_vllm_offloads_with_a_placeholder_store_before_the_gpu_removal() -> None:
    cache = CacheModel("vllm", gpu_blocks=2, lower_tiers=lower_tiers_for("vllm", cpu_blocks=4))
    [a0, a1] = cache.blocks_of(_prompt(0, 2))
    cache.serve(_prompt(0, 2))
    events = cache.serve(_prompt(1000, 1)).events
    assert events[:2] == [BlockStored((a1,), medium=CPU), BlockRemoved((a1,), GPU)]
    placeholder = events[0]
    assert isinstance(placeholder, BlockStored)
    assert (placeholder.token_ids, placeholder.block_size) == ((), 0)
    assert placeholder.is_placeholder
    assert (hash_block(range(16, 32)), CPU) in cache.contents()
    assert (hash_block(range(16, 32)), GPU) not in cache.contents()


def test_the_last_tier_evicts_with_a_plain_removal() -> None:
    cache = CacheModel("vllm", gpu_blocks=1, lower_tiers=lower_tiers_for("vllm", cpu_blocks=1))
    [a] = cache.blocks_of(_prompt(0, 1))
    [b] = cache.blocks_of(_prompt(1000, 1))
    cache.serve(_prompt(0, 1))
    cache.serve(_prompt(1000, 1))
    events = cache.serve(_prompt(2000, 1)).events
    assert events[:3] == [
        BlockRemoved((a,), CPU),
        BlockStored((b,), medium=CPU),
        BlockRemoved((b,), GPU),
    ]


def test_a_cpu_hit_is_counted_in_cpu_and_loaded_back_into_gpu_keeping_the_copy() -> None:
    cache = CacheModel("vllm", gpu_blocks=2, lower_tiers=lower_tiers_for("vllm", cpu_blocks=4))
    cache.serve(_prompt(0, 2))
    cache.serve(_prompt(1000, 2))  # pushes both blocks of the first prompt to CPU
    result = cache.serve(_prompt(0, 2) + [5])
    assert result.hit_tokens == {CPU: 32}
    assert result.cached_tokens == 32
    stores = [e for e in result.events if isinstance(e, BlockStored) and e.medium == GPU]
    assert [e.token_ids for e in stores] == [tuple(range(32))]
    both = {(hash_block(range(0, 16)), GPU), (hash_block(range(0, 16)), CPU)}
    assert both <= cache.contents()


def test_a_hit_split_across_tiers_counts_each_block_in_its_best_tier() -> None:
    cache = CacheModel("vllm", gpu_blocks=3, lower_tiers=lower_tiers_for("vllm", cpu_blocks=4))
    cache.serve(_prompt(0, 3))
    cache.serve(_prompt(1000, 1))  # evicts the tail block of the first prompt to CPU
    assert cache.serve(_prompt(0, 3) + [5]).hit_tokens == {GPU: 32, CPU: 16}


def test_sglang_offloads_with_tokens_to_cpu_pinned_then_disk() -> None:
    tiers = lower_tiers_for("sglang", cpu_blocks=1, disk_blocks=2)
    cache = CacheModel("sglang", gpu_blocks=1, lower_tiers=tiers)
    [a] = cache.blocks_of(_prompt(0, 1))
    [b] = cache.blocks_of(_prompt(1000, 1))
    cache.serve(_prompt(0, 1))
    cache.serve(_prompt(1000, 1))
    events = cache.serve(_prompt(2000, 1)).events
    assert events[:4] == [
        BlockStored((a,), tuple(range(16)), 16, DISK),
        BlockRemoved((a,), CPU_PINNED),
        BlockStored((b,), tuple(range(1000, 1016)), 16, CPU_PINNED),
        BlockRemoved((b,), GPU),
    ]
    assert cache.serve(_prompt(0, 1) + [1]).hit_tokens == {DISK: 16}
