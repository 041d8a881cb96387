"""The /metrics exposition: a prometheus_client collector that reads Redis at scrape time.

Counters of ingestion already live in Redis (each stream's status hash, written atomically
with the batches by the applier and by the reader), index sizes are ZCARDs of the residency
sets, and the histograms and scoring counters are Redis hashes filled by `recorder.py`. So the
numbers are shared by every web and worker process by construction: whichever web replica
is scraped answers the same, and a restarted worker loses nothing.

Labels: `pod` is kthena's pod id; `rank` names the stream: the data-parallel rank of a ZMQ
stream, "push:{r}" for rank r's batches pushed over HTTP (`ingest.pushed`, a stream of its
own); `medium` as the engine spelled it, empty for none. One scrape is six pipelined round
trips and one registry query: its cost grows with pods and streams, not with blocks (about
3 ms for 3 pods over 200,000 blocks).
"""

import time
from collections import defaultdict
from collections.abc import Iterator

import redis
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from kvadmin.conf import knob
from kvadmin.index import gc
from kvadmin.index.events import UNKNOWN_TAGS_MAX
from kvadmin.index.groups import index_groups
from kvadmin.metrics import families
from kvadmin.metrics.families import BUCKET_SEPARATOR, Family, label_values
from kvadmin.metrics.fleet import FleetState, read_fleet, read_groups_fleet, registered_engines
from kvadmin.redis_clients import index_client
from scoring import keys, load_hash

STREAM_COUNTERS = {
    "batches": ("kvadmin_ingest_batches", "KV-event batches applied"),
    "events": ("kvadmin_ingest_events", "KV events decoded from applied batches"),
    "clears": ("kvadmin_ingest_clears", "AllBlocksCleared events applied"),
    "gaps": ("kvadmin_ingest_gaps", "Sequence gaps detected (repaired by replay when possible)"),
    "replays": ("kvadmin_ingest_replays", "Replay requests answered by the engine"),
    "batches_lost": ("kvadmin_ingest_batches_lost", "Batches the engine no longer buffered"),
    "restarts": ("kvadmin_ingest_publisher_restarts", "Publisher restarts (seq went back)"),
    "purges": ("kvadmin_ingest_purges", "Stream purges (after a restart or lost batches)"),
    "stale_pushes": (
        "kvadmin_ingest_stale_pushes",
        "Pushed batches dropped because the engine registration that accepted them was removed",
    ),
    "disabled_pushes": (
        "kvadmin_ingest_disabled_pushes",
        "Pushed batches dropped because their engine was disabled before they were applied",
    ),
    "bad_rank_pushes": (
        "kvadmin_ingest_bad_rank_pushes",
        "Pushed batches dropped because they name a rank outside the engine's [0, dp_size)",
    ),
}
ANOMALIES = ("token_mismatch", "unresolved_placeholders", "unknown_removals", "std_conflicts")


class IndexCollector(Collector):
    def __init__(self, client: redis.Redis | None = None) -> None:
        self._client = client

    @property
    def client(self) -> redis.Redis:
        return self._client or index_client()

    def collect(self) -> Iterator[Metric]:
        client = self.client
        engines = registered_engines()
        if self._client is None:  # every index group's
            fleet = read_groups_fleet(engines, knob("LEASE_SECONDS"))
        else:
            fleet = read_fleet(client, engines, knob("LEASE_SECONDS"))
        yield from _stream_metrics(fleet)
        yield from _load_metrics(client, [e.pod for e in engines if e.enabled])
        yield from _index_metrics(fleet)
        for family, stored in zip(families.RECORDED, self._recorded_hashes(), strict=True):
            yield _recorded(family, stored)
        yield from _gc_metrics(client)
        yield from _weights_metrics(client)

    def _recorded_hashes(self) -> list[dict[str, str]]:
        """Each recorded family's hash, added up over REDIS_URL and the index groups: an
        ingest loop counts its apply latencies on its group's primary, with its batches."""
        clients = [self.client]
        if self._client is None:
            clients += [group.client() for group in index_groups() if not group.is_app_redis]
        totals: list[dict[str, int | float]] = [defaultdict(int) for _ in families.RECORDED]
        for client in clients:
            pipe = client.pipeline(transaction=False)
            for family in families.RECORDED:
                pipe.hgetall(family.key)
            for total, stored in zip(totals, pipe.execute(), strict=True):
                for field, value in _texts(stored).items():  # HINCRBY counts, HINCRBYFLOAT sums
                    total[field] += int(value) if value.lstrip("-").isdigit() else float(value)
        return [{field: str(value) for field, value in total.items()} for total in totals]


