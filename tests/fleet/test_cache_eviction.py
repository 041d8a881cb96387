"""GPU-only eviction: least recently used first, a prefix outlives its tail, removals come
before the stores that needed the room."""

from kvadmin.fleet.cache import GPU, CacheModel
from kvadmin.index.events import BlockRemoved, BlockStored


def _prompt(first: int, blocks: int) -> list[int]:
    return list(range(first, first + 16 * blocks))


def test_it_evicts_the_least_recently_used_tail_first_one_removal_per_block() -> None:
    cache = CacheModel("vllm", gpu_blocks=4)
    old = cache.blocks_of(_prompt(0, 3))
    cache.serve(_prompt(0, 3))
    events = cache.serve(_prompt(1000, 2)).events
    assert events[0] == BlockRemoved((old[2],), GPU)
    assert isinstance(events[1], BlockStored) and len(events[1].block_hashes) == 2
    assert len(events) == 2
    assert cache.serve(_prompt(0, 3) + [7]).hit_tokens == {GPU: 32}


def test_recently_served_blocks_survive_and_older_ones_go() -> None:
    cache = CacheModel("vllm", gpu_blocks=4)
    a, b, c = _prompt(0, 2), _prompt(1000, 2), _prompt(2000, 2)
    cache.serve(a)
    cache.serve(b)
    cache.serve(a + [1])  # touch a: b is now the least recently used
    removed = [e for e in cache.serve(c).events if isinstance(e, BlockRemoved)]
    assert {e.block_hashes[0] for e in removed} == set(cache.blocks_of(b))
    assert cache.engine_contents() == {(k, GPU) for k in cache.blocks_of(a) + cache.blocks_of(c)}


def test_a_prompt_longer_than_the_gpu_caches_its_first_blocks() -> None:
    cache = CacheModel("vllm", gpu_blocks=3)
    result = cache.serve(_prompt(0, 5))
    assert cache.engine_contents() == {(k, GPU) for k in cache.blocks_of(_prompt(0, 3))}
    assert sum(len(e.block_hashes) for e in result.events) == 3
