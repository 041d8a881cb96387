"""The wait estimate at load (issue 33 item 4): the delivered correction's rule
(`corrected_wait_log`; outcome_record.lua against it: tests/routing/test_wait_correction.py),
and the virtual queue restarted from the engine's waiting requests (queue_resync.lua)."""

import math
import time

import pytest

from scoring.keys import queue_key
from scoring.route_state import (
    QUEUE_RESYNC,
    WAIT_FACTOR_BOUNDS,
    WAIT_LEARNING,
    WAIT_STEP_BOUND,
    corrected_wait_log,
)

LOW, HIGH = (math.log(bound) for bound in WAIT_FACTOR_BOUNDS)


def test_outcomes_slower_than_predicted_move_the_factor_toward_delivered() -> None:
    """A pod that imposes twice the predicted wait: the factor climbs toward 2 and stays."""
    wait_log = 0.0
    for _ in range(400):
        predicted_wait = 0.5 * math.exp(wait_log)  # the decision's wait, corrected already
        wait_log = corrected_wait_log(wait_log, predicted_wait, 0.1, 0.1 + 2 * 0.5, wait_log)
    assert math.exp(wait_log) == pytest.approx(2.0, rel=0.01)


def test_outcomes_faster_than_predicted_lower_it_and_bounds_hold() -> None:
    wait_log = 0.0
    for _ in range(1000):
        wait_log = corrected_wait_log(wait_log, math.exp(wait_log), 0.1, 0.1, wait_log)
    assert wait_log == pytest.approx(LOW)
    for _ in range(1000):
        wait_log = corrected_wait_log(wait_log, math.exp(wait_log), 0.1, 3600.0, wait_log)
    assert wait_log == pytest.approx(HIGH)


def test_one_outlier_moves_the_factor_by_a_bounded_step() -> None:
    hung = corrected_wait_log(0.0, 0.5, 0.1, 3600.0, 0.0)
    assert hung == pytest.approx(WAIT_LEARNING * WAIT_STEP_BOUND)


def test_an_outcome_about_the_prefill_leaves_the_wait_alone() -> None:
    """A predicted wait of 10 ms beside a 500 ms prefill says nothing about the queue."""
    assert corrected_wait_log(0.3, 0.01, 0.5, 5.0, 0.3) == 0.3
    assert corrected_wait_log(0.3, 0.0, 0.5, 5.0, 0.3) == 0.3


@pytest.mark.parametrize("queued", [10, 60, 200])
def test_outcomes_a_long_queue_behind_their_decisions_settle_the_factor(queued: int) -> None:
    """Under sustained load an outcome comes `queued` outcomes after its decision, priced with
    the factor of then. A pod imposing 1.5x the uncorrected wait: the factor settles at 1.5 and
    stays near it (stepped against the decision's own wait, it swung between its bounds once
    the queue held more than about 30 requests)."""
    wait_log, decided, seen = 0.0, [], []
    for step in range(3000):
        decided.append(wait_log)  # a decision priced with the factor of now
        if len(decided) > queued:  # the outcome of the decision `queued` outcomes ago
            at_decision = decided.pop(0)
            wait = 2.0 * math.exp(at_decision)  # the uncorrected wait 2 s, corrected
            wait_log = corrected_wait_log(wait_log, wait, 0.1, 0.1 + 1.5 * 2.0, at_decision)
        if step >= 2000:
            seen.append(math.exp(wait_log))
    assert min(seen) == pytest.approx(1.5, rel=0.02)
    assert max(seen) == pytest.approx(1.5, rel=0.02)


def test_the_step_is_taken_against_the_factor_of_now() -> None:
    """The decision's wait was priced at factor 1 (log 0), the factor has since moved to 2: an
    outcome imposing twice the uncorrected wait leaves it at 2."""
    now = math.log(2.0)
    assert corrected_wait_log(now, 1.0, 0.1, 0.1 + 2.0, 0.0) == pytest.approx(now)


@pytest.fixture
def queue(redis_client):
    key = queue_key("vllm-0")
    redis_client.hset(key, mapping={"busy_until_ms": "0", "prefill_ms": "40"})
    return key


def test_the_resync_restarts_a_drifted_queue_from_the_engines_waiting(redis_client, queue):
    redis_client.hset(queue, "busy_until_ms", str((time.time() + 60) * 1000))  # drifted long
    before = time.time() * 1000
    busy = float(QUEUE_RESYNC(redis_client, [queue], [5]))
    assert before - 1 + 5 * 40 <= busy <= time.time() * 1000 + 5 * 40  # Redis TIME in whole ms
    assert float(redis_client.hget(queue, "busy_until_ms")) == busy


def test_the_resync_brings_no_queue_back(redis_client) -> None:
    assert QUEUE_RESYNC(redis_client, [queue_key("vllm-9")], [5]) is None
    assert not redis_client.exists(queue_key("vllm-9"))
