"""Removing an engine purges exactly its index entries."""

import threading

import pytest
from django.core.management import call_command
from django.db import connection

from kvadmin.engines.models import Engine
from kvadmin.index import status
from kvadmin.index.pod_lock import DrainLock
from kvadmin.index.streams import StreamId, push_stream
from scoring.keys import block_key, stream_status_key
from tests.index import MODEL, std
from tests.waiting import patient, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_purges_the_removed_pod_only(redis_client, index) -> None:
    for pod in ("a-0.default", "b-0.default"):
        Engine.objects.create(pod=pod, model=MODEL, events_endpoint="tcp://127.0.0.1:1")
        index.store(pod, range(3))
    call_command("engines", "remove", "--pod", "a-0.default")
    key = block_key(MODEL, std(0))
    assert redis_client.hgetall(key).keys() == {"b-0.default"}
    assert not Engine.objects.filter(pod="a-0.default").exists()
    assert not redis_client.keys("*a-0.default*")


def test_its_streams_start_afresh_when_registered_again(redis_client, index) -> None:
    """A stream's last seq outliving its engine would make a new engine's first batches
    look applied already: every stream of the pod goes, pushed ones and ones that stored
    nothing included."""
    pod = "a-0.default"
    Engine.objects.create(pod=pod, model=MODEL, events_endpoint="tcp://127.0.0.1:1", dp_size=2)
    index.store(pod, range(2))
    index.store(pod, range(2, 4), rank=1, pushed=True)
    status.connected(redis_client, StreamId(pod, 1), "worker")  # connected, nothing stored
    Engine.objects.create(pod="b-0.default", model=MODEL, events_endpoint="tcp://127.0.0.1:1")
    index.store("b-0.default", range(2))

    call_command("engines", "remove", "--pod", pod)

    for stream in (StreamId(pod, 0), StreamId(pod, 1), push_stream(pod, 0), push_stream(pod, 1)):
        assert status.last_seq(redis_client, stream) == -1
        assert not redis_client.exists(stream_status_key(pod, stream.name))
    assert status.last_seq(redis_client, StreamId("b-0.default", 0)) == 0


def test_it_waits_for_a_chunk_of_pushed_batches_being_applied(redis_client, index) -> None:
    """A task applying pushed batches holds the pod's drain lock; a chunk it had started
    when the engine went must not land after the purge."""
    pod = "a-0.default"
    Engine.objects.create(pod=pod, model=MODEL, events_endpoint="tcp://127.0.0.1:1")
    task = DrainLock(redis_client, pod)
    assert task.acquire()

    def remove() -> None:
        try:
            call_command("engines", "remove", "--pod", pod)
        finally:
            connection.close()

    remover = threading.Thread(target=remove)
    remover.start()
    wait_until(lambda: not Engine.objects.filter(pod=pod).exists(), what="the engine row gone")
    index.store(pod, range(2), pushed=True)  # the task's chunk
    task.release()
    remover.join(timeout=patient(30))
    assert not remover.is_alive()
    assert not redis_client.keys("*a-0.default*")


def test_a_lapsed_holder_neither_renews_nor_releases_the_next_holders_lock(redis_client):
    stalled, next_holder = (DrainLock(redis_client, "a-0.default") for _ in range(2))
    assert stalled.acquire()
    redis_client.delete(stalled.key)  # its lock lapsed
    assert next_holder.acquire()
    assert not stalled.renew()
    stalled.release()
    assert not DrainLock(redis_client, "a-0.default").acquire()
    assert next_holder.renew()
