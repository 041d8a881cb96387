"""One time range for the dashboard and the pod pages: presets and custom spans inside the 24 h
Redis keeps, downsampled to at most 120 points; per-pod share of decisions and hit ratio by
medium from the per-minute buckets."""

import pytest

from kvadmin.metrics import recorder
from kvadmin.metrics.history import hit_chart, ratios
from kvadmin.metrics.timerange import parse_range
from kvadmin.residency.samples import read_chart, record_samples
from tests.operations.test_dashboard_tiles import DecisionStub, Scored

NOW = 1_760_000_000


def test_presets_and_custom_spans() -> None:
    assert parse_range({}, NOW).key == "1h"
    day = parse_range({"range": "24h"}, NOW)
    assert (day.start, day.end, day.step_minutes) == (NOW - 86400, NOW, 13)
    assert len(day.minutes()) == 1441 and len(hit_chart_points(day)) <= 120
    custom = parse_range(
        {"range": "custom", "from": "2025-10-09T07:00", "to": "2025-10-09T08:00"}, NOW
    )
    assert custom.key == "custom" and custom.end - custom.start == 3600
    assert custom.query() == {
        "range": "custom",
        "from": "2025-10-09T07:00",
        "to": "2025-10-09T08:00",
    }


def hit_chart_points(span) -> list[list[int]]:
    from kvadmin.metrics.timerange import bins

    return bins(span.minutes(), span.step_minutes)


def test_a_custom_span_is_clamped_to_what_redis_keeps_or_refused() -> None:
    week = parse_range(
        {"range": "custom", "from": "2025-10-01T00:00", "to": "2025-10-09T08:00"}, NOW
    )
    assert week.start == NOW - 86400
    old = parse_range(
        {"range": "custom", "from": "2025-10-01T00:00", "to": "2025-10-02T00:00"}, NOW
    )
    assert old.key == "1h" and "24 hours" in old.error
    backwards = parse_range(
        {"range": "custom", "from": "2025-10-09T08:00", "to": "2025-10-09T07:00"}, NOW
    )
    assert backwards.key == "1h" and "end after it starts" in backwards.error
    assert parse_range({"range": "2y"}, NOW).error == "unknown range '2y'"


def test_bins_sum_blocks_before_dividing() -> None:
    rows = [
        {"decisions": "2", "blocks": "10", "m:GPU": "5", "p:a": "1", "pb:a": "4", "pm:a|GPU": "4"},
        {"decisions": "2", "blocks": "30", "m:GPU": "3", "m:CPU": "6", "p:b": "2"},
        {},
    ]
    fleet = ratios([0, 1, 2], rows, step=2)
    assert fleet.times == [0, 120]
    assert fleet.total == [14 / 40, None]
    assert fleet.media == {"GPU": [8 / 40, None], "CPU": [6 / 40, None]}
    pod = ratios([0, 1, 2], rows, step=2, pod="a")
    assert (
        pod.share == [1 / 4, None]
        and pod.total == [1.0, None]
        and pod.media == {"GPU": [1.0, None]}
    )


def test_recorded_decisions_give_the_pods_share_over_a_day(redis_client) -> None:
    for minute_ago, pod in ((600, "a"), (600, "b"), (5, "a")):
        scored = [Scored(pod, {"GPU": 2})]
        recorder.record_decision(
            redis_client, DecisionStub(NOW - minute_ago * 60, 4, 2, pod, scored)
        )
    day = parse_range({"range": "24h"}, NOW)

    chart = hit_chart(redis_client, day, ["GPU", "CPU"], pod="a")

    shares = [share for share in chart.share if share is not None]
    assert shares == [0.5, 1.0], "10 h ago a and b shared a minute; 5 min ago a alone"
    assert set(chart.media) == {"GPU"}
    assert redis_client.ttl(recorder.hits_key((NOW - 600 * 60) // 60)) > 24 * 3600


@pytest.mark.django_db
def test_the_blocks_chart_reads_the_range_only(redis_client) -> None:
    from kvadmin.residency.pods import PodSummary

    summary = PodSummary("p", "m", "vllm", True, True, {"GPU": 1}, [], None, None)
    for at in (NOW - 7200, NOW - 1800, NOW - 60):
        record_samples(redis_client, [summary], at)
    assert read_chart(redis_client, "p", NOW - 3600, NOW).times == [NOW - 1800, NOW - 60]
    assert read_chart(redis_client, "p").times == [NOW - 7200, NOW - 1800, NOW - 60]
