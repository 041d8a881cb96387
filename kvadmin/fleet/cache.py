"""A pure model of one engine pod's prefix cache: tiers, LRU eviction, offload, and the KV events
the engine would publish for each change. No sockets: `pod.py` publishes what this returns.

Behaviour, chosen to match real engines where they agree:

- Only full blocks are cached. Blocks are identified by the engine's own CHAINED hash (a block's
  hash covers its parent's hash and its tokens), so the same 16 tokens under different prefixes
  are different blocks. vLLM sends the last 8 digest bytes as an unsigned int (values >= 2^63
  occur) or, with `bytes_hashes`, the raw 32-byte digest; SGLang sends the first 8 as a signed int.
- Serving a prompt: the hit is the leading run of blocks held in any tier, each counted in the
  best tier holding it. Like vLLM and SGLang, at least one prompt token is always recomputed, so
  a fully cached block-aligned prompt hits one block less than it holds.
- After serving, every full prompt block (up to the GPU capacity) is in GPU: new blocks are
  computed, lower-tier hits are loaded back (promoted). A promoted block keeps its lower-tier copy,
  as vLLM's offloading connector and SGLang's HiCache do; the copy's LRU position is refreshed.
  Newly placed GPU blocks emit `BlockStored(medium="GPU")` with tokens: vLLM one event per
  contiguous run, SGLang one event per page.
- GPU is LRU. A request's blocks are touched last-to-first, so a prefix outlives its tail, as in
  vLLM's free queue. Evictions happen before the new blocks are stored (allocation precedes
  compute); an evicted GPU block emits `BlockRemoved(medium="GPU")`, one event per block.
- Copies to the lower tiers follow the engine's write policy (`fleet.offload`, default the
  engine's own: write_through for both). Written through, the request's blocks are copied to the
  first lower tier after its GPU stores; written back, a GPU block is copied down just before its
  removal. vLLM announces a copy with a placeholder store (`token_ids=[]`, `block_size=0`,
  `medium="CPU"`, engine hashes only, one event per store) and an eviction with one removal of
  the batch; SGLang with a full store in that medium, and one removal per page. SGLang's host
  tier evicts only blocks the GPU no longer holds, and everything copied to host memory goes on
  to DISK; vLLM's CPU tier is an LRU of its own. The last tier's evictions are plain removals.
- A request's own blocks are never evicted to make room for it; a prompt longer than the GPU
  caches only its first `capacity` blocks.
- Generated tokens are not cached (a simplification: only prompt blocks).
"""

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from hashlib import sha256
from struct import Struct
from typing import Literal

from kvadmin.fleet.offload import HOST_EVICTS_GPU_RESIDENT, backup_threshold, write_policy_for
from kvadmin.index.events import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    Event,
    engine_hash_text,
)
from scoring.hashing import DEFAULT_BLOCK_SIZE, hash_block

EngineKind = Literal["vllm", "sglang"]
ENGINE_KINDS: tuple[EngineKind, ...] = ("vllm", "sglang")

GPU = "GPU"
CPU = "CPU"
CPU_PINNED = "CPU_PINNED"
DISK = "DISK"

_U64 = 1 << 64
_TOKEN = Struct(">I")


@dataclass(frozen=True, slots=True)
class Tier:
    medium: str
    capacity: int


def lower_tiers_for(kind: EngineKind, cpu_blocks: int = 0, disk_blocks: int = 0) -> list[Tier]:
    """The lower tiers each engine kind reports: vLLM's offloading connector `CPU`; SGLang's
    HiCache `CPU_PINNED` then `DISK`. Zero capacity means the tier is absent."""
    if kind == "vllm":
        if disk_blocks:
            raise ValueError("the simulated vLLM offloading connector has a CPU tier only")
        return [Tier(CPU, cpu_blocks)] if cpu_blocks else []
    tiers = [Tier(CPU_PINNED, cpu_blocks)] if cpu_blocks else []
    return tiers + ([Tier(DISK, disk_blocks)] if disk_blocks else [])


def chain_digest(parent: bytes, tokens: Sequence[int]) -> bytes:
    """The engine-internal chained block digest: SHA-256 over the parent digest and the tokens."""
    return sha256(parent + b"".join(_TOKEN.pack(t) for t in tokens)).digest()


