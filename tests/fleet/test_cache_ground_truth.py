"""The events a cache emits describe it completely: folding them the way an index does rebuilds
exactly the cache's own ground truth, whatever the traffic."""

import random

import pytest

from kvadmin.fleet.cache import CacheModel, lower_tiers_for
from tests.fleet.folded_index import FoldedIndex


def _traffic(seed: int, requests: int) -> list[list[int]]:
    """Prompts sharing a few prefixes, growing conversations, and cold ones."""
    rng = random.Random(seed)
    prefixes = [[rng.randrange(1000) for _ in range(16 * rng.randint(1, 4))] for _ in range(3)]
    prompts = []
    for _ in range(requests):
        prefix = rng.choice(prefixes) if rng.random() < 0.8 else []
        prompts.append(prefix + [rng.randrange(1000) for _ in range(rng.randint(1, 60))])
    return prompts


@pytest.mark.parametrize(
    ("kind", "cpu_blocks", "disk_blocks", "policy"),
    [
        ("vllm", 0, 0, None),
        ("vllm", 12, 0, None),
        ("vllm", 6, 0, None),
        ("sglang", 0, 0, None),
        ("sglang", 6, 10, "write_through"),
        ("sglang", 6, 10, "write_through_selective"),
        ("sglang", 6, 10, "write_back"),
        ("sglang", 12, 0, "write_back"),
    ],
)
def test_folding_the_events_rebuilds_the_ground_truth(
    kind: str, cpu_blocks: int, disk_blocks: int, policy: str | None
) -> None:
    tiers = lower_tiers_for(kind, cpu_blocks, disk_blocks)  # type: ignore[arg-type]
    cache = CacheModel(kind, gpu_blocks=8, lower_tiers=tiers, write_policy=policy)  # type: ignore[arg-type]
    index = FoldedIndex()
    for n, prompt in enumerate(_traffic(seed=11, requests=300)):
        events = cache.clear() if n == 150 else cache.serve(prompt).events
        for event in events:
            index.apply(event)
        assert index.contents() == cache.contents()
        assert len(cache.engine_contents()) <= 8 + cpu_blocks + disk_blocks