def _stream_metrics(fleet: FleetState) -> Iterator[Metric]:
    labels = ["pod", "rank"]
    counters = {
        field: CounterMetricFamily(name, doc, labels=labels)
        for field, (name, doc) in STREAM_COUNTERS.items()
    }
    blocks = CounterMetricFamily(
        "kvadmin_ingest_blocks",
        "Blocks applied to the index, by event type (stored or removed)",
        labels=[*labels, "event"],
    )
    decode_errors = CounterMetricFamily(
        "kvadmin_ingest_decode_errors",
        "Frames, batches or events that could not be decoded, by reason",
        labels=[*labels, "reason"],
    )
    unknown_tags = CounterMetricFamily(
        "kvadmin_ingest_unknown_event_tags",
        "Events skipped for a tag kvadmin does not know yet, by tag: a new engine version "
        f"coming (the first {UNKNOWN_TAGS_MAX} distinct tags of each stream; every one counts "
        'in kvadmin_ingest_decode_errors{reason="unknown_tag"})',
        labels=[*labels, "tag"],
    )
    anomalies = CounterMetricFamily(
        "kvadmin_ingest_anomalies",
        "Events applied with a caveat: token/hash mismatches, unresolvable placeholders, "
        "removals of unknown blocks, engine hashes re-stored with other content",
        labels=[*labels, "kind"],
    )
    connected = GaugeMetricFamily(
        "kvadmin_ingest_stream_connected",
        "1 when a live worker holds the stream's lease and its socket is connected",
        labels=labels,
    )
    last_seq = GaugeMetricFamily(
        "kvadmin_ingest_last_seq", "Last applied sequence number of the stream", labels=labels
    )
    lag = GaugeMetricFamily(families.STREAM_LAG.name, families.STREAM_LAG.help, labels=labels)
    applied = GaugeMetricFamily(families.LAST_APPLY.name, families.LAST_APPLY.help, labels=labels)
    for stream in fleet.streams:
        values = [stream.id.pod, stream.id.name]
        for field, family in counters.items():
            family.add_metric(values, stream.counter(field))
        blocks.add_metric([*values, "stored"], stream.counter("blocks_stored"))
        blocks.add_metric([*values, "removed"], stream.counter("blocks_removed"))
        decode_errors.add_metric([*values, "bad_frames"], stream.counter("bad_frames"))
        for name in sorted(stream.status):
            if name.startswith("skipped_"):
                reason = name.removeprefix("skipped_")
                decode_errors.add_metric([*values, reason], stream.counter(name))
            elif name.startswith(keys.UNKNOWN_TAG_FIELD_PREFIX):
                tag = name.removeprefix(keys.UNKNOWN_TAG_FIELD_PREFIX)
                unknown_tags.add_metric([*values, tag], stream.counter(name))
        for kind in ANOMALIES:
            anomalies.add_metric([*values, kind], stream.counter(kind))
        connected.add_metric(values, int(stream.connected))
        last_seq.add_metric(values, stream.counter("last_seq"))
        if stream.lag_seconds is not None:
            lag.add_metric(values, stream.lag_seconds)
        if stream.applied_at is not None:
            applied.add_metric(values, stream.applied_at)
    yield from counters.values()
    yield from (blocks, decode_errors, unknown_tags, anomalies, connected, last_seq, lag, applied)


def _index_metrics(fleet: FleetState) -> Iterator[Metric]:
    blocks = GaugeMetricFamily(
        "kvadmin_index_blocks",
        "Blocks the pod holds in the medium, per the index (medium is empty for none)",
        labels=["pod", "medium"],
    )
    for (pod, medium), count in sorted(fleet.blocks.items()):
        blocks.add_metric([pod, medium], count)
    yield blocks
    yield GaugeMetricFamily(
        "kvadmin_index_pods", "Pods with entries in the index", value=len(fleet.pod_models)
    )
    yield GaugeMetricFamily(
        "kvadmin_ingest_workers",
        "Ingest workers whose heartbeat is younger than a lease",
        value=fleet.workers,
    )