def external_hash(kind: EngineKind, digest: bytes, bytes_hashes: bool = False) -> int | bytes:
    """The block hash as the engine puts it in events."""
    if kind == "sglang":
        value = int.from_bytes(digest[:8], "big")
        return value - _U64 if value >= 1 << 63 else value
    if bytes_hashes:
        return digest
    return int.from_bytes(digest[-8:], "big")


@dataclass(frozen=True, slots=True)
class _Block:
    key: str
    std_hash: int
    tokens: tuple[int, ...]
    parent: str | None


@dataclass(slots=True)
class ServeResult:
    """What serving one prompt did: the hit (tokens, by medium) and the events to publish."""

    prompt_tokens: int
    cached_tokens: int
    hit_tokens: dict[str, int]
    events: list[Event] = field(default_factory=list)


class CacheModel:
    """One engine's (one DP rank's) prefix cache."""

    def __init__(
        self,
        kind: EngineKind,
        gpu_blocks: int,
        lower_tiers: Sequence[Tier] = (),
        block_size: int = DEFAULT_BLOCK_SIZE,
        bytes_hashes: bool = False,
        hash_seed: bytes = b"",
        write_policy: str | None = None,
    ) -> None:
        if kind not in ENGINE_KINDS:
            raise ValueError(f"unknown engine kind {kind!r}")
        if bytes_hashes and kind != "vllm":
            raise ValueError("only vLLM can send raw digest bytes as block hashes")
        tiers = [Tier(GPU, gpu_blocks), *lower_tiers]
        if any(t.capacity <= 0 for t in tiers) or block_size <= 0:
            raise ValueError("tier capacities and the block size must be positive")
        self.kind: EngineKind = kind
        self.block_size = block_size
        self.bytes_hashes = bytes_hashes
        self.tiers = tiers
        self.write_policy = write_policy_for(kind, write_policy)
        self._threshold = backup_threshold(self.write_policy)
        self._uses: dict[str, int] = {}
        """Per GPU block, the requests that used it since it was placed (SGLang's hit count)."""
        # The parent of a prompt's first block, vLLM's NONE_HASH: fixed by the seed.
        self._root = sha256(b"kvadmin-sim-root" + hash_seed).digest()
        self._lru: dict[str, OrderedDict[str, None]] = {t.medium: OrderedDict() for t in tiers}
        self._blocks: dict[str, _Block] = {}

    @property
    def media(self) -> list[str]:
        return [t.medium for t in self.tiers]

    def contents(self) -> set[tuple[int, str]]:
        """Ground truth for the index: (standardized hash, medium) of every block held."""
        return {(self._blocks[key].std_hash, m) for m, lru in self._lru.items() for key in lru}

    def engine_contents(self) -> set[tuple[str, str]]:
        """(engine hash text, medium) of every block held."""
        return {(key, m) for m, lru in self._lru.items() for key in lru}

    def blocks_of(self, token_ids: Sequence[int]) -> list[str]:
        """Engine hash texts of the prompt's full blocks (up to the GPU's capacity), in order."""
        return [b.key for b in self._chain(token_ids)]

    def lookup(self, token_ids: Sequence[int]) -> dict[str, int]:
        """The hit `serve` would report for this prompt, by medium, changing nothing."""
        return self._hit(self._chain(token_ids), len(token_ids))

    def serve(self, token_ids: Sequence[int]) -> ServeResult:
        """Serve one prompt: measure its hit, make its blocks resident in GPU, then copy them
        down as the write policy says."""
        chain = self._chain(token_ids)
        hit = self._hit(chain, len(token_ids))
        result = ServeResult(len(token_ids), sum(hit.values()), hit)
        pinned = {b.key for b in chain}
        gpu = self._lru[GPU]
        missing = [i for i, b in enumerate(chain) if b.key not in gpu]
        while len(gpu) + len(missing) > self.tiers[0].capacity:
            victim = next(k for k in gpu if k not in pinned)
            if self._threshold is None and len(self.tiers) > 1:
                self._copy_down(1, [victim], pinned, result.events)  # written back
            self._drop(0, victim)
            result.events.append(BlockRemoved((victim,), GPU))
        for i in missing:
            self._blocks[chain[i].key] = chain[i]
            gpu[chain[i].key] = None
        for block in reversed(chain):
            gpu.move_to_end(block.key)
            self._uses[block.key] = self._uses.get(block.key, 0) + 1
        result.events += self._gpu_stores(chain, missing)
        if self._threshold is not None and len(self.tiers) > 1:
            due = [b.key for b in chain if self._uses[b.key] >= self._threshold]
            self._copy_down(1, due, pinned, result.events)
        for block in reversed(chain):  # the lower-tier copies, refreshed like the GPU's
            for medium in self.media[1:]:
                if block.key in self._lru[medium]:
                    self._lru[medium].move_to_end(block.key)
        return result

    def clear(self) -> list[Event]:
        """Drop every block in every tier (an engine's reset_prefix_cache)."""
        for lru in self._lru.values():
            lru.clear()
        self._blocks.clear()
        self._uses.clear()
        return [AllBlocksCleared()]

    def _chain(self, token_ids: Sequence[int]) -> list[_Block]:
        """The prompt's full blocks, at most as many as the GPU holds."""
        blocks: list[_Block] = []
        parent, parent_key = self._root, None
        size = self.block_size
        end = min(len(token_ids), size * self.tiers[0].capacity)
        for start in range(0, end - size + 1, size):
            tokens = tuple(token_ids[start : start + size])
            digest = chain_digest(parent, tokens)
            key = engine_hash_text(external_hash(self.kind, digest, self.bytes_hashes))
            blocks.append(_Block(key, hash_block(tokens), tokens, parent_key))
            parent, parent_key = digest, key
        return blocks

    def _hit(self, chain: list[_Block], prompt_tokens: int) -> dict[str, int]:
        hit: dict[str, int] = {}
        for block in chain[: max((prompt_tokens - 1) // self.block_size, 0)]:
            medium = next((m for m in self.media if block.key in self._lru[m]), None)
            if medium is None:
                break
            hit[medium] = hit.get(medium, 0) + self.block_size
        return hit

    def _copy_down(
        self, level: int, keys: list[str], pinned: set[str], events: list[Event]
    ) -> None:
        """Copy the blocks of `keys` tier `level` lacks into it, as many as it has room for
        after evicting what it may; what reached host memory goes on to the tier below it (an
        SGLang storage backend writes every completed host backup)."""
        tier = self.tiers[level]
        lru = self._lru[tier.medium]
        new = [key for key in dict.fromkeys(keys) if key not in lru]
        if not new:
            return
        self._make_room(level, len(lru) + len(new) - tier.capacity, pinned, events)
        stored = new[: max(tier.capacity - len(lru), 0)]
        for key in stored:
            lru[key] = None
        if not stored:
            return
        if self.kind == "vllm":
            events.append(BlockStored(tuple(stored), medium=tier.medium))
        else:
            for key in stored:
                block = self._blocks[key]
                events.append(
                    BlockStored((key,), block.tokens, self.block_size, tier.medium, block.parent)
                )
        if level + 1 < len(self.tiers):
            self._copy_down(level + 1, stored, pinned, events)

    def _make_room(self, level: int, needed: int, pinned: set[str], events: list[Event]) -> None:
        """Evict up to `needed` of tier `level`'s least recently used blocks that may go: never
        the request's own, and for SGLang's host tier never one the GPU still holds."""
        if needed <= 0:
            return
        medium = self.media[level]
        spare_gpu = level == 1 and not HOST_EVICTS_GPU_RESIDENT[self.kind]
        gpu = self._lru[GPU]
        victims = []
        for key in self._lru[medium]:
            if len(victims) == needed:
                break
            if key not in pinned and not (spare_gpu and key in gpu):
                victims.append(key)
        for key in victims:
            self._drop(level, key)
        if victims and self.kind == "vllm":
            events.append(BlockRemoved(tuple(victims), medium))
        elif victims:
            events.extend(BlockRemoved((key,), medium) for key in victims)

    def _drop(self, level: int, key: str) -> None:
        del self._lru[self.media[level]][key]
        if level == 0:
            del self._uses[key]
        if not any(key in lru for lru in self._lru.values()):
            del self._blocks[key]

    def _gpu_stores(self, chain: list[_Block], placed: list[int]) -> list[Event]:
        runs: list[list[int]] = []
        for i in placed:
            if self.kind == "vllm" and runs and runs[-1][-1] == i - 1:
                runs[-1].append(i)
            else:
                runs.append([i])
        return [
            BlockStored(
                tuple(chain[i].key for i in run),
                tuple(t for i in run for t in chain[i].tokens),
                self.block_size,
                GPU,
                chain[run[0]].parent,
            )
            for run in runs
        ]
