"""A pod's blocks-per-medium history is downsampled: every 5-second sample of the last hour,
the first sample of each minute for the day, and the charts read both as one history. The
samples are written by the real `record_samples` at explicit times, a day of them."""

import json
import time
from itertools import pairwise

from kvadmin.metrics.timerange import RETENTION_SECONDS
from kvadmin.residency.pods import PodSummary
from kvadmin.residency.samples import MAX_POINTS, UPGRADE_BUDGET, read_chart, record_samples
from scoring.keys import pod_minute_samples_key, pod_samples_key
from tests.index import MODEL, NOW
from tests.residency.conftest import register
from tests.residency.test_pod_page import _chart

POD = "vllm-0.default"
HOUR = 3600


def counts(at: int) -> dict[str, int]:
    """Blocks per medium at `at`: different for every sample, so a point tells which it is."""
    return {"GPU": at // 5 % 10_000, "CPU": at % 7}


def sample_a_day(client, end: int, every: int = 5) -> list[int]:
    """What the beat leaves after sampling POD every `every` s for a day up to `end`, written
    in pipelined batches; returns the times sampled."""
    times = list(range(end - RETENTION_SECONDS, end + 1, every))
    pipe = client.pipeline(transaction=False)
    for i, at in enumerate(times, 1):
        summary = PodSummary(POD, MODEL, "vllm", True, True, counts(at), [], None, None)
        record_samples(pipe, [summary], at)
        if i % 2000 == 0:
            pipe.execute()
    pipe.execute()
    return times


def first_of_each_minute(times: list[int]) -> list[int]:
    firsts: dict[int, int] = {}
    for at in times:
        firsts.setdefault(at // 60, at)
    return list(firsts.values())


def stored(client, key: str) -> list[int]:
    members = client.zrange(key, 0, -1, withscores=True)
    for member, at in members:
        assert json.loads(member) == {"t": at, "c": counts(int(at))}
    return [int(at) for _, at in members]


def assert_right_values(chart: dict) -> None:
    assert chart["series"][0][0] == "GPU" and chart["series"][1][0] == "CPU"
    assert chart["series"][0][1] == [counts(at)["GPU"] for at in chart["times"]]
    assert chart["series"][1][1] == [counts(at)["CPU"] for at in chart["times"]]


def test_the_last_hour_keeps_every_sample_and_the_day_one_a_minute(redis_client) -> None:
    times = sample_a_day(redis_client, NOW)

    recent = stored(redis_client, pod_samples_key(POD))
    downsampled = stored(redis_client, pod_minute_samples_key(POD))

    assert recent == [at for at in times if at >= NOW - HOUR]
    assert len(recent) == 721
    assert downsampled == first_of_each_minute(times)
    assert 1440 <= len(downsampled) <= 1442, "a day, one a minute"
    assert len(recent) + len(downsampled) < len(times) / 7, "17,281 samples taken"


def test_a_pod_no_longer_sampled_keeps_each_resolution_as_long_as_it_is_kept(
    redis_client,
) -> None:
    sample_a_day(redis_client, NOW, every=60)

    assert 0 < redis_client.ttl(pod_samples_key(POD)) <= HOUR
    assert HOUR < redis_client.ttl(pod_minute_samples_key(POD)) <= RETENTION_SECONDS


def test_a_sample_taken_again_in_a_minute_is_kept_only_at_full_resolution(redis_client) -> None:
    minute = NOW - NOW % 60
    for at in (minute + 10, minute + 15, minute + 59, minute + 60):
        summary = PodSummary(POD, MODEL, "vllm", True, True, counts(at), [], None, None)
        record_samples(redis_client, [summary], at)

    assert stored(redis_client, pod_samples_key(POD)) == [minute + s for s in (10, 15, 59, 60)]
    assert stored(redis_client, pod_minute_samples_key(POD)) == [minute + 10, minute + 60]


def test_one_call_records_every_pod(redis_client) -> None:
    pods = [
        PodSummary(f"vllm-{i}.default", MODEL, "vllm", True, True, {"GPU": i}, [], None, None)
        for i in range(3)
    ]

    record_samples(redis_client, pods, NOW)

    for i in range(3):
        for key in (
            pod_samples_key(f"vllm-{i}.default"),
            pod_minute_samples_key(f"vllm-{i}.default"),
        ):
            assert redis_client.zrange(key, 0, -1) == [
                json.dumps({"t": NOW, "c": {"GPU": i}}, separators=(",", ":"))
            ]


def test_charts_read_both_resolutions_as_one_history(redis_client) -> None:
    times = sample_a_day(redis_client, NOW)
    minutes = first_of_each_minute(times)

    hour = read_chart(redis_client, POD, NOW - HOUR, NOW).as_uplot()
    assert hour["times"] == [at for at in times if at >= NOW - HOUR], "every 5-second sample"
    assert_right_values(hour)

    older = read_chart(redis_client, POD, NOW - 3 * HOUR, NOW - 2 * HOUR).as_uplot()
    assert older["times"] == [at for at in minutes if NOW - 3 * HOUR <= at <= NOW - 2 * HOUR]
    assert_right_values(older)

    six = read_chart(redis_client, POD, NOW - 6 * HOUR, NOW).as_uplot()
    before, last_hour = (
        [at for at in six["times"] if at < NOW - HOUR],
        [at for at in six["times"] if at >= NOW - HOUR],
    )
    assert before == [at for at in minutes if NOW - 6 * HOUR <= at < NOW - HOUR]
    assert 240 <= len(last_hour) <= 251 and last_hour[-1] == NOW, "every 14.4 s"
    assert max(b - a for a, b in pairwise(last_hour)) <= 20
    assert_right_values(six)


def test_the_pod_pages_day_shows_the_right_values_about_once_a_minute(
    browsing, index, redis_client
) -> None:
    register(POD)
    now = int(time.time())
    times = sample_a_day(redis_client, now)

    page = browsing.get(f"/pods/{POD}/?range=24h").text
    chart = _chart(page)

    shown = chart["times"]
    assert len(shown) <= MAX_POINTS
    assert shown[0] - (now - RETENTION_SECONDS) < 70 and shown[-1] == now
    assert shown == sorted(set(shown))
    assert max(b - a for a, b in pairwise(shown)) <= 65, "no gap at the hour's seam"
    older = [at for at in shown if at < now - HOUR]
    assert older == [at for at in first_of_each_minute(times) if shown[0] <= at < now - HOUR]
    assert_right_values(chart)
    assert "a pod sample every 5 s for the last 60 minutes, one a minute before" in page


def test_a_history_written_before_downsampling_is_downsampled_not_lost(redis_client) -> None:
    """Before, every 5-second sample was kept for the day in the full-resolution ZSET alone:
    the first write after the upgrade keeps the first of each minute of what it ages out."""
    times = list(range(NOW - RETENTION_SECONDS, NOW, 5))
    redis_client.zadd(
        pod_samples_key(POD), {json.dumps({"t": at, "c": counts(at)}): at for at in times}
    )
    summary = PodSummary(POD, MODEL, "vllm", True, True, counts(NOW), [], None, None)

    record_samples(redis_client, [summary], NOW)

    older = [at for at in times if at < NOW - HOUR]
    assert stored(redis_client, pod_minute_samples_key(POD)) == [
        *first_of_each_minute(older),
        NOW,  # the first of its minute to reach the downsampled ZSET
    ]
    assert stored(redis_client, pod_samples_key(POD)) == [
        at for at in [*times, NOW] if at >= NOW - HOUR
    ]


def test_an_upgrade_downsamples_a_bounded_number_of_pods_per_beat(redis_client) -> None:
    """One call downsamples at most UPGRADE_BUDGET old samples (so Redis is never held for
    seconds by a large fleet's first beat); a pod left for later keeps its whole day."""
    pods = [f"vllm-{i}.default" for i in range(3)]
    times = list(range(NOW - RETENTION_SECONDS, NOW, 5))
    for pod in pods:
        redis_client.zadd(
            pod_samples_key(pod), {json.dumps({"t": at, "c": counts(at)}): at for at in times}
        )
    older = [at for at in times if at < NOW - HOUR]
    assert 2 * len(older) <= UPGRADE_BUDGET < 3 * len(older)

    def beat(at: int) -> None:
        summaries = [
            PodSummary(pod, MODEL, "vllm", True, True, counts(at), [], None, None) for pod in pods
        ]
        record_samples(redis_client, summaries, at)

    beat(NOW)
    assert [redis_client.exists(pod_minute_samples_key(pod)) for pod in pods] == [1, 1, 0]
    assert stored(redis_client, pod_samples_key(pods[2])) == [*times, NOW]

    beat(NOW + 5)
    assert stored(redis_client, pod_minute_samples_key(pods[2])) == [
        *first_of_each_minute(
            [at for at in times if NOW + 5 - RETENTION_SECONDS <= at < NOW + 5 - HOUR]
        ),
        NOW + 5,
    ]
    assert stored(redis_client, pod_samples_key(pods[2])) == [
        at for at in [*times, NOW, NOW + 5] if at >= NOW + 5 - HOUR
    ]
