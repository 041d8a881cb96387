"""Real Celery worker processes consume registered engines, share the streams through leases,
and take over the streams of a worker killed with SIGKILL."""

import os
import signal
import subprocess
from collections.abc import Iterator

import pytest

from kvadmin.engines.models import Engine
from kvadmin.fleet.publisher import Publisher
from kvadmin.fleet.wire import Encoding
from kvadmin.index import status
from kvadmin.index.streams import StreamId
from kvadmin.ingest.leases import Leases
from scoring.keys import stream_lease_key
from tests.conftest import start_worker, stop_process
from tests.index import MODEL
from tests.ingest.blocks import key, stored
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)
LEASE_SECONDS = 3
PODS = ["vllm-0.default", "vllm-1.default"]


@pytest.fixture
def workers(subprocess_env, redis_client) -> Iterator[dict[str, subprocess.Popen]]:
    """Start named ingest workers on demand; all stopped after the test."""
    started: dict[str, subprocess.Popen] = {}
    env = subprocess_env | {"KVADMIN_LEASE_SECONDS": str(LEASE_SECONDS)}

    def start(name: str) -> subprocess.Popen:
        started[name] = start_worker(env, name)
        return started[name]

    yield start  # type: ignore[misc]
    stop_process(*started.values())


@pytest.fixture
def engines() -> Iterator[list[Publisher]]:
    """Two registered vLLM engines, one stream each."""
    publishers = []
    for n in range(2):
        base = Publisher(encoding=Encoding.VLLM_MAP, topic=b"kv-events")
        publishers.append(base)
        Engine.objects.create(
            pod=f"vllm-{n}.default",
            model=MODEL,
            kind="vllm",
            events_endpoint=base.endpoint,
            replay_endpoint=base.replay_endpoint,
            topic="kv-events",
        )
    yield publishers
    for publisher in publishers:
        publisher.close()


def _owner(redis_client, pod: str) -> str | None:
    return redis_client.get(stream_lease_key(pod, 0))


def _wait_applied(redis_client, pod: str, seq: int) -> None:
    wait_until(
        lambda: status.last_seq(redis_client, StreamId(pod, 0)) >= seq,
        timeout=30,
        what=f"{pod} to apply seq {seq}",
    )


def test_a_worker_consumes_every_registered_engine(workers, engines, redis_client) -> None:
    workers("solo")
    for n, publisher in enumerate(engines):
        seq = publisher.publish([stored(n)])
        pod = f"vllm-{n}.default"
        _wait_applied(redis_client, pod, seq)
        assert redis_client.hget(key(n), pod).endswith("|GPU")


def _spread(redis_client, pods: list[str]) -> bool:
    owners = {_owner(redis_client, pod) for pod in pods}
    return None not in owners and len(owners) == len(pods)


def test_streams_spread_over_workers(workers, engines, redis_client) -> None:
    workers("a")
    workers("b")
    wait_until(lambda: _spread(redis_client, PODS), timeout=30, what="one stream per worker")


def test_a_killed_workers_streams_are_taken_over(workers, engines, redis_client) -> None:
    processes = {"a": workers("a"), "b": workers("b")}
    wait_until(lambda: _spread(redis_client, PODS), timeout=30, what="one stream per worker")
    first = [publisher.publish([stored(10 + n)]) for n, publisher in enumerate(engines)]
    for pod, seq in zip(PODS, first, strict=True):
        _wait_applied(redis_client, pod, seq)

    victim = _owner(redis_client, PODS[0]).partition("@")[0]
    survivor = "b" if victim == "a" else "a"
    os.kill(processes[victim].pid, signal.SIGKILL)
    processes[victim].wait()
    # Published while nobody reads the stream: replay must bring it in after the takeover.
    later = [publisher.publish([stored(20 + n)]) for n, publisher in enumerate(engines)]

    wait_until(
        lambda: (_owner(redis_client, PODS[0]) or "").startswith(f"{survivor}@"),
        timeout=LEASE_SECONDS * 4,
        what="the stream taken over",
    )
    for n, (pod, seq) in enumerate(zip(PODS, later, strict=True)):
        _wait_applied(redis_client, pod, seq)
        counters = status.read_statuses(redis_client, [StreamId(pod, 0)])[0].status
        assert counters["batches"] == "2", "each batch applied exactly once"
        assert redis_client.hget(key(20 + n), pod).endswith("|GPU")


def test_registry_changes_reach_running_workers(workers, redis_client) -> None:
    workers("solo")
    with Publisher(encoding=Encoding.SGLANG_ARRAY) as publisher:
        Engine.objects.create(
            pod="sglang-0.default",
            model=MODEL,
            kind="sglang",
            events_endpoint=publisher.endpoint,
            replay_endpoint=publisher.replay_endpoint,
        )
        seq = publisher.publish([stored(1, encoding=Encoding.SGLANG_ARRAY)])
        _wait_applied(redis_client, "sglang-0.default", seq)
        Engine.objects.filter(pod="sglang-0.default").update(enabled=False)
        from kvadmin.engines.registry import bump_registry_version

        bump_registry_version()
        wait_until(
            lambda: _owner(redis_client, "sglang-0.default") is None,
            timeout=30,
            what="disabled engine released",
        )


def test_fair_share_is_the_ceiling() -> None:
    assert Leases.fair_share(4, 2) == 2
    assert Leases.fair_share(5, 2) == 3
    assert Leases.fair_share(1, 3) == 1
