"""Unweighted prefix scores equal kthena's, float artefacts included (compatibility.md 2.4)."""

from typing import Any

import pytest

from scoring.score import score_pods
from scoring.weights import TierWeights
from tests.scoring.vectors import KTHENA, named

LEGACY_VALUE = "1703123456"  # no medium: weighs the fallback, 1.0


@pytest.mark.parametrize("vector", KTHENA["unweighted_scores"])
def test_it_scores_matched_over_hashed_blocks(vector: dict[str, Any]) -> None:
    blocks = list(range(vector["total"]))
    owners = {block: {"pod": LEGACY_VALUE} for block in blocks[: vector["matched"]]}
    result = score_pods(blocks, owners, None, {}, TierWeights())
    assert result.scores == {"pod": vector["score"]}


@pytest.mark.parametrize("table", named(KTHENA["score_tables"]))
def test_it_scores_kthenas_tables(table: dict[str, Any]) -> None:
    owners = {
        int(block): {pod: LEGACY_VALUE for pod in pods} for block, pods in table["owners"].items()
    }
    result = score_pods(table["blocks"], owners, None, {}, TierWeights())
    assert result.scores == table["expected"]


def test_pods_without_the_first_block_are_absent_not_zero() -> None:
    result = score_pods([1, 2], {2: {"late": LEGACY_VALUE}}, None, {}, TierWeights())
    assert result.scores == {}
    assert result.longest_match == 0


def test_only_candidates_score() -> None:
    owners = {1: {"a": LEGACY_VALUE, "b": LEGACY_VALUE}}
    result = score_pods([1], owners, {"a", "elsewhere"}, {}, TierWeights())
    assert result.scores == {"a": 100}
    assert result.dropped_non_candidates == ("b",)


def test_a_repeated_block_hash_is_matched_at_every_position() -> None:
    """Identical content at two positions shares one key (compatibility.md 2.1)."""
    owners = {1: {"a": LEGACY_VALUE}, 2: {"a": LEGACY_VALUE}}
    result = score_pods([1, 2, 1, 3], owners, None, {}, TierWeights())
    assert result.scores == {"a": 75}
