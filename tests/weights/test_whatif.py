"""What-if replays recorded decisions under draft weights and changes nothing."""

import time

from kvadmin.routing.decisions import encode
from kvadmin.weights.config import KTHENA_DEFAULTS
from kvadmin.weights.whatif import PodTraffic, compare, preview
from scoring.keys import DECISIONS_KEY
from tests.weights.recorded import DECISIONS, DRAFT_CONFIG, RECORDED_VERSION, record


def bucket_counts(result) -> dict[str, int]:
    return {bucket.label: bucket.count for bucket in result.score_changes if bucket.count}


def test_it_finds_the_decisions_the_draft_would_change(fresh_weights, redis_client) -> None:
    record(redis_client)
    result = preview(DRAFT_CONFIG, 1000)
    assert (result.replayed, result.changed) == (3, 2)
    assert result.traffic == [PodTraffic("p3", 0, 1), PodTraffic("p1", 2, 1)]
    assert bucket_counts(result) == {
        "−50 or less": 1,
        "−49 to −20": 1,
        "−19 to −5": 1,
        "unchanged": 3,
    }
    assert result.versions == (RECORDED_VERSION,)


def test_the_recorded_weights_change_nothing(fresh_weights, redis_client) -> None:
    record(redis_client)
    result = preview(KTHENA_DEFAULTS, 1000)
    assert (result.replayed, result.changed, result.traffic) == (3, 0, [])
    assert bucket_counts(result) == {"unchanged": 6}


def test_it_replays_only_the_latest_decisions(fresh_weights, redis_client) -> None:
    record(redis_client)
    result = preview(DRAFT_CONFIG, 1)  # C, the newest
    assert (result.replayed, result.changed) == (1, 1)
    assert result.traffic == [PodTraffic("p3", 0, 1), PodTraffic("p2", 1, 0)]


def test_it_never_writes(fresh_weights, redis_client) -> None:
    record(redis_client)
    before = redis_client.xrange(DECISIONS_KEY)
    preview(DRAFT_CONFIG, 1000)
    assert redis_client.xrange(DECISIONS_KEY) == before
    assert redis_client.dbsize() == 1


def test_with_no_decisions_there_is_nothing_to_replay(fresh_weights) -> None:
    result = preview(DRAFT_CONFIG, 1000)
    assert (result.replayed, result.changed, result.changed_percent) == (0, 0, 0.0)


def test_a_thousand_decisions_replay_within_a_second(fresh_weights, redis_client) -> None:
    """The preview runs in the request: 1,000 decisions must stay well inside a page load."""
    pipeline = redis_client.pipeline()
    for index in range(1000):
        pipeline.xadd(DECISIONS_KEY, {"d": encode(DECISIONS[index % 3])})
    pipeline.execute()
    started = time.perf_counter()
    result = preview(DRAFT_CONFIG, 1000)
    elapsed = time.perf_counter() - started
    assert (result.replayed, result.changed) == (1000, 667)
    assert elapsed < 1.0, f"1000 decisions took {elapsed:.3f}s"


def test_it_replays_under_both_shipped_conventions(fresh_weights, redis_client) -> None:
    """Decision C: p2's two DISK blocks score 100 at kthena's 1.0 fallback but 40 at kvadmin's
    0.4, below p3's one GPU block (50); A and B keep their choice under both."""
    record(redis_client)
    draft, conventions = compare(DRAFT_CONFIG, 1000)
    assert (draft.replayed, draft.changed) == (3, 2)
    changed = {c.label: (c.result.replayed, c.result.changed) for c in conventions}
    assert changed == {"kthena defaults (1.0 fallback)": (3, 0), "kvadmin defaults": (3, 1)}
