"""One simulated pod's tiered prefix cache: LRU per tier, what a prompt hits, and the index
changes each placement causes.

Tiers are listed best first: vLLM with its offloading connector `GPU, CPU`; SGLang with HiCache
`GPU, CPU_PINNED, DISK`. Write policies (`write_through` is the default, as vLLM's offloading
connector stores every newly computed block to CPU and SGLang's `--hicache-write-policy`
defaults to write_through):

- write_through: a placed block is written to every tier at once; each tier evicts its least
  recently used blocks on its own, so a block evicted from GPU usually still has a host copy.
- write_back: a block reaches a lower tier only when the tier above evicts it.

A hit is the prompt's leading run of blocks held in any tier, each served from the best tier
holding it; at least one prompt token is always recomputed. Serving a prompt places all its full
blocks in GPU (a reload keeps the lower-tier copy). A request's own blocks are never evicted to
make room for it. Blocks of one prompt are touched last to first, so a prefix outlives its tail.
"""

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

Change = tuple[int, int, bool]
"""(block id, tier index, stored): one change the index will hear about."""


@dataclass(slots=True)
class Hit:
    tokens_by_tier: list[int]
    """Cached tokens served from each tier."""
    blocks_by_tier: list[int]
    changes: list[Change] = field(default_factory=list)

    @property
    def cached_tokens(self) -> int:
        return sum(self.tokens_by_tier)


class TieredCache:
    def __init__(
        self, capacities: Sequence[int], block_size: int, write_policy: str = "write_through"
    ) -> None:
        if write_policy not in ("write_through", "write_back"):
            raise ValueError(f"unknown write policy {write_policy!r}")
        self.capacities = list(capacities)
        self.block_size = block_size
        self.write_through = write_policy == "write_through"
        self.tiers: list[OrderedDict[int, None]] = [OrderedDict() for _ in capacities]

    def best_tier(self, block: int) -> int | None:
        for index, tier in enumerate(self.tiers):
            if block in tier:
                return index
        return None

    def lookup(self, blocks: Sequence[int], prompt_tokens: int) -> Hit:
        """The hit serving the prompt now would get, changing nothing."""
        tokens = [0] * len(self.tiers)
        counts = [0] * len(self.tiers)
        left = max(prompt_tokens - 1, 0)
        for block in blocks:
            tier = self.best_tier(block)
            if tier is None or left <= 0:
                break
            taken = min(self.block_size, left)
            tokens[tier] += taken
            counts[tier] += 1
            left -= taken
        return Hit(tokens, counts)

    def serve(self, blocks: Sequence[int], prompt_tokens: int) -> Hit:
        """Measure the hit, then place the prompt's full blocks in GPU (and, written through,
        in every lower tier). The hit's `changes` say what the index must learn."""
        hit = self.lookup(blocks, prompt_tokens)
        full = blocks[: min(prompt_tokens // self.block_size, self.capacities[0])]
        pinned = set(full)
        for level, tier in enumerate(self.tiers):
            if level and not self.write_through:
                break
            capacity = self.capacities[level]
            for block in reversed(full):  # the prefix is touched last, so it is evicted last
                if block in tier:
                    tier.move_to_end(block)
                    continue
                if len(tier) >= capacity:
                    self._make_room(level, pinned, hit.changes)
                if len(tier) < capacity:
                    tier[block] = None
                    hit.changes.append((block, level, True))
        return hit

    def _make_room(self, level: int, pinned: set[int], changes: list[Change]) -> None:
        tier = self.tiers[level]
        while len(tier) >= self.capacities[level]:
            victim = next((block for block in tier if block not in pinned), None)
            if victim is None:
                return
            del tier[victim]
            changes.append((victim, level, False))
            below = level + 1
            if not self.write_through and below < len(self.tiers):
                if victim in self.tiers[below]:
                    self.tiers[below].move_to_end(victim)
                else:
                    self._make_room(below, pinned, changes)
                    self.tiers[below][victim] = None
                    changes.append((victim, below, True))
