"""Fuzzing POST /api/v1/events/<pod>: whatever the body, the answer is a JSON 202 or 4xx, never
a 500; a refused batch queues nothing and changes no stream's state."""

from collections.abc import Iterator

import msgspec
import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvadmin.api.models import ApiToken
from kvadmin.engines.models import Engine
from kvadmin.index.pod_lock import DrainLock
from scoring import keys
from tests.conftest import examples
from tests.index import MODEL
from tests.ingest.conftest import snapshot
from tests.ingest.malicious import any_payloads, rejected_payloads

pytestmark = pytest.mark.django_db(transaction=True)
POD = "vllm-0.default"
URL = f"/api/v1/events/{POD}"
FIXTURES = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


@pytest.fixture
def token() -> str:
    """An engine pusher's token, for a registered two-rank pod."""
    Engine.objects.create(pod=POD, model=MODEL, events_endpoint="tcp://127.0.0.1:1", dp_size=2)
    return ApiToken.issue("engine-pusher", "events:push")[1]


@pytest.fixture
def drain_held(redis_client) -> Iterator[DrainLock]:
    """The pod's drain lock, held by the test: a Celery worker left running by earlier tests of
    the session drains accepted pushes, and would change the state between two snapshots. Held,
    the worker's drain task sees the lock and leaves the queue alone (the protocol the real
    drains follow); the lock key is the same in every snapshot."""
    lock = DrainLock(redis_client, POD)
    assert lock.acquire(wait=30), "a drain of the pod did not finish within 30 s"
    yield lock
    lock.release()


def _state(client) -> dict[str, object]:
    """Every key but the pod's push queue (binary entries: its length is checked alone)."""
    queue = keys.push_queue_key(POD)
    return snapshot(client, skip=queue)


def _post(body: bytes, token: str):
    headers = {"Authorization": f"Bearer {token}"}
    return Client().post(URL, body, content_type="application/msgpack", headers=headers)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=FIXTURES)
@given(body=any_payloads)
def test_any_body_is_answered_in_json_without_a_500(token, redis_client, drain_held, body) -> None:
    assert drain_held.renew()
    before = _state(redis_client)
    queued = redis_client.llen(keys.push_queue_key(POD))
    response = _post(body, token)
    assert response.status_code == 202 or 400 <= response.status_code < 500
    answer = response.json()
    if response.status_code == 202:
        assert set(answer) >= {"accepted", "seq", "events", "skipped", "resync"}
        assert redis_client.llen(keys.push_queue_key(POD)) == queued + 1
    else:
        assert answer["error"]
        assert _state(redis_client) == before


@settings(max_examples=examples(30), deadline=None, suppress_health_check=FIXTURES)
@given(rank=st.one_of(st.integers(-(2**63), -1), st.integers(2, 2**64 - 1)))
def test_any_rank_outside_the_engine_is_400(token, redis_client, drain_held, rank) -> None:
    assert drain_held.renew()
    before = _state(redis_client)
    response = _post(msgspec.msgpack.encode([1.5, [["AllBlocksCleared"]], rank]), token)
    assert response.status_code == 400
    assert f"rank {rank}" in response.json()["error"]
    assert _state(redis_client) == before


@settings(max_examples=examples(30), deadline=None, suppress_health_check=FIXTURES)
@given(body=rejected_payloads)
def test_a_malicious_body_queues_no_event(token, redis_client, body) -> None:
    response = _post(body, token)
    assert response.status_code in (202, 400)
    if response.status_code == 202:
        assert response.json()["events"] == 0 and response.json()["skipped"]


def test_nested_msgpack_is_a_400_with_a_clear_message(token, redis_client) -> None:
    response = _post(b"\x91" * 100_000 + b"\x01", token)
    assert response.status_code == 400
    assert response.json()["error"] == "undecodable batch: nested deeper than the decoder goes"
    assert not redis_client.exists(keys.push_queue_key(POD))
