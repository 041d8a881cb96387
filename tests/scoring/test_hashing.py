"""Block hashing is kthena's standardized hash (compatibility.md 2.1)."""

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scoring.hashing import block_hashes, hash_block
from tests.scoring.vectors import KTHENA


@pytest.mark.parametrize("vector", KTHENA["hash_vectors"])
def test_it_hashes_one_block_like_kthena(vector: dict[str, Any]) -> None:
    assert hash_block(vector["tokens"]) == vector["hash"]


@pytest.mark.parametrize("vector", KTHENA["chunk_vectors"])
def test_it_splits_and_hashes_a_prompt_like_kthena(vector: dict[str, Any]) -> None:
    hashes = block_hashes(vector["tokens"], vector["block_size"], vector["max_blocks"])
    assert hashes == vector["hashes"]


def test_it_hashes_no_tokens_to_no_blocks() -> None:
    assert block_hashes([]) == []


def test_it_rejects_a_block_size_below_one() -> None:
    with pytest.raises(ValueError, match="block_size"):
        block_hashes([1, 2, 3], block_size=0)


@given(
    tokens=st.lists(st.integers(0, 2**32 - 1), max_size=300),
    block_size=st.integers(1, 20),
    max_blocks=st.integers(0, 40),
)
def test_it_hashes_every_kept_block_as_hash_block_does(
    tokens: list[int], block_size: int, max_blocks: int
) -> None:
    """The packed-once fast path equals hashing each block (last partial one included) alone."""
    expected = [
        hash_block(tokens[start : start + block_size])
        for start in range(0, len(tokens), block_size)
    ][:max_blocks]
    assert block_hashes(tokens, block_size, max_blocks) == expected


def test_it_hashes_a_real_vllm_block_to_the_key_kthena_reads() -> None:
    store = KTHENA["realistic_vllm_store"]
    assert hash_block(store["token_ids"]) == store["standardized_hash"]
    assert block_hashes(store["token_ids"]) == [store["standardized_hash"]]
