"""One simulated pod's tiered prefix cache: LRU per tier, what a prompt hits, and the index
changes each placement causes.

Tiers are listed best first: vLLM with its offloading connector `GPU, CPU`; SGLang with HiCache
`GPU, CPU_PINNED, DISK`. Blocks reach the lower tiers under the engine's write policy, with the
rules of the timed fleet's cache (`kvadmin/fleet/offload.py` says what each engine's source does):
written through, a request's blocks are copied to the first lower tier once used often enough
(vLLM and SGLang's write_through: at once; SGLang's write_through_selective: on the second use);
written back, a block is copied down when the GPU evicts it. vLLM's CPU tier is an LRU of its
own; SGLang's host tier evicts only blocks the GPU no longer holds, and every block reaching it
goes on to DISK.

A hit is the prompt's leading run of blocks held in any tier, each served from the best tier
holding it; at least one prompt token is always recomputed. Serving a prompt places all its full
blocks in GPU (a reload keeps the lower-tier copy). A request's own blocks are never evicted to
make room for it. Blocks of one prompt are touched last to first, so a prefix outlives its tail.
"""

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from kvadmin.fleet.offload import HOST_EVICTS_GPU_RESIDENT, backup_threshold, write_policy_for

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
        self,
        kind: str,
        capacities: Sequence[int],
        block_size: int,
        write_policy: str | None = None,
    ) -> None:
        self.write_policy = write_policy_for(kind, write_policy)
        self.threshold = backup_threshold(self.write_policy)
        self.spare_gpu = not HOST_EVICTS_GPU_RESIDENT[kind]
        self.capacities = list(capacities)
        self.block_size = block_size
        self.tiers: list[OrderedDict[int, None]] = [OrderedDict() for _ in capacities]
        self.uses: dict[int, int] = {}
        """Per GPU block, the requests that used it since it was placed."""

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
        """Measure the hit, then place the prompt's full blocks in GPU and copy them down as
        the write policy says. The hit's `changes` say what the index must learn."""
        hit = self.lookup(blocks, prompt_tokens)
        full = blocks[: min(prompt_tokens // self.block_size, self.capacities[0])]
        pinned = set(full)
        gpu, changes = self.tiers[0], hit.changes
        missing = [block for block in full if block not in gpu]
        over = len(gpu) + len(missing) - self.capacities[0]
        if over > 0:
            victims = [block for block in gpu if block not in pinned][:over]
            for victim in victims:
                if self.threshold is None and len(self.tiers) > 1:
                    self._copy_down(1, [victim], pinned, changes)
                self._drop(0, victim, changes)
        for block in missing:
            gpu[block] = None
            changes.append((block, 0, True))
        uses = self.uses
        for block in reversed(full):  # the prefix is touched last, so it is evicted last
            gpu.move_to_end(block)
            uses[block] = uses.get(block, 0) + 1
        if self.threshold is not None and len(self.tiers) > 1:
            due = [block for block in full if uses[block] >= self.threshold]
            self._copy_down(1, due, pinned, changes)
        for tier in self.tiers[1:]:
            for block in reversed(full):
                if block in tier:
                    tier.move_to_end(block)
        return hit

    def _copy_down(self, level: int, blocks: list[int], pinned: set[int], changes: list) -> None:
        """Copy the blocks tier `level` lacks into it, as many as fit after evicting what may
        go (never the request's own; from SGLang's host tier never a GPU-resident block), and
        what landed on to the tier below."""
        tier = self.tiers[level]
        new = [block for block in blocks if block not in tier]
        if not new:
            return
        over = len(tier) + len(new) - self.capacities[level]
        if over > 0:
            spare = self.tiers[0] if level == 1 and self.spare_gpu else ()
            victims = []
            for block in tier:
                if len(victims) == over:
                    break
                if block not in pinned and block not in spare:
                    victims.append(block)
            for victim in victims:
                self._drop(level, victim, changes)
        stored = new[: max(self.capacities[level] - len(tier), 0)]
        for block in stored:
            tier[block] = None
            changes.append((block, level, True))
        if stored and level + 1 < len(self.tiers):
            self._copy_down(level + 1, stored, pinned, changes)

    def _drop(self, level: int, block: int, changes: list) -> None:
        del self.tiers[level][block]
        if level == 0:
            del self.uses[block]
        changes.append((block, level, False))
