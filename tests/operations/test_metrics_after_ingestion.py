"""After real ingestion (a vLLM publisher, an ingest loop thread) /metrics shows each stream's
counters, the apply-latency histogram, the stream's lag and the index size per medium."""

import time

import pytest

from kvadmin.index import status
from kvadmin.index.streams import StreamId
from tests.ingest.blocks import removed, stored
from tests.ingest.conftest import spec_for
from tests.operations.conftest import POD, STREAM, value
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db


def _ingest(publisher, start_loop, redis_client, *batches, ts: float | None = None) -> None:
    start_loop([spec_for(publisher)])
    wait_until(lambda: status.read_statuses(redis_client, [StreamId(POD, 0)])[0].connected)
    publisher.wait_for_subscribers()
    for events in batches:
        seq = publisher.publish(events, ts=ts)
    wait_until(lambda: status.last_seq(redis_client, StreamId(POD, 0)) >= seq, what="applied")


def test_stream_counters_carry_pod_and_rank(
    engine, publisher, start_loop, redis_client, scrape
) -> None:
    _ingest(
        publisher, start_loop, redis_client, [stored(1, 2)], [removed(1)], [stored(3, medium="CPU")]
    )
    samples = scrape()

    assert value(samples, "kvadmin_ingest_batches_total", **STREAM) == 3
    assert value(samples, "kvadmin_ingest_events_total", **STREAM) == 3
    assert value(samples, "kvadmin_ingest_blocks_total", **STREAM, event="stored") == 3
    assert value(samples, "kvadmin_ingest_blocks_total", **STREAM, event="removed") == 1
    assert value(samples, "kvadmin_ingest_stream_connected", **STREAM) == 1
    assert value(samples, "kvadmin_ingest_last_seq", **STREAM) == 2
    assert value(samples, "kvadmin_ingest_workers") == 1


def test_index_size_is_per_pod_and_medium(
    engine, publisher, start_loop, redis_client, scrape
) -> None:
    _ingest(publisher, start_loop, redis_client, [stored(1, 2)], [stored(3, medium="CPU")])
    samples = scrape()

    assert value(samples, "kvadmin_index_blocks", pod=POD, medium="GPU") == 2
    assert value(samples, "kvadmin_index_blocks", pod=POD, medium="CPU") == 1
    assert value(samples, "kvadmin_index_pods") == 1


def test_apply_latency_and_lag_are_measured(
    engine, publisher, start_loop, redis_client, scrape
) -> None:
    """Batches published 30 s before they reach the index show a lag of at least 30 s."""
    _ingest(publisher, start_loop, redis_client, [stored(1)], [stored(2)], ts=time.time() - 30)
    samples = scrape()

    count = value(samples, "kvadmin_ingest_apply_duration_seconds_count", pod=POD)
    assert count is not None and count >= 1
    inf = value(samples, "kvadmin_ingest_apply_duration_seconds_bucket", pod=POD, le="+Inf")
    assert inf == count
    assert value(samples, "kvadmin_ingest_stream_lag_seconds", **STREAM) >= 30
    applied_at = value(samples, "kvadmin_ingest_last_apply_timestamp_seconds", **STREAM)
    assert time.time() - 60 < applied_at <= time.time()


def test_gaps_replays_and_decode_errors_are_counted(
    engine, publisher, start_loop, redis_client, scrape
) -> None:
    start_loop([spec_for(publisher)])
    wait_until(lambda: status.read_statuses(redis_client, [StreamId(POD, 0)])[0].connected)
    publisher.wait_for_subscribers()
    publisher.publish([stored(1)])
    publisher.drop(1)
    publisher.publish([stored(2)])
    publisher.publish_payload(b"\xc1 not msgpack")
    seq = publisher.publish([stored(3)])
    wait_until(lambda: status.last_seq(redis_client, StreamId(POD, 0)) >= seq, what="applied")
    samples = scrape()

    assert value(samples, "kvadmin_ingest_gaps_total", **STREAM) >= 1
    assert value(samples, "kvadmin_ingest_replays_total", **STREAM) >= 1
    assert value(samples, "kvadmin_ingest_batches_lost_total", **STREAM) == 0
    errors = value(samples, "kvadmin_ingest_decode_errors_total", **STREAM, reason="undecodable")
    assert errors == 1
