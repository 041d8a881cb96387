"""Tier-weighted scores equal those of kthena's tier-weight extension (compatibility.md 2.4,
2.5)."""

from typing import Any

import pytest

from scoring.keys import block_value
from scoring.score import score_pods
from scoring.weights import TierWeights
from tests.scoring.vectors import KTHENA, named

WRITTEN_AT = 1703123456


@pytest.mark.parametrize("vector", KTHENA["weighted_scores"])
def test_it_adds_block_weights_in_block_order(vector: dict[str, Any]) -> None:
    """One medium per distinct weight; the pod holds the first len(weights) blocks."""
    media = {weight: f"tier-{index}" for index, weight in enumerate(sorted(set(vector["weights"])))}
    weights = TierWeights.from_config({medium: weight for weight, medium in media.items()})
    blocks = list(range(vector["total"]))
    owners = {
        block: {"pod": block_value(WRITTEN_AT, media[weight])}
        for block, weight in zip(blocks, vector["weights"], strict=False)
    }
    result = score_pods(blocks, owners, None, {}, weights)
    assert result.scores == {"pod": vector["score"]}


@pytest.mark.parametrize("table", named(KTHENA["weighted_tables"]))
def test_it_scores_kthenas_weighted_tables(table: dict[str, Any]) -> None:
    owners = {
        int(block): {pod: block_value(WRITTEN_AT, medium) for pod, medium in pods.items()}
        for block, pods in table["owners"].items()
    }
    weights = TierWeights.from_config(table["weights"])
    assert score_pods(table["blocks"], owners, None, {}, weights).scores == table["expected"]


def test_a_weight_zero_block_continues_the_run() -> None:
    weights = TierWeights.from_config({"disk": 0.0})
    owners = {1: {"a": "5|GPU"}, 2: {"a": "5|DISK"}, 3: {"a": "5|GPU"}}
    result = score_pods([1, 2, 3], owners, None, {}, weights)
    assert result.pods[0].matched_blocks == 3
    assert result.scores == {"a": 66}


def test_a_pod_whose_blocks_all_weigh_zero_stays_with_score_zero() -> None:
    weights = TierWeights.from_config({"disk": 0})
    result = score_pods([1], {1: {"a": "5|DISK"}}, None, {}, weights)
    assert result.scores == {"a": 0}


def test_the_sum_is_the_ieee_sum_in_block_order() -> None:
    """0.1 added ten times is not 1.0, and that is what the router computes."""
    weights = TierWeights.from_config({"slow": 0.1})
    owners = {block: {"a": "5|SLOW"} for block in range(10)}
    result = score_pods(list(range(10)), owners, None, {}, weights)
    total = 0.1
    for _ in range(9):
        total += 0.1
    assert result.pods[0].weighted_sum == total != 1.0
    assert result.scores == {"a": int((total / 10) * 100)}


def test_a_full_weight_run_after_a_fractional_sum_is_still_added_block_by_block() -> None:
    """0.01 then sixteen 1.0 additions is 16.009999999999998, not 0.01 + 16."""
    weights = TierWeights.from_config({"tiny": 0.01})
    owners = {0: {"a": "5|TINY"}} | {block: {"a": "5|GPU"} for block in range(1, 17)}
    result = score_pods(list(range(17)), owners, None, {}, weights)
    total = 0.01
    for _ in range(16):
        total += 1.0
    assert result.pods[0].weighted_sum == total != 0.01 + 16
