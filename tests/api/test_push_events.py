"""POST /api/v1/events/<pod>: engines push msgpack batches; a real worker applies them in order."""

import pytest
import redis
from django.test import Client, override_settings

from kvadmin.api.models import ApiToken
from kvadmin.engines.models import Engine
from kvadmin.engines.removal import remove_engine
from kvadmin.fleet.wire import Encoding, encode_batch
from kvadmin.index import status
from kvadmin.index.streams import push_stream
from kvadmin.ingest import pushed
from scoring import keys
from tests.index import MODEL
from tests.ingest.blocks import key, removed, stored
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)
POD = "vllm-0.default"
URL = f"/api/v1/events/{POD}"


@pytest.fixture
def token() -> str:
    """An engine pusher's token, for the registered pod."""
    Engine.objects.create(pod=POD, model=MODEL, events_endpoint="tcp://127.0.0.1:1")
    return ApiToken.issue("engine-pusher", "events:push")[1]


def _post(body: bytes, token: str | None, content_type: str = "application/msgpack"):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return Client().post(URL, body, content_type=content_type, headers=headers)


def _batch(*events) -> bytes:
    return encode_batch(Encoding.VLLM_MAP, list(events))


def test_it_requires_a_token(token) -> None:
    assert _post(_batch(stored(1)), None).status_code == 401
    assert _post(_batch(stored(1)), "kva_wrong").status_code == 401


def test_a_revoked_token_is_refused(token) -> None:
    ApiToken.objects.get(name="engine-pusher").revoke()
    assert _post(_batch(stored(1)), token).status_code == 401


def test_it_refuses_other_content_types(token) -> None:
    assert _post(b"{}", token, content_type="application/json").status_code == 415


def test_an_unknown_pod_is_404(token) -> None:
    response = Client().post(
        "/api/v1/events/nope-0.default",
        _batch(stored(1)),
        content_type="application/msgpack",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 404


def test_an_undecodable_body_is_400_and_queues_nothing(token, redis_client) -> None:
    response = _post(b"\xc1garbage", token)
    assert response.status_code == 400
    assert "undecodable" in response.json()["error"]
    assert not redis_client.exists(f"kvadmin:push:{POD}")


@override_settings(KVADMIN={"PUSH_MAX_BYTES": 64})
def test_an_oversized_batch_is_413(token, redis_client) -> None:
    response = _post(_batch(stored(*range(10))), token)
    assert response.status_code == 413
    assert not redis_client.exists(f"kvadmin:push:{POD}")


def test_pushed_batches_are_applied_in_order_by_a_worker(token, redis_client, celery_worker):
    for events in ([stored(1, 2)], [removed(1)], [stored(1, medium="CPU")], [removed(2)]):
        assert _post(_batch(*events), token).status_code == 202
    wait_until(lambda: not redis_client.exists(f"kvadmin:push:{POD}"), what="queue drained")
    wait_until(lambda: redis_client.hget(key(1), POD), what="block 1 applied")
    assert redis_client.hget(key(1), POD).endswith("|CPU")
    assert redis_client.hget(key(2), POD) is None


def test_batches_queued_for_a_removed_engine_never_reach_the_next_one(
    token, redis_client, celery_worker
):
    """Removed with a pushed batch still queued, then registered again under the same pod:
    the old registration's batch is dropped and counted, the new one's applies."""
    stream = push_stream(POD, 0)
    pushed.enqueue(redis_client, stream, Engine.objects.get(pod=POD).pk, _batch(stored(1)))
    remove_engine(POD)
    Engine.objects.create(pod=POD, model=MODEL, events_endpoint="tcp://127.0.0.1:1")

    assert _post(_batch(stored(2)), token).status_code == 202
    wait_until(
        lambda: status.read_statuses(redis_client, [stream])[0].status.get("stale_pushes") == "1",
        what="drop",
    )
    assert redis_client.hget(key(2), POD)
    assert redis_client.hget(key(1), POD) is None


def test_queue_entries_keep_payloads_whole_and_read_older_builds_entries(redis_client, redis_url):
    payload = b"\x93|:\x01|"  # msgpack may hold the separators
    pushed.enqueue(redis_client, push_stream(POD, 0), 7, payload)
    redis_client.rpush(keys.push_queue_key(POD), b"9|" + payload)  # queued by an older build
    entries = pushed.pending(redis.Redis.from_url(redis_url), POD)
    assert entries == [pushed.Pushed(1, 7, payload), pushed.Pushed(9, None, payload)]


def test_taking_entries_off_twice_takes_no_more(redis_client) -> None:
    """A holder whose lock lapsed mid-chunk finishes after the next holder took the same
    entries off: the entries behind them stay."""
    for n in range(4):
        pushed.enqueue(redis_client, push_stream(POD, 0), 7, b"%d" % n)
    pushed.done(redis_client, POD, 2)
    pushed.done(redis_client, POD, 2)
    assert redis_client.lrange(keys.push_queue_key(POD), 0, -1) == ["3:7|2", "4:7|3"]