def _load_metrics(client: redis.Redis, pods: list[str]) -> Iterator[Metric]:
    """Each enabled engine's load as last scraped (`kvadmin.load`), and whether it is stale."""
    pipe = client.pipeline(transaction=False)
    for pod in pods:
        load_hash.queue_read(pipe, pod)
    rows = pipe.execute() if pods else []
    gauges = [
        GaugeMetricFamily(name, doc, labels=["pod"])
        for name, doc in (
            ("kvadmin_engine_load_running", "Requests the engine runs, as last scraped"),
            ("kvadmin_engine_load_waiting", "Requests waiting in the engine, as last scraped"),
            ("kvadmin_engine_load_kv_usage", "The engine's KV-cache usage (0..1), as last scraped"),
            ("kvadmin_engine_load_scraped_timestamp_seconds", "Unix time of the last good scrape"),
        )
    ]
    stale = GaugeMetricFamily(
        "kvadmin_engine_load_stale",
        "1 when the engine has no load younger than LOAD_STALE_SECONDS (scrapes fail or stopped)",
        labels=["pod"],
    )
    now, limit = time.time(), knob("LOAD_STALE_SECONDS")
    for pod, row in zip(pods, rows, strict=True):
        load = load_hash.from_reply(row)
        values = (load.running, load.waiting, load.kv_usage, load.scraped_at)
        for gauge, value in zip(gauges, values, strict=True):
            if value is not None:
                gauge.add_metric([pod], value)
        stale.add_metric([pod], float(load.stale(now, limit)))
    yield from gauges
    yield stale


def _float(text: str | bytes | None) -> float | None:
    try:
        return None if text is None else float(text)
    except ValueError:
        return None


def _recorded(family: Family, stored: dict[str, str]) -> Metric:
    labels = list(family.labels)
    if family.kind == "counter":
        metric = CounterMetricFamily(family.name, family.help, labels=labels)
    elif family.kind == "gauge":
        metric = GaugeMetricFamily(family.name, family.help, labels=labels)
    else:
        return _histogram(family, stored)
    for field, value in sorted(stored.items()):
        metric.add_metric(label_values(field), float(value))
    return metric


def _histogram(family: Family, stored: dict[str, str]) -> Metric:
    """Buckets are stored non-cumulative (one HINCRBY per observation); Prometheus wants them
    cumulative, +Inf last."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0] * (len(family.buckets) + 1))
    sums: dict[str, float] = defaultdict(float)
    for field, value in stored.items():
        labels, _, part = field.rpartition(BUCKET_SEPARATOR)
        if part == "sum":
            sums[labels] = float(value)
        else:  # a bucket index; one beyond today's buckets (they changed) counts as +Inf
            counts[labels][min(int(part), len(family.buckets))] += int(value)
    metric = HistogramMetricFamily(family.name, family.help, labels=list(family.labels))
    bounds = [repr(float(b)) for b in family.buckets] + ["+Inf"]
    for labels in sorted(counts):
        running, buckets = 0, []
        for bound, count in zip(bounds, counts[labels], strict=True):
            running += count
            buckets.append((bound, running))
        metric.add_metric(label_values(labels), buckets, sum_value=sums[labels])
    return metric


def _gc_metrics(client: redis.Redis) -> Iterator[Metric]:
    totals = gc.totals(client)
    yield CounterMetricFamily("kvadmin_gc_runs", "Garbage-collection runs", value=totals["runs"])
    removed = CounterMetricFamily(
        "kvadmin_gc_removed",
        "Index entries removed by garbage collection: stale (pod, block, medium) ownerships, "
        "matrix fields (blocks the router saw a pod own), unregistered pods purged and their "
        "matrix fields",
        labels=["kind"],
    )
    for kind in ("ownerships", "blocks", "pods_purged", "purged_blocks"):
        removed.add_metric([kind], totals[kind])
    yield removed
    last = gc.last_run(client)
    if last is not None:
        yield GaugeMetricFamily(
            "kvadmin_gc_last_run_timestamp_seconds",
            "When the last garbage-collection run finished",
            value=last.finished_at,
        )
        yield GaugeMetricFamily(
            "kvadmin_gc_last_run_duration_seconds",
            "How long the last garbage-collection run took",
            value=last.seconds,
        )


def _weights_metrics(client: redis.Redis) -> Iterator[Metric]:
    """The tier-weights version in effect (published to every process): a dashboard lines a
    change (an operator's or calibration's) up with hit ratio and TTFT."""
    version = _float(client.get(keys.WEIGHTS_VERSION_KEY))
    if version is not None:
        yield GaugeMetricFamily(
            "kvadmin_weights_active_version",
            "The tier weights and TTFT parameters version every process scores with",
            value=version,
        )


def _texts(stored: dict) -> dict[str, str]:
    return {
        (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
        for k, v in stored.items()
    }
