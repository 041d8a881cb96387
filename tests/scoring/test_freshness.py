"""Ownership written at or before a pod's last (re)start is dropped (compatibility.md 2.4 step
1)."""

from typing import Any

import pytest

from scoring.score import score_pods
from scoring.values import is_stale, parse_value
from scoring.weights import TierWeights
from tests.scoring.vectors import KTHENA

FRESHNESS = KTHENA["freshness"]
STARTED_AT: int = FRESHNESS["started_at"]


@pytest.mark.parametrize("case", FRESHNESS["cases"], ids=lambda case: case["value"])
def test_it_keeps_only_ownership_written_after_the_start(case: dict[str, Any]) -> None:
    assert is_stale(parse_value(case["value"]), STARTED_AT) is not case["kept"]


@pytest.mark.parametrize("case", FRESHNESS["cases"], ids=lambda case: case["value"])
def test_a_stale_owner_is_reported_and_does_not_score(case: dict[str, Any]) -> None:
    result = score_pods(
        [7], {7: {"p.ns": case["value"]}}, None, {"p.ns": STARTED_AT}, TierWeights()
    )
    if case["kept"]:
        assert [pod.pod for pod in result.pods] == ["p.ns"]
        assert result.dropped_stale == ()
    else:
        assert result.scores == {}
        assert result.dropped_stale == ("p.ns",)


def test_a_stale_block_cuts_a_match_short() -> None:
    """Fresh on blocks 1 and 2, written before the restart on block 3."""
    owners = {1: {"a": "2000"}, 2: {"a": "2000"}, 3: {"a": "900"}, 4: {"a": "2000"}}
    result = score_pods([1, 2, 3, 4], owners, None, {"a": 1000}, TierWeights())
    assert result.scores == {"a": 50}
    assert result.dropped_stale == ("a",)


def test_non_candidates_are_dropped_before_freshness_matters() -> None:
    owners = {1: {"in": "2000", "out": "900"}}
    result = score_pods([1], owners, {"in"}, {"in": 1000, "out": 1000}, TierWeights())
    assert result.scores == {"in": 100}
    assert result.dropped_non_candidates == ("out",)
    assert result.dropped_stale == ()


def test_only_owners_that_could_have_scored_are_reported_as_dropped() -> None:
    """A stale or non-candidate owner of a later block, not matching by then, cost nothing."""
    owners = {1: {"a": "2000"}, 2: {"a": "2000", "b": "900", "c": "2000"}}
    result = score_pods([1, 2], owners, {"a", "b"}, {"b": 1000}, TierWeights())
    assert result.dropped_non_candidates == ()
    assert result.dropped_stale == ()
