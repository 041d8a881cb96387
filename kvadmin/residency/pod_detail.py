"""The /pods/<pod>/ page: one pod's counts, streams, chart, most recent blocks, its model's
local tokenizer, its engine's load as last scraped, and (in its summary) its health from
evidence."""

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
from kvadmin.routing.tokenizer_status import TokenizerStatus, tokenizer_status
from scoring import keys

RECENT_BLOCKS = 20


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

    @property
    def stale_after(self) -> float:
        return knob("HEALTH_STALE_SECONDS")

    @property
    def probe_period(self) -> float:
        return knob("PROBE_PERIOD_SECONDS")


def pod_page(pod: str, client: redis.Redis | None = None, span: TimeRange | None = None) -> PodPage:
    """Raises pods.UnknownPod for a pod neither registered nor in the index. The charts cover
    `span` (the last hour by default). Its blocks are read from the model's index group, the
    rest (charts, load, tokenizer) from REDIS_URL; `client` stands for both."""
    span = span or parse_range({}, time.time())
    summary = pod_summary(pod, client)
    index = client or group_of(summary.model).client()
    client = client or index_client()
    zsets = [keys.residency_key(pod, medium) for medium in summary.counts]
    recent = newest_blocks(index, summary.model, zsets, limit=RECENT_BLOCKS)
    return PodPage(
        summary,
        read_chart(client, pod, span.start, span.end),
        recent,
        int(time.time()),
        tokenizer_status(summary.model, client, pod),
        load_status(client, pod, knob("LOAD_STALE_SECONDS")),
        span,
        hit_chart(client, span, summary.counts, pod),
    )
