"""Blocks per medium over time, per pod: samples taken by `tasks.sample_pods`, for the chart
on /pods/<pod>/.

Key (kvadmin's own, beside `scoring.keys`' bookkeeping): `kvadmin:samples:{pod}`, a ZSET
scored by unix second whose members are JSON `{"t": second, "c": {medium: blocks}}`. Each
write trims what is older than `RETENTION_SECONDS` and renews the key's expiry, so a pod that
is no longer sampled (its engine removed) loses its history a day later. At one sample per 5 s
a pod keeps about 17,000 samples; the chart reads at most `MAX_POINTS` of them, evenly spaced,
picked by rank inside Redis.
"""

import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

import redis
from redis.commands.core import Script

from kvadmin.media import medium_order
from kvadmin.residency.pods import PodSummary
from scoring import keys

RETENTION_SECONDS = 86400
MAX_POINTS = 1500

_EVENLY = """
local first = redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. ARGV[2])
local n = redis.call('ZCOUNT', KEYS[1], ARGV[2], ARGV[3])
local points = tonumber(ARGV[1])
if n == 0 then
  return {}
end
if n <= points then
  return redis.call('ZRANGE', KEYS[1], first, first + n - 1)
end
local out = {}
for i = 0, points - 1 do
  local rank = first + math.floor(i * (n - 1) / (points - 1))
  out[#out + 1] = redis.call('ZRANGE', KEYS[1], rank, rank)[1]
end
return out
"""
"""At most ARGV[1] samples scored in [ARGV[2], ARGV[3]], evenly spaced by rank: two ZCOUNTs
find the range's ranks, then each pick is one O(log n) ZRANGE by rank."""


@cache
def _evenly() -> Script:
    return Script(None, _EVENLY.encode())  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Chart:
    """uPlot's data layout: the x values (unix seconds) and one series per medium."""

    times: list[int]
    series: dict[str, list[int]]

    def as_uplot(self) -> dict[str, object]:
        """For json_script: series as [medium, values] pairs, best tier first."""
        return {"times": self.times, "series": list(self.series.items())}


def record_samples(client: redis.Redis, summaries: Iterable[PodSummary], now: int) -> None:
    """Append one sample per pod, dropping what is older than the retention, one round trip."""
    pipe = client.pipeline(transaction=False)
    for summary in summaries:
        key = keys.pod_samples_key(summary.pod)
        member = json.dumps({"t": now, "c": summary.counts}, separators=(",", ":"))
        pipe.zadd(key, {member: now})
        pipe.zremrangebyscore(key, "-inf", f"({now - RETENTION_SECONDS}")
        pipe.expire(key, RETENTION_SECONDS)
    pipe.execute()


def read_chart(client: redis.Redis, pod: str, start: float = 0, end: float = float("inf")) -> Chart:
    """The pod's samples taken from `start` to `end` (unix seconds), at most MAX_POINTS."""
    bounds = [MAX_POINTS, f"{start:.0f}", "+inf" if end == float("inf") else f"{end:.0f}"]
    members = _evenly()(keys=[keys.pod_samples_key(pod)], args=bounds, client=client)
    samples = [json.loads(member) for member in members]
    media = medium_order({m for sample in samples for m in sample["c"]})
    return Chart(
        times=[sample["t"] for sample in samples],
        series={m: [sample["c"].get(m, 0) for sample in samples] for m in media},
    )
