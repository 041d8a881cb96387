"""Block keys are the ones kthena's router reads (compatibility.md 2.2)."""

from typing import Any

import pytest

from scoring.keys import block_key, block_keys
from tests.scoring.vectors import KTHENA


@pytest.mark.parametrize("vector", KTHENA["block_keys"])
def test_it_builds_kthena_block_keys(vector: dict[str, Any]) -> None:
    assert block_key(vector["model"], vector["hash"]) == vector["key"]


def test_it_builds_a_requests_keys_in_block_order() -> None:
    vectors = [v for v in KTHENA["block_keys"] if v["model"] == "test-model"]
    keys = block_keys("test-model", [v["hash"] for v in vectors])
    assert keys == [v["key"] for v in vectors]


def test_it_builds_the_key_of_a_real_vllm_block() -> None:
    store = KTHENA["realistic_vllm_store"]
    key = block_key(store["model"], store["standardized_hash"])
    assert key == store["writes"]["block_key"]
