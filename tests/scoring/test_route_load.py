"""The resync rule of scoring.route_state: the engine's fresh load corrects the virtual queue;
a stale, absent or unbelievable scrape leaves the queue alone and flags the pod; the delivered
correction scales the wait; the requests queued are counted for the work penalty."""

import math

import pytest

from scoring.policy import PodLoad
from scoring.route_state import (
    WAIT_FACTOR_BOUNDS,
    RawPodState,
    RouteState,
    load_reading,
    speculative_blocks,
)

NOW_MS = 1_760_000_000_000
NOW_S = NOW_MS / 1000
QUEUE_ONLY = PodLoad(wait_s=pytest.approx(0.3), running=4, stale=True, queued=pytest.approx(6.0))
"""300 ms of virtual queue at 50 ms per prefill; the 4 requests in flight stand for running."""


def raw(busy_in_ms: float | None = 300, **load: str | None) -> RawPodState:
    busy = None if busy_in_ms is None else str(NOW_MS + busy_in_ms)
    return RawPodState(busy_until_ms=busy, prefill_ms="50", in_flight=4, **load)  # type: ignore[arg-type]


def fresh(waiting: int, age_s: float = 0.1) -> dict[str, str]:
    return {
        "running": "7",
        "waiting": str(waiting),
        "kv_usage": "0.5",
        "scraped_at": str(NOW_S - age_s),
    }


def test_without_a_scrape_the_virtual_queue_prices_the_pod_and_it_is_flagged_stale() -> None:
    reading = load_reading(raw(), NOW_MS, 3.0, 0.2, 1)
    assert reading.load == QUEUE_ONLY
    assert (reading.engine_waiting, reading.load_age_s) == (None, None)


def test_a_fresh_scrape_with_a_longer_queue_than_kvadmin_knows_resyncs_the_wait() -> None:
    """What the engine waited 0.1 s ago has drained that much since."""
    reading = load_reading(raw(**fresh(waiting=10)), NOW_MS, 3.0, 0.2, 1)
    assert reading.load.wait_s == pytest.approx(10 * 0.05 - 0.1) and not reading.load.stale
    assert reading.load.running == 7 and reading.load.queued == 10
    assert reading.queue_wait_s == pytest.approx(0.3) and reading.engine_waiting == 10


def test_a_fresh_scrape_never_shortens_kvadmin_s_own_queue() -> None:
    """Requests just routed may not be in the engine's queue yet."""
    reading = load_reading(raw(**fresh(waiting=1)), NOW_MS, 3.0, 0.2, 1)
    assert reading.load.wait_s == pytest.approx(0.3) and not reading.load.stale


def test_before_any_routing_the_callers_prefill_stands_for_the_mean() -> None:
    state = RawPodState(**fresh(waiting=3))
    assert load_reading(state, NOW_MS, 3.0, 0.2, 1).load.wait_s == pytest.approx(0.6 - 0.1)


@pytest.mark.parametrize(
    "load",
    [
        fresh(waiting=10, age_s=3.5),  # too old
        fresh(waiting=10, age_s=-10),  # from the future
        {**fresh(waiting=10), "waiting": "-1"},
        {**fresh(waiting=10), "running": "1.5"},
        {**fresh(waiting=10), "kv_usage": "nan"},
        {**fresh(waiting=10), "scraped_at": "soon"},
        {"running": "1", "waiting": "1"},  # fields missing
    ],
)
def test_a_stale_or_bad_scrape_is_not_believed(load: dict[str, str]) -> None:
    reading = load_reading(raw(**load), NOW_MS, 3.0, 0.2, 1)
    assert reading.load == QUEUE_ONLY


def test_a_drained_queue_waits_nothing() -> None:
    assert load_reading(raw(busy_in_ms=-500), NOW_MS, 3.0, 0.2, 1).load.wait_s == 0.0
    assert load_reading(raw(busy_in_ms=None), NOW_MS, 3.0, 0.2, 1).load.wait_s == 0.0


def test_speculative_positions_become_the_requests_block_hashes() -> None:
    state = RouteState(NOW_MS, {"a": RawPodState(speculative=(0, 2, 9)), "b": RawPodState()})
    assert speculative_blocks(state, [100, 101, 102]) == {"a": frozenset({100, 102})}


def test_the_delivered_correction_scales_the_wait_within_its_bounds() -> None:
    doubled = load_reading(raw(wait_log=str(math.log(2))), NOW_MS, 3.0, 0.2, 1)
    assert doubled.load.wait_s == pytest.approx(0.6) and doubled.wait_factor == pytest.approx(2)
    assert doubled.load.queued == pytest.approx(12)
    hostile = load_reading(raw(wait_log="1e308"), NOW_MS, 3.0, 0.2, 1)
    assert hostile.wait_factor == WAIT_FACTOR_BOUNDS[1]
    for garbage in ("nan", "-inf", "x", None):
        assert load_reading(raw(wait_log=garbage), NOW_MS, 3.0, 0.2, 1).wait_factor == 1.0
