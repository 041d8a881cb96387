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
  compute). An evicted GPU block is first offloaded to the next tier if it is not already there
  (write-back): vLLM announces it with a placeholder store (`token_ids=[]`, `block_size=0`,
  `medium="CPU"`, engine hash only), SGLang with a full store in that medium. Then
  `BlockRemoved(medium="GPU")`. Lower tiers evict the same way into the tier below, and the last
  tier's evictions are plain removals. One removal event per evicted block.
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
        """Serve one prompt: measure its hit, then make its blocks resident in GPU."""
        chain = self._chain(token_ids)
        hit = self._hit(chain, len(token_ids))
        result = ServeResult(len(token_ids), sum(hit.values()), hit)
        pinned = {b.key for b in chain}
        for block in chain:
            for medium in self.media[1:]:
                if block.key in self._lru[medium]:
                    self._lru[medium].move_to_end(block.key)
        gpu = self._lru[GPU]
        missing = [i for i, b in enumerate(chain) if b.key not in gpu]
        while len(gpu) + len(missing) > self.tiers[0].capacity:
            victim = next(k for k in gpu if k not in pinned)
            self._evict(0, victim, pinned, result.events)
        for i in missing:
            self._blocks[chain[i].key] = chain[i]
            gpu[chain[i].key] = None
        for block in reversed(chain):
            gpu.move_to_end(block.key)
        result.events += self._gpu_stores(chain, missing)
        return result

    def clear(self) -> list[Event]:
        """Drop every block in every tier (an engine's reset_prefix_cache)."""
        for lru in self._lru.values():
            lru.clear()
        self._blocks.clear()
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

    def _evict(self, level: int, key: str, pinned: set[str], events: list[Event]) -> None:
        """Remove `key` from tier `level`, first offloading it to the tier below if it has room
        (made by evicting that tier's least recently used unpinned block)."""
        medium = self.media[level]
        if level + 1 < len(self.tiers):
            below = self.tiers[level + 1]
            lru = self._lru[below.medium]
            if key in lru:
                lru.move_to_end(key)
            else:
                while len(lru) >= below.capacity:
                    victim = next((k for k in lru if k not in pinned), None)
                    if victim is None:
                        break
                    self._evict(level + 1, victim, pinned, events)
                if len(lru) < below.capacity:
                    lru[key] = None
                    events.append(self._offload_store(key, below.medium))
        del self._lru[medium][key]
        events.append(BlockRemoved((key,), medium))
        if not any(key in lru for lru in self._lru.values()):
            del self._blocks[key]

    def _offload_store(self, key: str, medium: str) -> BlockStored:
        if self.kind == "vllm":
            return BlockStored((key,), medium=medium)
        block = self._blocks[key]
        return BlockStored((key,), block.tokens, self.block_size, medium, block.parent)

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
