"""The /pods/<pod>/ page: one pod's counts, streams, chart, most recent blocks, its model's
local tokenizer, its engine's load as last scraped, the `ttft` policy's prediction error
against delivered outcomes over time, and (in its summary) its health from evidence."""

import math
import time
from dataclasses import dataclass

import redis

from kvadmin.conf import knob
from kvadmin.index.groups import group_of
from kvadmin.load.status import LoadStatus, load_status
from kvadmin.metrics.history import HitChart, hit_chart
from kvadmin.metrics.timerange import TimeRange, parse_range
from kvadmin.redis_clients import index_client
from kvadmin.residency.listing import BlockPage, newest_blocks
from kvadmin.residency.pods import PodSummary, pod_summary
from kvadmin.residency.samples import Chart, read_chart
from kvadmin.routing.prediction_error import ErrorBin, delivered, error_bin, error_bins
from kvadmin.routing.tokenizer_status import TokenizerStatus, tokenizer_status
from scoring import keys

RECENT_BLOCKS = 20
ERROR_OUTCOMES = 5000
"""The newest comparable outcomes the prediction error is computed from (the decision log
holds DECISIONS_MAX decisions of every pod)."""
ERROR_ROWS = 30
"""Rows of the prediction error table at most: a row covers whole minutes."""


@dataclass(slots=True)
class PodPage:
    summary: PodSummary
    chart: Chart
    recent: BlockPage
    now: int
    tokenizer: TokenizerStatus | None
    load: LoadStatus
    span: TimeRange
    hits: HitChart
    """The pod's share of decisions and hit ratio by medium over `span`."""
    errors: list[ErrorBin]
    """Predicted against delivered TTFT over `span`, newest first."""
    error_total: ErrorBin | None
    """... over the whole span (None without outcomes)."""
    error_minutes: int
    """Minutes a row of `errors` covers."""

    @property
    def stale_after(self) -> float:
        return knob("HEALTH_STALE_SECONDS")

    @property
    def probe_period(self) -> float:
        return knob("PROBE_PERIOD_SECONDS")


def pod_page(
    pod: str,
    client: redis.Redis | None = None,
    span: TimeRange | None = None,
    *,
    live_only: bool = False,
) -> PodPage:
    """Raises pods.UnknownPod for a pod neither registered nor in the index. The charts cover
    `span` (the last hour by default). `live_only`: the page's refresh of its live part, which
    shows no prediction error (left empty: it scans the decision log). Its blocks are read
    from the model's index group, the rest (charts, load, tokenizer, outcomes) from
    REDIS_URL; `client` stands for both."""
    span = span or parse_range({}, time.time())
    summary = pod_summary(pod, client)
    index = client or group_of(summary.model).client()
    client = client or index_client()
    zsets = [keys.residency_key(pod, medium) for medium in summary.counts]
    recent = newest_blocks(index, summary.model, zsets, limit=RECENT_BLOCKS)
    compared = (
        []
        if live_only
        else [
            item
            for item in delivered(client, ERROR_OUTCOMES, pod=pod, since=span.start)
            if item.at < span.end + 60
        ]
    )
    minutes = max(1, math.ceil((span.end - span.start) / 60 / ERROR_ROWS))
    return PodPage(
        summary,
        read_chart(client, pod, span.start, span.end),
        recent,
        int(time.time()),
        tokenizer_status(summary.model, client, pod),
        load_status(client, pod, knob("LOAD_STALE_SECONDS")),
        span,
        hit_chart(client, span, summary.counts, pod),
        error_bins(compared, minutes * 60),
        error_bin(span.start, compared) if compared else None,
        minutes,
    )
