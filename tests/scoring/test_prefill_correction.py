"""The estimate at load when the parameters lag the pods (issue 33 item 4): the delivered
correction of a pod's prefill estimates (`corrected_prefill_fit`, a factor and an offset
learned against one weights version; outcome_record.lua against it:
tests/routing/test_wait_correction.py), priced by `load_reading` and `choose_pod`, and the
resync counting the prefill already running at the scrape (`resynced_busy_until`,
queue_resync.lua)."""

import math
import random
import time

import pytest

from scoring.keys import queue_key
from scoring.policy import PodLoad, RouteRequest, choose_pod
from scoring.route_state import (
    PREFILL_FACTOR_BOUNDS,
    PREFILL_OFFSET_BOUNDS,
    PREFILL_OFFSET_MIN_OUTCOMES,
    QUEUE_RESYNC,
    WAIT_LEARNING,
    WAIT_STEP_BOUND,
    PrefillFit,
    RawPodState,
    corrected_prefill_fit,
    load_reading,
    resynced_busy_until,
)
from scoring.weights import TierWeights

NOW_MS = 1_700_000_000_000


def _learn(took, sizes, outcomes: int, fit: PrefillFit | None = None, version: int = 3):
    """`outcomes` idle outcomes of predictions drawn from `sizes` (uncorrected seconds), each
    priced with the correction learned so far; the pod takes `took(size)`."""
    fit, rng = fit or PrefillFit(), random.Random(7)
    for _ in range(outcomes):
        size = rng.choice(sizes)
        predicted = max(fit.factor * size + fit.offset_s, fit.factor * size / 2)
        fit = corrected_prefill_fit(fit, version, 0.0, predicted, size, took(size))
    return fit


def test_outcomes_of_a_pod_slower_than_predicted_move_its_factor_to_the_ratio() -> None:
    """A pod that takes twice the predicted prefill, no wait: the factor climbs to 2, and
    with predictions of one size there is no offset to find."""
    learned = _learn(lambda size: 2 * size, [0.05], 400)
    assert learned.factor == pytest.approx(2.0, rel=0.01) and learned.version == 3
    assert learned.offset_s == pytest.approx(0.0, abs=1e-3)


def test_a_fixed_latency_is_learned_as_an_offset_not_as_a_factor() -> None:
    """Every delivered TTFT 20 ms over the pod's prefill (a gateway's latency), hits of 20 ms
    and misses of 200 ms: the correction finds the 20 ms, and prices a miss and a hit within a
    few percent. A factor alone (the rule before) priced misses a third long at best."""
    learned = _learn(lambda size: size + 0.02, [0.02, 0.2], 600)
    assert learned.offset_s == pytest.approx(0.02, abs=0.004)
    assert learned.factor == pytest.approx(1.0, abs=0.03)
    for size in (0.02, 0.2):
        assert learned.factor * size + learned.offset_s == pytest.approx(size + 0.02, rel=0.05)


def test_a_pod_both_slower_and_behind_a_latency_gets_both() -> None:
    learned = _learn(lambda size: 1.5 * size + 0.03, [0.02, 0.08, 0.3], 800)
    assert learned.factor == pytest.approx(1.5, abs=0.06)
    assert learned.offset_s == pytest.approx(0.03, abs=0.006)


def test_no_offset_before_enough_outcomes() -> None:
    learned = _learn(lambda size: size + 0.02, [0.02, 0.2], PREFILL_OFFSET_MIN_OUTCOMES - 1)
    assert learned.offset_s == 0.0 and learned.outcomes == PREFILL_OFFSET_MIN_OUTCOMES - 1
    assert learned.factor > 1.0  # until then the latency counts as a factor


