"""Deterministic blocks for ingestion tests: tokens, engine hashes and standardized hashes."""

from kvadmin.fleet.wire import Encoding, WireEvent, block_removed, block_stored
from scoring.hashing import hash_block
from scoring.keys import block_key
from tests.index import MODEL


def tokens(n: int) -> list[int]:
    """16 tokens unique to block number n."""
    return list(range(n * 16, n * 16 + 16))


def engine_hash(n: int) -> int:
    """A vLLM-style unsigned 64-bit engine hash (>= 2**63) for block n."""
    return 2**63 + 1000 + n


def std(n: int) -> int:
    return hash_block(tokens(n))


def key(n: int) -> str:
    return block_key(MODEL, std(n))


def stored(*blocks: int, medium: str = "GPU", encoding: Encoding = Encoding.VLLM_MAP) -> WireEvent:
    token_ids = [t for n in blocks for t in tokens(n)]
    hashes = [engine_hash(n) for n in blocks]
    return block_stored(encoding, hashes, token_ids, 16, medium=medium)


def removed(*blocks: int, medium: str = "GPU", encoding: Encoding = Encoding.VLLM_MAP) -> WireEvent:
    return block_removed(encoding, [engine_hash(n) for n in blocks], medium=medium)
