"""Standardized block hashing (compatibility.md 2.1), identical to kthena's router.

SHA-256 over the block's token ids as 4-byte big-endian unsigned integers; the first 8
digest bytes as a big-endian unsigned integer with the top bit cleared. No parent chaining.
"""

from collections.abc import Sequence
from hashlib import sha256
from struct import Struct, pack

DEFAULT_BLOCK_SIZE = 16
DEFAULT_MAX_BLOCKS = 128

_TOP_BIT_CLEAR = 0x7FFFFFFFFFFFFFFF
_structs: dict[int, Struct] = {}
_first_u64 = Struct(">Q").unpack_from


def _packer(n: int) -> Struct:
    packer = _structs.get(n)
    if packer is None:
        packer = _structs[n] = Struct(f">{n}I")
    return packer


def hash_block(tokens: Sequence[int]) -> int:
    """Hash one block of token ids; the empty block hashes to 0."""
    if not tokens:
        return 0
    digest = sha256(_packer(len(tokens)).pack(*tokens)).digest()
    return int.from_bytes(digest[:8], "big") & _TOP_BIT_CLEAR


def block_hashes(
    tokens: Sequence[int],
    block_size: int = DEFAULT_BLOCK_SIZE,
    max_blocks: int = DEFAULT_MAX_BLOCKS,
) -> list[int]:
    """Split tokens into blocks from token 0 (last partial block included), hash each,
    and keep at most `max_blocks` of them.

    Same hashes as `hash_block` per block, but the kept tokens are packed once and the
    blocks hashed as slices of those bytes: this runs on every scoring request. A block's
    hash is a function of its bytes alone, and most blocks of a request were hashed before
    (the system prompt, the conversation so far), so the hashes of the latest blocks are kept
    by their bytes (`_HASHED`): a lookup costs a quarter of a SHA-256.
    """
    if block_size <= 0:
        raise ValueError("block_size must be positive")
    end = min(len(tokens), block_size * max_blocks)
    if end <= 0:
        return []
    data = pack(f">{end}I", *tokens[:end])
    step = 4 * block_size
    parts = [data[i : i + step] for i in range(0, len(data), step)]
    hashes = list(map(_HASHED.get, parts))
    if None in hashes:
        if len(_HASHED) > _HASHED_MAX:
            _HASHED.clear()
        for position, part in enumerate(parts):
            if hashes[position] is None:
                hashes[position] = _HASHED[part] = (
                    _first_u64(sha256(part).digest())[0] & _TOP_BIT_CLEAR
                )
    return hashes  # type: ignore[return-value]  (no None is left)


_HASHED: dict[bytes, int] = {}
"""Block bytes -> hash, of the blocks hashed lately (at most about _HASHED_MAX: emptied when
fuller: about 3 MB)."""
_HASHED_MAX = 16_384
