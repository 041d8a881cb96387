"""Pushed batches live in streams of their own: no rank a push names reaches a ZMQ stream's
state, ranks outside [0, dp_size) are refused by the API and again by the task, disabled
engines' pushes are refused, and a push to a stream without state is told to resync."""

import msgspec
import pytest
from django.test import Client

from kvadmin.api.models import ApiToken
from kvadmin.engines.models import Engine
from kvadmin.fleet.wire import Encoding, encode_batch
from kvadmin.index import status
from kvadmin.index.streams import StreamId, push_stream
from kvadmin.index.writer import Applier
from kvadmin.ingest import pushed
from kvadmin.ingest.decode import decode_batch
from kvadmin.ingest.streams import StreamSpec
from kvadmin.ingest.tasks import apply_pushed
from scoring import keys
from tests.engine_blocks import bucket_keys, stream_blocks
from tests.index import MODEL
from tests.ingest.blocks import key, stored
from tests.ingest.conftest import snapshot
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)
POD = "vllm-0.default"
URL = f"/api/v1/events/{POD}"
ZMQ_RANK_0 = StreamId(POD, 0)


@pytest.fixture
def token() -> str:
    """An engine pusher's token, for the registered pod."""
    Engine.objects.create(pod=POD, model=MODEL, events_endpoint="tcp://127.0.0.1:1")
    return ApiToken.issue("engine-pusher", "events:push")[1]


@pytest.fixture
def zmq_state(redis_client) -> dict[str, object]:
    """The engine's ZMQ rank 0 stream applied through seq 5, holding block 1: what a push
    must never touch. Returns the index as it stands."""
    spec = StreamSpec(ZMQ_RANK_0, MODEL, "vllm", "tcp://127.0.0.1:1", None, b"", 16)
    Applier(redis_client).apply_batches(spec, [(5, decode_batch(_batch(stored(1))))])
    return snapshot(redis_client)


def _post(body: bytes, token: str):
    headers = {"Authorization": f"Bearer {token}"}
    return Client().post(URL, body, content_type="application/msgpack", headers=headers)


def _batch(*events, rank: int | None = 0) -> bytes:
    return encode_batch(Encoding.VLLM_MAP, list(events), rank=rank)


def _clear(rank: int) -> bytes:
    """A batch that would wipe the stream it lands on, naming any 64-bit rank."""
    return msgspec.msgpack.encode([1.0, [["AllBlocksCleared"]], rank])


@pytest.mark.parametrize("rank", [-1, 1, 2**64 - 1, -(2**63)])
def test_a_rank_outside_the_engine_is_400_and_changes_nothing(token, redis_client, zmq_state, rank):
    response = _post(_clear(rank), token)
    assert response.status_code == 400
    assert "rank" in response.json()["error"]
    assert snapshot(redis_client) == zmq_state


def test_a_pushed_rank_0_batch_leaves_the_zmq_rank_0_stream_alone(
    token, redis_client, zmq_state, celery_worker
) -> None:
    zmq_before = status.read_statuses(redis_client, [ZMQ_RANK_0])[0].status
    engine_blocks = stream_blocks(redis_client, POD, "0")
    assert _post(_clear(0), token).status_code == 202
    assert _post(_batch(stored(2)), token).status_code == 202
    wait_until(lambda: redis_client.hget(key(2), POD), what="the push applied")
    assert status.read_statuses(redis_client, [ZMQ_RANK_0])[0].status == zmq_before
    assert stream_blocks(redis_client, POD, "0") == engine_blocks
    assert redis_client.hget(key(1), POD)  # the ZMQ stream's block survived the pushed clear
    assert status.last_seq(redis_client, push_stream(POD, 0)) == 2


def test_the_task_refuses_a_queued_rank_the_engine_does_not_have(
    token, redis_client, zmq_state, celery_worker
) -> None:
    """Queued by an older build, which checked only that the rank was an integer (rank -1
    was its way into the ZMQ rank 0 stream)."""
    redis_client.rpush(keys.push_queue_key(POD), b"1|" + _clear(-1))
    assert _post(_batch(stored(2)), token).status_code == 202
    wait_until(lambda: redis_client.hget(key(2), POD), what="the next push applied")

    # The task counts what it refused once its whole chunk is applied: after the push above.
    def refused_count() -> str | None:
        return status.read_statuses(redis_client, [push_stream(POD, 0)])[0].status.get(
            "bad_rank_pushes"
        )

    wait_until(refused_count, what="the refusal counted")
    refused = refused_count()
    assert refused == "1"
    assert redis_client.hget(key(1), POD)
    assert (
        status.read_statuses(redis_client, [ZMQ_RANK_0])[0].status
        == zmq_state[keys.stream_status_key(POD, "0")]
    )


def test_a_disabled_engine_is_409_and_queues_nothing(token, redis_client) -> None:
    Engine.objects.filter(pod=POD).update(enabled=False)
    response = _post(_batch(stored(1)), token)
    assert response.status_code == 409
    assert "disabled" in response.json()["error"]
    assert not redis_client.exists(keys.push_queue_key(POD))


def test_batches_queued_before_the_disable_are_not_applied(
    token, redis_client, celery_worker
) -> None:
    engine = Engine.objects.get(pod=POD)
    pushed.enqueue(redis_client, push_stream(POD, 0), engine.pk, _batch(stored(1)))
    Engine.objects.filter(pod=POD).update(enabled=False)
    apply_pushed.delay(POD)
    wait_until(lambda: not redis_client.exists(keys.push_queue_key(POD)), what="queue drained")
    assert (
        status.read_statuses(redis_client, [push_stream(POD, 0)])[0].status.get("disabled_pushes")
        == "1"
    )
    assert redis_client.hget(key(1), POD) is None


def test_the_first_push_to_a_stream_without_state_says_resync(token, redis_client) -> None:
    assert _post(_batch(stored(1)), token).json()["resync"] is True
    assert _post(_batch(stored(2)), token).json()["resync"] is False
    redis_client.flushdb()  # Redis lost its data: the pushed entries are gone
    assert _post(_batch(stored(3)), token).json()["resync"] is True
    assert _post(_batch(stored(4)), token).json()["resync"] is False


def test_a_pushed_stream_kept_by_an_older_build_is_purged_before_the_next_push_applies(
    token, redis_client, celery_worker
) -> None:
    """Older builds kept rank r's pushes as stream "-(r + 1)"; left beside the new stream, its
    blocks would stay in the index for good (the new stream's removals cannot reach them)."""
    spec = StreamSpec(push_stream(POD, 0), MODEL, "vllm", "", None, b"", 16)
    Applier(redis_client).apply_batches(spec, [(3, decode_batch(_batch(stored(1))))])
    for bucket in bucket_keys(redis_client, POD, "push:0"):
        redis_client.rename(bucket, bucket.replace("|push:0|", "|-1|"))
    redis_client.rename(keys.stream_status_key(POD, "push:0"), keys.stream_status_key(POD, "-1"))
    redis_client.srem(keys.pod_ranks_key(POD), "push:0")
    redis_client.sadd(keys.pod_ranks_key(POD), "-1")

    assert _post(_batch(stored(2)), token).json()["resync"] is True
    wait_until(lambda: redis_client.hget(key(2), POD), what="the push applied")
    assert redis_client.hget(key(1), POD) is None
    assert redis_client.smembers(keys.pod_ranks_key(POD)) == {"push:0"}
    assert not bucket_keys(redis_client, POD, "-1")
    assert not redis_client.exists(keys.stream_status_key(POD, "-1"))