def test_one_outlier_moves_it_a_bounded_step_and_its_bounds_hold() -> None:
    """A hung request counts as twice the prediction, one outcome among twenty."""
    hung = corrected_prefill_fit(PrefillFit(), 1, 0.0, 0.05, 0.05, 3600.0)
    assert hung.factor == pytest.approx(1 + WAIT_LEARNING * (math.exp(WAIT_STEP_BOUND) - 1))
    assert hung.offset_s == 0.0
    learned = _learn(lambda size: 1e-9, [0.02, 0.2], 1000)
    assert learned.factor == pytest.approx(PREFILL_FACTOR_BOUNDS[0])
    assert PREFILL_OFFSET_BOUNDS[0] <= learned.offset_s <= PREFILL_OFFSET_BOUNDS[1]
    slow = _learn(lambda size: 3600.0, [0.02, 0.2], 1000)
    assert slow.factor == pytest.approx(PREFILL_FACTOR_BOUNDS[1])
    assert slow.offset_s <= PREFILL_OFFSET_BOUNDS[1]


def test_an_outcome_with_a_real_predicted_wait_teaches_the_wait_not_the_prefill() -> None:
    held = PrefillFit(0.3, 0.01, 1, 12, (0.1, 0.1, 0.01, 0.01))
    assert corrected_prefill_fit(held, 1, 0.5, 0.1, 0.1, 5.0) is held


def test_a_later_version_restarts_the_correction_and_an_earlier_one_does_not_count() -> None:
    """Calibration moved the parameters (version 2): what version 1's correction had learned
    is in them already, so version 2's outcomes start again from none; a late outcome of
    version 1 changes nothing."""
    old = _learn(lambda size: 2 * size + 0.02, [0.02, 0.2], 200, version=1)
    restarted = corrected_prefill_fit(old, 2, 0.0, 0.05, 0.05, 0.05)
    assert (restarted.log, restarted.offset_s, restarted.version) == (pytest.approx(0.0), 0.0, 2)
    assert restarted.outcomes == 1
    assert corrected_prefill_fit(restarted, 1, 0.0, 0.05, 0.05, 0.5) is restarted


def _raw(**fields: str) -> RawPodState:
    return RawPodState(busy_until_ms=str(NOW_MS + 300), prefill_ms="30", **fields)


def test_the_reading_applies_the_correction_only_to_the_version_it_was_learned_against() -> None:
    doubled = {"prefill_log": repr(math.log(2)), "prefill_offset": "0.02", "prefill_version": "4"}
    reading = load_reading(_raw(**doubled), NOW_MS, 3.0, 0.2, 4)
    assert reading.load.prefill_factor == pytest.approx(2.0)
    assert reading.load.prefill_offset == reading.prefill_offset == pytest.approx(0.02)
    other = load_reading(_raw(**doubled), NOW_MS, 3.0, 0.2, 5)
    assert (other.prefill_factor, other.prefill_offset) == (1.0, 0.0)
    unversioned = load_reading(
        _raw(prefill_log=repr(math.log(2)), prefill_offset="0.02"), NOW_MS, 3.0, 0.2, 4
    )
    assert (unversioned.prefill_factor, unversioned.prefill_offset) == (1.0, 0.0)


@pytest.mark.parametrize("hostile", ["1e308", "-1e308", "inf", "nan", "x"])
def test_a_hostile_correction_stays_within_its_bounds(hostile: str) -> None:
    reading = load_reading(
        _raw(prefill_log=hostile, prefill_offset=hostile, prefill_version="1"), NOW_MS, 3.0, 0.2, 1
    )
    assert PREFILL_FACTOR_BOUNDS[0] <= reading.prefill_factor <= PREFILL_FACTOR_BOUNDS[1]
    assert PREFILL_OFFSET_BOUNDS[0] <= reading.prefill_offset <= PREFILL_OFFSET_BOUNDS[1]


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


def test_the_policy_adds_a_pods_offset_but_never_below_half_its_factors_estimate() -> None:
    loads = {"near": PodLoad(), "far": PodLoad(prefill_offset=0.05), "fast": PodLoad(
        prefill_offset=-10.0)}  # fmt: skip
    request = RouteRequest("m", [1, 2], 32, 16, list(loads), {}, {}, {}, loads)
    costs = {c.pod: c for c in choose_pod(request, TierWeights()).candidates}
    assert costs["far"].prefill_s == pytest.approx(costs["near"].prefill_s + 0.05)
    assert costs["fast"].prefill_s == pytest.approx(costs["near"].prefill_s / 2)


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
