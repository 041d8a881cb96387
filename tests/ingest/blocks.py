"""Wire events of deterministic blocks (tests/index.py's), for tests that publish to a loop."""

from kvadmin.fleet.wire import Encoding, WireEvent, block_removed, block_stored
from scoring.keys import block_key
from tests.index import MODEL, block_tokens, engine_hash, std


def key(n: int) -> str:
    """Block n's matrix key under MODEL."""
    return block_key(MODEL, std(n))


def stored(*blocks: int, medium: str = "GPU", encoding: Encoding = Encoding.VLLM_MAP) -> WireEvent:
    token_ids = [t for n in blocks for t in block_tokens(n)]
    hashes = [int(engine_hash(n)) for n in blocks]
    return block_stored(encoding, hashes, token_ids, 16, medium=medium)


def removed(*blocks: int, medium: str = "GPU", encoding: Encoding = Encoding.VLLM_MAP) -> WireEvent:
    return block_removed(encoding, [int(engine_hash(n)) for n in blocks], medium=medium)
