"""Lower tiers, as the engines' write policies fill them (kvadmin/fleet/offload.py): vLLM's
connector stores every computed block to CPU (placeholder stores) in an LRU of its own; SGLang's
HiCache backs blocks up to host memory on their first use (write_through), their second
(write_through_selective) or at GPU eviction (write_back), never evicts a GPU-resident block
from host memory, and writes every host backup on to DISK. A lower-tier hit is loaded back into
GPU keeping its copy."""

import pytest

from kvadmin.fleet.cache import CPU, CPU_PINNED, DISK, GPU, CacheModel, lower_tiers_for
from kvadmin.fleet.pod import PodConfig
from kvadmin.index.events import BlockRemoved, BlockStored
from scoring.hashing import hash_block


def _prompt(first: int, blocks: int) -> list[int]:
    return list(range(first, first + 16 * blocks))


def _vllm(gpu: int, cpu: int) -> CacheModel:
    return CacheModel("vllm", gpu_blocks=gpu, lower_tiers=lower_tiers_for("vllm", cpu_blocks=cpu))


def _sglang(gpu: int, cpu: int, disk: int = 0, policy: str | None = None) -> CacheModel:
    tiers = lower_tiers_for("sglang", cpu_blocks=cpu, disk_blocks=disk)
    return CacheModel("sglang", gpu_blocks=gpu, lower_tiers=tiers, write_policy=policy)


def test_vllm_stores_every_computed_block_to_cpu_with_one_placeholder_store() -> None:
    cache = _vllm(gpu=2, cpu=4)
    [a0, a1] = cache.blocks_of(_prompt(0, 2))
    events = cache.serve(_prompt(0, 2)).events
    assert events == [
        BlockStored((a0, a1), tuple(range(32)), 16, GPU),
        BlockStored((a0, a1), medium=CPU),
    ]
    placeholder = events[1]
    assert isinstance(placeholder, BlockStored)
    assert (placeholder.token_ids, placeholder.block_size) == ((), 0)
    assert not placeholder.token_ids
    # A GPU eviction is a plain removal: the block was stored when it was computed.
    events = cache.serve(_prompt(1000, 1)).events
    assert events[0] == BlockRemoved((a1,), GPU)
    assert (hash_block(range(16, 32)), CPU) in cache.contents()
    assert (hash_block(range(16, 32)), GPU) not in cache.contents()


def test_vllm_cpu_tier_is_its_own_lru_and_may_evict_a_block_the_gpu_holds() -> None:
    cache = _vllm(gpu=4, cpu=2)
    [a0, a1] = cache.blocks_of(_prompt(0, 2))
    [b] = cache.blocks_of(_prompt(1000, 1))
    cache.serve(_prompt(0, 2))
    events = cache.serve(_prompt(1000, 1)).events
    assert events[1:] == [BlockRemoved((a1,), CPU), BlockStored((b,), medium=CPU)]
    assert (a1, GPU) in cache.engine_contents()
    assert (a1, CPU) not in cache.engine_contents()


def test_the_last_tier_evicts_with_a_plain_removal() -> None:
    cache = _vllm(gpu=1, cpu=1)
    [a] = cache.blocks_of(_prompt(0, 1))
    [b] = cache.blocks_of(_prompt(1000, 1))
    cache.serve(_prompt(0, 1))
    events = cache.serve(_prompt(1000, 1)).events
    assert events == [
        BlockRemoved((a,), GPU),
        BlockStored((b,), tuple(range(1000, 1016)), 16, GPU),
        BlockRemoved((a,), CPU),
        BlockStored((b,), medium=CPU),
    ]


def test_a_cpu_hit_is_counted_in_cpu_and_loaded_back_into_gpu_keeping_the_copy() -> None:
    cache = _vllm(gpu=2, cpu=4)
    cache.serve(_prompt(0, 2))
    cache.serve(_prompt(1000, 2))  # evicts both blocks of the first prompt from GPU
    result = cache.serve(_prompt(0, 2) + [5])
    assert result.hit_tokens == {CPU: 32}
    assert result.cached_tokens == 32
    stores = [e for e in result.events if isinstance(e, BlockStored) and e.medium == GPU]
    assert [e.token_ids for e in stores] == [tuple(range(32))]
    assert not [e for e in result.events if isinstance(e, BlockStored) and e.medium == CPU]
    both = {(hash_block(range(0, 16)), GPU), (hash_block(range(0, 16)), CPU)}
    assert both <= cache.contents()


