"""The routing benchmark's cache (bench/sim/cache.py) follows the timed fleet's write policies:
served the same prompts, both models hit the same blocks in the same tiers and hold as many
blocks per tier, for every engine and policy."""

import random

import pytest

from bench.sim.cache import TieredCache
from bench.sim.workloads import chained_blocks
from kvadmin.fleet.cache import CacheModel, lower_tiers_for


def _prompts(seed: int, requests: int) -> list[list[int]]:
    """Shared prefixes and growing tails; no length is a multiple of the block size (the two
    models cap a fully cached prompt's last block alike only then)."""
    rng = random.Random(seed)
    prefixes = [[rng.randrange(1000) for _ in range(16 * rng.randint(1, 6))] for _ in range(8)]
    prompts = []
    for _ in range(requests):
        tail = [rng.randrange(1000) for _ in range(16 * rng.randint(0, 3) + rng.randint(1, 15))]
        prompts.append(rng.choice(prefixes) + tail)
    return prompts


@pytest.mark.parametrize(
    ("kind", "policy", "cpu", "disk"),
    [
        ("vllm", None, 24, 0),
        ("sglang", "write_through", 16, 40),
        ("sglang", "write_through_selective", 16, 40),
        ("sglang", "write_back", 16, 40),
    ],
)
def test_both_models_hit_and_hold_the_same(kind: str, policy: str | None, cpu: int, disk: int):
    tiers = lower_tiers_for(kind, cpu, disk)  # type: ignore[arg-type]
    fleet = CacheModel(kind, 12, tiers, write_policy=policy)  # type: ignore[arg-type]
    bench = TieredCache(kind, [12, *(t.capacity for t in tiers)], 16, policy)
    hits_in_lower_tiers = 0
    for prompt in _prompts(seed=5, requests=400):
        served = fleet.serve(prompt)
        hit = bench.serve(chained_blocks(prompt), len(prompt))
        by_medium = {m: n for m, n in zip(fleet.media, hit.tokens_by_tier, strict=True) if n}
        assert served.hit_tokens == by_medium
        held = [
            sum(1 for _key, m in fleet.engine_contents() if m == medium) for medium in fleet.media
        ]
        assert held == [len(tier) for tier in bench.tiers]
        hits_in_lower_tiers += sum(hit.tokens_by_tier[1:])
    assert hits_in_lower_tiers  # the lower tiers were exercised
