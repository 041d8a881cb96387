"""Fuzzing a real ingest loop: one stream's engine publishes malicious payloads while another
stream of the same worker publishes normal batches. Each malicious batch is skipped or applied
as undecodable (its seq counted, the stream moving past it), the index does not change, the
worker keeps both streams and the other stream keeps being consumed."""

import threading
from collections.abc import Iterator

import pytest
import redis
from hypothesis import HealthCheck, given, settings

from kvadmin.fleet.publisher import Publisher
from kvadmin.fleet.wire import Encoding
from kvadmin.index import status
from kvadmin.index.writer import Applier
from kvadmin.ingest.reader import IngestLoop
from tests.conftest import examples
from tests.ingest.blocks import key, stored
from tests.ingest.conftest import snapshot, spec_for
from tests.ingest.malicious import rejected_payloads
from tests.waiting import patient, wait_until

BAD, GOOD = "bad-0.default", "good-0.default"
BOOKKEEPING = ("kvadmin:metrics:", "kvadmin:lease:", "kvadmin:ingest:workers")
"""Keys that move with time or measurements, whatever a batch holds."""


def _index(client: redis.Redis) -> dict[str, object]:
    state = snapshot(client, status=False)
    return {k: v for k, v in state.items() if not k.startswith(BOOKKEEPING)}


@pytest.fixture
def fleet(redis_url, redis_client) -> Iterator[tuple[Publisher, Publisher, IngestLoop]]:
    """Two engines read by one ingest loop, both streams connected and caught up."""
    with (
        Publisher(encoding=Encoding.VLLM_MAP) as bad,
        Publisher(encoding=Encoding.VLLM_ARRAY) as good,
    ):
        specs = [spec_for(bad, pod=BAD), spec_for(good, pod=GOOD)]
        client = redis.Redis.from_url(redis_url, decode_responses=True)
        loop = IngestLoop(Applier(client), lambda: specs, lambda: 0)
        thread = threading.Thread(target=loop.run, daemon=True)
        thread.start()
        for spec in specs:
            wait_until(
                lambda s=spec: status.read_statuses(redis_client, [s.id])[0].connected,
                what="connect",
            )
        # A stream's first applied batch names its pod in the index, whatever it holds.
        for publisher, spec in zip((bad, good), specs, strict=True):
            publisher.wait_for_subscribers()
            seq = publisher.publish([])
            wait_until(lambda s=spec, n=seq: status.last_seq(redis_client, s.id) == n, what="first")
        yield bad, good, loop
        loop.stop()
        thread.join(timeout=patient(15))
        assert not thread.is_alive()


@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(payload=rejected_payloads)
def test_malicious_batches_change_nothing_and_stop_no_stream(fleet, redis_client, payload) -> None:
    bad, good, loop = fleet
    bad_id, good_id = (spec.id for spec in loop.wanted.values())
    before = _index(redis_client)
    bad_seq = bad.publish_payload(payload)
    good_seq = good.publish([])
    wait_until(lambda: status.last_seq(redis_client, bad_id) == bad_seq, what="bad batch passed")
    wait_until(lambda: status.last_seq(redis_client, good_id) == good_seq, what="good consumed")
    assert _index(redis_client) == before
    assert set(loop.owned) == {bad_id, good_id}
    assert not loop.failures.failing("bug")


def test_the_other_stream_still_writes_the_index_after_a_crash_sized_batch(fleet, redis_client):
    bad, good, loop = fleet
    bad_seq = bad.publish_payload(b"\x91" * 100_000 + b"\x01")  # RecursionError inside msgspec
    seq = good.publish([stored(1)])
    bad_id, good_id = spec_for(bad, pod=BAD).id, spec_for(good, pod=GOOD).id
    wait_until(lambda: status.last_seq(redis_client, good_id) == seq, what="good")
    wait_until(lambda: status.last_seq(redis_client, bad_id) == bad_seq, what="bad batch passed")
    assert redis_client.hget(key(1), GOOD)
    bad_status = status.read_statuses(redis_client, [bad_id])[0].status
    assert bad_status["skipped_undecodable"] == "1" and bad_status["last_seq"] == str(bad_seq)
    assert not loop.failures.failing("bug")
