"""Garbage collection removes exactly the ownership older than the maximum age, across the
whole index in one run, in bounded steps, and leaves an index kthena's router reads cleanly."""

import time

import pytest
import redis

from kvadmin.index import gc
from kvadmin.index.writer import Applier
from tests.index import IngestedIndex
from tests.operations.synthetic import (
    PODS,
    build_index,
    expected_after_gc,
    kthena_violations,
    snapshot,
)

NOW = 1_800_000_000
MAX_AGE = 86_400
BLOCKS = 20_000


@pytest.fixture
def large_index(redis_client: redis.Redis, index: IngestedIndex) -> dict[str, object]:
    """20,000 blocks over 3 pods (one with 2 ranks), half of them stored two days ago, with
    offloads, shared blocks and doubly-referenced blocks of mixed ages; its snapshot."""
    build_index(index, BLOCKS, old=NOW - 2 * MAX_AGE, new=NOW - 60)
    return snapshot(redis_client)


def test_it_removes_exactly_the_stale_entries(redis_client, large_index) -> None:
    started = time.perf_counter()
    report = gc.collect_garbage(
        Applier(redis_client), MAX_AGE, registered=lambda: set(PODS), now=NOW
    )
    elapsed = time.perf_counter() - started

    assert snapshot(redis_client) == expected_after_gc(large_index, NOW - MAX_AGE)
    assert list(kthena_violations(redis_client)) == []
    print(
        f"GC of {BLOCKS} blocks: {elapsed:.2f}s, {report.steps} steps, "
        f"longest {report.longest_step_ms:.1f} ms, {report.ownerships} ownerships, "
        f"{report.blocks} matrix fields removed"
    )


def test_the_report_counts_what_went(redis_client, large_index) -> None:
    report = gc.collect_garbage(
        Applier(redis_client), MAX_AGE, registered=lambda: set(PODS), now=NOW
    )

    expected = expected_after_gc(large_index, NOW - MAX_AGE)
    residency = sum(len(v) for k, v in large_index.items() if k.startswith("kvadmin:res:"))
    left = sum(len(v) for k, v in expected.items() if k.startswith("kvadmin:res:"))
    fields = sum(len(v) for k, v in large_index.items() if k.startswith("matrix:"))
    fields_left = sum(len(v) for k, v in expected.items() if k.startswith("matrix:"))
    assert report.ownerships == residency - left > BLOCKS // 2
    assert report.blocks == fields - fields_left
    assert report.orphans == 0
    assert report.pods == len(PODS)
    assert gc.last_run(redis_client) == report
    assert gc.totals(redis_client)["blocks"] == report.blocks


def test_every_step_is_bounded(redis_client, large_index) -> None:
    """No step handles more than about one chunk, so no script blocks Redis for long (counted
    in blocks, not timed: the time depends on the machine)."""
    report = gc.collect_garbage(
        Applier(redis_client, chunk_size=500), MAX_AGE, registered=lambda: set(PODS), now=NOW
    )

    assert report.steps >= BLOCKS // 500
    assert 0 < report.largest_step <= 2 * 500


def test_a_second_run_finds_nothing_left(redis_client, large_index) -> None:
    gc.collect_garbage(Applier(redis_client), MAX_AGE, registered=lambda: set(PODS), now=NOW)
    again = gc.collect_garbage(
        Applier(redis_client), MAX_AGE, registered=lambda: set(PODS), now=NOW
    )

    assert (again.ownerships, again.blocks) == (0, 0)
    assert gc.totals(redis_client)["runs"] == 2
