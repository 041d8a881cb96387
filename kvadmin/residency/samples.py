"""Blocks per medium over time, per pod: samples taken by `tasks.sample_pods` (every 5 s), for
the chart on /pods/<pod>/.

Two ZSETs per pod (`scoring.keys`), scored by unix second, whose members are JSON
`{"t": second, "c": {medium: blocks}}`:
- `pod_samples_key`: every sample of the last FULL_RESOLUTION_SECONDS (an hour: 720);
- `pod_minute_samples_key`: the first sample of each DOWNSAMPLED_STEP_SECONDS (a minute), for
  RETENTION_SECONDS (a day: 1,441).
That rule (constants in `kvadmin.metrics.timerange`, beside the charts' ranges) is applied in
one place, `record_samples.lua`, one call for every pod. A day costs a pod about 2,200 members
instead of 17,280 (docs/capacity.md section 5). A chart reads the downsampled samples older than
the oldest full-resolution one, then those, and keeps at most MAX_POINTS, as evenly spaced in
time as the samples allow: over an hour every 5-second sample, over a day one a minute.
"""

import json
from collections.abc import Iterable
from dataclasses import dataclass

import redis

from kvadmin.media import medium_order
from kvadmin.metrics.timerange import (
    DOWNSAMPLED_STEP_SECONDS,
    FULL_RESOLUTION_SECONDS,
    RETENTION_SECONDS,
)
from kvadmin.residency.pods import PodSummary
from scoring import keys
from scoring.scripts import package_script

MAX_POINTS = 1500
UPGRADE_BUDGET = 40_000
"""Old samples one beat may downsample (record_samples.lua): about two pods' day, tens of ms."""
_RECORD = package_script(__file__, "record_samples")


@dataclass(frozen=True, slots=True)
class Chart:
    """uPlot's data layout: the x values (unix seconds) and one series per medium."""

    times: list[int]
    series: dict[str, list[int]]

    def as_uplot(self) -> dict[str, object]:
        """For json_script: series as [medium, values] pairs, best tier first."""
        return {"times": self.times, "series": list(self.series.items())}


def record_samples(client: redis.Redis, summaries: Iterable[PodSummary], now: int) -> None:
    """Record each pod's sample taken at `now` and drop what the retention rule no longer
    keeps: one script call (`client` may be a pipeline)."""
    summaries = list(summaries)
    if not summaries:
        return
    names = [(keys.pod_samples_key(s.pod), keys.pod_minute_samples_key(s.pod)) for s in summaries]
    samples = [json.dumps({"t": now, "c": s.counts}, separators=(",", ":")) for s in summaries]
    rule = [FULL_RESOLUTION_SECONDS, DOWNSAMPLED_STEP_SECONDS, RETENTION_SECONDS, UPGRADE_BUDGET]
    _RECORD(client, [key for pair in names for key in pair], [now, *rule, *samples])


def read_chart(client: redis.Redis, pod: str, start: float = 0, end: float = float("inf")) -> Chart:
    """The pod's samples taken from `start` to `end` (unix seconds), at most MAX_POINTS: both
    ZSETs read in one MULTI (a consistent view, at most about 2,200 members), the downsampled
    samples up to the oldest full-resolution one, then those."""
    bounds = (f"{start:.0f}", "+inf" if end == float("inf") else f"{end:.0f}")
    pipe = client.pipeline(transaction=True)
    for key in (keys.pod_minute_samples_key(pod), keys.pod_samples_key(pod)):
        pipe.zrange(key, *bounds, byscore=True, withscores=True)
    downsampled, recent = pipe.execute()
    seam = recent[0][1] if recent else float("inf")
    older = [(member, at) for member, at in downsampled if at < seam]
    if older and recent:
        # Each resolution gets the points of its share of the time shown, so the chart is as
        # dense across it and the hour of 5-second samples does not crowd out the day.
        share = (recent[-1][1] - recent[0][1]) / (recent[-1][1] - older[0][1])
        recent_points = min(max(round(MAX_POINTS * share), 2), MAX_POINTS - 2)
        found = _evenly(older, MAX_POINTS - recent_points) + _evenly(recent, recent_points)
    else:
        found = _evenly(older or recent, MAX_POINTS)
    samples = [json.loads(member) for member, _ in found]
    media = medium_order({m for sample in samples for m in sample["c"]})
    return Chart(
        times=[sample["t"] for sample in samples],
        series={m: [sample["c"].get(m, 0) for sample in samples] for m in media},
    )


def _evenly[T](samples: list[T], points: int) -> list[T]:
    """At most `points` (2 or more) of `samples`, evenly spaced by rank, the first and the last
    among them: evenly in time, as the samples are."""
    n = len(samples)
    if n <= points:
        return samples
    return [samples[i * (n - 1) // (points - 1)] for i in range(points)]