def test_a_hit_split_across_tiers_counts_each_block_in_its_best_tier() -> None:
    cache = _vllm(gpu=3, cpu=4)
    cache.serve(_prompt(0, 3))
    cache.serve(_prompt(1000, 1))  # evicts the tail block of the first prompt from GPU
    assert cache.serve(_prompt(0, 3) + [5]).hit_tokens == {GPU: 32, CPU: 16}


def test_sglang_writes_through_to_cpu_pinned_then_disk_with_tokens() -> None:
    cache = _sglang(gpu=1, cpu=1, disk=2)
    assert cache.write_policy == "write_through"  # SGLang's default
    [a] = cache.blocks_of(_prompt(0, 1))
    [b] = cache.blocks_of(_prompt(1000, 1))
    cache.serve(_prompt(0, 1))
    events = cache.serve(_prompt(1000, 1)).events
    tokens = tuple(range(1000, 1016))
    assert events == [
        BlockRemoved((a,), GPU),
        BlockStored((b,), tokens, 16, GPU),
        BlockRemoved((a,), CPU_PINNED),
        BlockStored((b,), tokens, 16, CPU_PINNED),
        BlockStored((b,), tokens, 16, DISK),
    ]
    assert cache.serve(_prompt(0, 1) + [1]).hit_tokens == {DISK: 16}


def test_sglang_host_memory_never_evicts_a_block_the_gpu_holds() -> None:
    cache = _sglang(gpu=4, cpu=2)
    [b] = cache.blocks_of(_prompt(1000, 1))
    cache.serve(_prompt(0, 2))
    events = cache.serve(_prompt(1000, 1)).events
    assert events == [BlockStored((b,), tuple(range(1000, 1016)), 16, GPU)]  # backup refused
    assert (b, CPU_PINNED) not in cache.engine_contents()


def test_sglang_write_through_selective_backs_a_block_up_on_its_second_use() -> None:
    cache = _sglang(gpu=4, cpu=4, policy="write_through_selective")
    [a0, a1] = cache.blocks_of(_prompt(0, 2))
    events = cache.serve(_prompt(0, 2)).events
    assert [e.medium for e in events if isinstance(e, BlockStored)] == [GPU, GPU]
    events = cache.serve(_prompt(0, 2) + [7]).events
    assert [e.block_hashes for e in events] == [(a0,), (a1,)]
    assert {e.medium for e in events} == {CPU_PINNED}


def test_sglang_write_back_copies_a_block_down_just_before_its_gpu_removal() -> None:
    cache = _sglang(gpu=1, cpu=1, disk=2, policy="write_back")
    [a] = cache.blocks_of(_prompt(0, 1))
    [b] = cache.blocks_of(_prompt(1000, 1))
    assert [e.medium for e in cache.serve(_prompt(0, 1)).events] == [GPU]
    cache.serve(_prompt(1000, 1))
    events = cache.serve(_prompt(2000, 1)).events
    assert events[:4] == [
        BlockRemoved((a,), CPU_PINNED),
        BlockStored((b,), tuple(range(1000, 1016)), 16, CPU_PINNED),
        BlockStored((b,), tuple(range(1000, 1016)), 16, DISK),
        BlockRemoved((b,), GPU),
    ]
    assert cache.serve(_prompt(0, 1) + [1]).hit_tokens == {DISK: 16}


def test_each_engine_runs_only_the_write_policies_it_implements() -> None:
    assert _vllm(gpu=2, cpu=2).write_policy == "write_through"
    with pytest.raises(ValueError, match="vllm engine offloads with write_through"):
        CacheModel("vllm", 2, lower_tiers_for("vllm", 2), write_policy="write_back")
    with pytest.raises(ValueError, match="not 'write_sometimes'"):
        PodConfig("p", kind="sglang", write_policy="write_sometimes")
    assert PodConfig("p", kind="sglang", write_policy="write_back").write_policy == "write_back"
