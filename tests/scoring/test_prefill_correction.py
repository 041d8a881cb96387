"""The estimate at load when the parameters lag the pods (issue 33 item 4): the delivered
correction of a pod's prefill estimates (`corrected_prefill_log`, learned against one weights
version; outcome_record.lua against it: tests/routing/test_wait_correction.py), priced by
`load_reading` and `choose_pod`, and the resync counting the prefill already running at the
scrape (`resynced_busy_until`, queue_resync.lua)."""

import math
import time

import pytest

from scoring.keys import queue_key
from scoring.policy import PodLoad, RouteRequest, choose_pod
from scoring.route_state import (
    PREFILL_FACTOR_BOUNDS,
    QUEUE_RESYNC,
    WAIT_LEARNING,
    WAIT_STEP_BOUND,
    RawPodState,
    corrected_prefill_log,
    load_reading,
    resynced_busy_until,
)
from scoring.weights import TierWeights

NOW_MS = 1_700_000_000_000


def test_outcomes_of_a_pod_slower_than_predicted_move_its_factor_to_the_ratio() -> None:
    """A pod that takes twice the predicted prefill, no wait: the factor climbs to 2."""
    learned: tuple[float, int | None] = (0.0, None)
    for _ in range(400):
        predicted = 0.05 * math.exp(learned[0])  # the decision's prefill, corrected already
        learned = corrected_prefill_log(learned, 3, 0.0, predicted, 0.1)
    assert math.exp(learned[0]) == pytest.approx(2.0, rel=0.01) and learned[1] == 3


def test_one_outlier_moves_it_a_bounded_step_and_its_bounds_hold() -> None:
    assert corrected_prefill_log((0.0, 1), 1, 0.0, 0.05, 3600.0) == (
        pytest.approx(WAIT_LEARNING * WAIT_STEP_BOUND),
        1,
    )
    learned: tuple[float, int | None] = (0.0, 1)
    for _ in range(1000):
        learned = corrected_prefill_log(learned, 1, 0.0, 0.05, 1e-9)
    assert learned[0] == pytest.approx(math.log(PREFILL_FACTOR_BOUNDS[0]))


def test_an_outcome_with_a_real_predicted_wait_teaches_the_wait_not_the_prefill() -> None:
    assert corrected_prefill_log((0.3, 1), 1, 0.5, 0.1, 5.0) == (0.3, 1)


def test_a_later_version_restarts_the_factor_and_an_earlier_one_does_not_count() -> None:
    """Calibration moved the parameters (version 2): what version 1's factor had learned is
    in them already, so version 2's outcomes start again from 1; a late outcome of version 1
    changes nothing."""
    restarted, version = corrected_prefill_log((0.6, 1), 2, 0.0, 0.05, 0.05)
    assert (restarted, version) == (pytest.approx(0.0), 2)
    assert corrected_prefill_log((0.2, 2), 1, 0.0, 0.05, 0.5) == (0.2, 2)


def _raw(**fields: str) -> RawPodState:
    return RawPodState(busy_until_ms=str(NOW_MS + 300), prefill_ms="30", **fields)


def test_the_reading_applies_the_factor_only_to_the_version_it_was_learned_against() -> None:
    doubled = {"prefill_log": repr(math.log(2)), "prefill_version": "4"}
    assert load_reading(_raw(**doubled), NOW_MS, 3.0, 0.2, 4).load.prefill_factor == (
        pytest.approx(2.0)
    )
    assert load_reading(_raw(**doubled), NOW_MS, 3.0, 0.2, 5).prefill_factor == 1.0
    assert (
        load_reading(_raw(prefill_log=repr(math.log(2))), NOW_MS, 3.0, 0.2, 4).prefill_factor == 1.0
    )


@pytest.mark.parametrize("hostile", ["1e308", "inf", "nan", "x"])
def test_a_hostile_factor_stays_within_its_bounds(hostile: str) -> None:
    factor = load_reading(
        _raw(prefill_log=hostile, prefill_version="1"), NOW_MS, 3.0, 0.2, 1
    ).prefill_factor
    assert PREFILL_FACTOR_BOUNDS[0] <= factor <= PREFILL_FACTOR_BOUNDS[1]


def test_the_policy_prices_a_pods_prefill_with_its_factor() -> None:
    """Two idle pods holding nothing: the one whose prefills ran twice as long loses."""
    request = RouteRequest(
        "m", [1, 2], 32, 16, ["fast", "slow"], {}, {}, {},
        {"fast": PodLoad(), "slow": PodLoad(prefill_factor=2.0)},
    )  # fmt: skip
    choice = choose_pod(request, TierWeights())
    costs = {c.pod: c for c in choice.candidates}
    assert choice.chosen == "fast"
    assert costs["slow"].prefill_s == pytest.approx(2 * costs["fast"].prefill_s)


def test_the_resync_counts_the_prefill_running_at_the_scrape() -> None:
    """The queue predicted 100 ms of work beyond 2 waiting requests of 30 ms: a prefill is
    running, priced at most one mean prefill; an engine running nothing is idle."""
    busy = NOW_MS + 160.0
    assert resynced_busy_until(busy, NOW_MS, 2, 5, 30.0) == NOW_MS + 60 + 30
    assert resynced_busy_until(NOW_MS + 70.0, NOW_MS, 2, 5, 30.0) == NOW_MS + 60 + 10
    assert resynced_busy_until(busy, NOW_MS, 0, 0, 30.0) == NOW_MS
    assert resynced_busy_until(0.0, NOW_MS, 2, 5, 30.0) == NOW_MS + 60


def test_queue_resync_lua_follows_the_rule(redis_client) -> None:
    key = queue_key("vllm-0")
    ahead = time.time() * 1000 + 10_000
    redis_client.hset(key, mapping={"busy_until_ms": repr(ahead), "prefill_ms": "40"})
    before = time.time() * 1000
    busy = float(QUEUE_RESYNC(redis_client, [key], [5, 3]))
    after = time.time() * 1000
    assert resynced_busy_until(ahead, before - 1, 5, 3, 40.0) <= busy
    assert busy <= resynced_busy_until(ahead, after, 5, 3, 40.0)
    assert busy >= before - 1 + 5 * 40 + 40  # the running prefill counted
    redis_client.hset(key, "busy_until_ms", repr(time.time() * 1000 + 10_000))
    idle = float(QUEUE_RESYNC(redis_client, [key], [0, 0]))
    assert idle <= time.time() * 1000
