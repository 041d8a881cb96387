"""Hit ratios over a time range, from the per-minute buckets the recorder keeps for a day
(`recorder.hits_key`): fleet-wide, or for one chosen pod with its share of the decisions.

A chart point is a bin of `TimeRange.step_minutes` minutes: its ratio is the bin's matched
blocks over its requested blocks (sums, not an average of ratios), None without decisions.
"""

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import redis

from kvadmin.metrics.recorder import hits_key
from kvadmin.metrics.timerange import TimeRange, bins
from scoring.weights import TierWeights

_MEDIUM_ORDER = TierWeights()


@dataclass(frozen=True, slots=True)
class HitChart:
    """uPlot's layout: bin start times, then the share of requested blocks the chosen pod
    held, overall and per medium (None for bins without decisions); for one pod also its share
    of all decisions."""

    times: list[int]
    total: list[float | None]
    media: dict[str, list[float | None]]
    share: list[float | None] = field(default_factory=list)

    def as_json(self) -> str:
        return json.dumps(
            {
                "times": self.times,
                "total": self.total,
                "media": list(self.media.items()),
                "share": self.share,
            },
            separators=(",", ":"),
        )


def ratios(
    minutes: Sequence[int], rows: Sequence[dict[str, str]], step: int, pod: str | None = None
) -> HitChart:
    """The chart of `rows` (one bucket per minute of `minutes`), `step` minutes a point."""
    matched_prefix, blocks_field = (f"pm:{pod}|", f"pb:{pod}") if pod else ("m:", "blocks")
    media = sorted(
        {
            f.removeprefix(matched_prefix)
            for row in rows
            for f in row
            if f.startswith(matched_prefix)
        },
        key=lambda m: _MEDIUM_ORDER.medium_rank(m or None),
    )
    by_minute = dict(zip(minutes, rows, strict=True))
    times: list[int] = []
    total: list[float | None] = []
    share: list[float | None] = []
    series: dict[str, list[float | None]] = {m: [] for m in media}
    for run in bins(list(minutes), step):
        chunk = [by_minute[m] for m in run]
        blocks = sum(int(row.get(blocks_field, 0)) for row in chunk)
        matched = {m: sum(int(row.get(f"{matched_prefix}{m}", 0)) for row in chunk) for m in media}
        times.append(run[0] * 60)
        total.append(sum(matched.values()) / blocks if blocks else None)
        for m, count in matched.items():
            series[m].append(count / blocks if blocks else None)
        if pod:
            decided = sum(int(row.get("decisions", 0)) for row in chunk)
            chosen = sum(int(row.get(f"p:{pod}", 0)) for row in chunk)
            share.append(chosen / decided if decided else None)
    return HitChart(times, total, series, share)


def hit_chart(
    client: redis.Redis, span: TimeRange, media: Iterable[str], pod: str | None = None
) -> HitChart:
    """One pipelined HMGET per minute of the range (1,441 for a day) of just the fields the
    chart needs: a bucket holds every pod's fields, and reading them all would cost a day's
    chart hundreds of milliseconds. `media`: those the chart shows (the index's)."""
    if pod:
        names = ["decisions", f"p:{pod}", f"pb:{pod}", *(f"pm:{pod}|{m}" for m in media)]
    else:
        names = ["blocks", *(f"m:{m}" for m in media)]
    minutes = span.minutes()
    pipe = client.pipeline(transaction=False)
    for minute in minutes:
        pipe.hmget(hits_key(minute), names)
    rows = [
        {name: value for name, value in zip(names, values, strict=True) if value is not None}
        for values in pipe.execute()
    ]
    return ratios(minutes, rows, span.step_minutes, pod)
