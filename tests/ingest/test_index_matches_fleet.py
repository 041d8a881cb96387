"""The key invariant: after random traffic with evictions, offloads, gaps, publisher restarts
and a worker killed with SIGKILL, the Redis index equals what the engines really hold.

Simulated vLLM and SGLang pods (one with two data-parallel ranks) publish over real ZMQ; two
real Celery worker processes consume them through leases; the comparison covers residency per
medium, kthena's matrix values (owner, best medium, value format) and kthena's engine-hash
mapping keys (one per engine block any rank of the pod holds with KVADMIN_SIDECAR_MAPPING_KEYS
on, none with it off) and, in both settings, kvadmin's own engine blocks of each rank.
"""

import os
import random
import re
import signal

import pytest

from kvadmin.engines.models import Engine
from kvadmin.fleet.fleet import Fleet
from kvadmin.fleet.pod import PodConfig
from kvadmin.index import status
from kvadmin.index.streams import StreamId
from scoring.keys import (
    POD_MODELS_KEY,
    engine_hash_key,
    pod_media_key,
    residency_key,
    stream_lease_key,
)
from scoring.weights import TierWeights
from tests.conftest import local_config, start_worker, stop_process
from tests.engine_blocks import stream_blocks
from tests.index import MAPPING_KEYS, MODEL
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)
VALUE = re.compile(r"^\d+\|[A-Z_]+$")


def _config(name: str, kind: str, **options: int) -> PodConfig:
    return local_config(name, kind, model=MODEL, gpu_blocks=40, **options)


def _index(redis_client, pod: str) -> set[tuple[int, str]]:
    media = redis_client.smembers(pod_media_key(pod))
    return {
        (int(std), medium)
        for medium in media
        for std in redis_client.zrange(residency_key(pod, medium), 0, -1)
    }


def _matrix(redis_client) -> dict[tuple[str, int], str]:
    values = {}
    for key in redis_client.scan_iter("matrix:kv:block:*"):
        std = int(key.rpartition("@")[2])
        for pod, value in redis_client.hgetall(key).items():
            values[(pod, std)] = value
    return values


def _expected_matrix(truth: dict[str, set[tuple[int, str]]]) -> dict[tuple[str, int], str]:
    weights = TierWeights()
    media: dict[tuple[str, int], set[str]] = {}
    for pod, held in truth.items():
        for std, medium in held:
            media.setdefault((pod, std), set()).add(medium)
    return {key: weights.best_medium(held) for key, held in media.items()}


def _mappings(redis_client, fleet: Fleet) -> dict[str, set[str]]:
    """kthena's engine-hash mapping keys, per pod: the engine hashes they name."""
    found: dict[str, set[str]] = {pod.name: set() for pod in fleet.pods}
    for pod in fleet.pods:
        prefix = engine_hash_key(pod.kind, pod.name, "")
        found[pod.name] = {key.removeprefix(prefix) for key in redis_client.scan_iter(prefix + "*")}
    return found


def _expected_mappings(fleet: Fleet, mapping_keys: bool) -> dict[str, set[str]]:
    """Every engine hash any rank of the pod holds (each was stored with tokens first), with
    the setting on."""
    return {
        pod.name: {eh for cache in pod.caches for eh, _ in cache.engine_contents()}
        if mapping_keys
        else set()
        for pod in fleet.pods
    }


def _engine_blocks(redis_client, fleet: Fleet) -> dict[tuple[str, int], set[str]]:
    """The engine hashes each stream's engine blocks hold, per (pod, rank)."""
    return {
        (pod.name, rank): set(stream_blocks(redis_client, pod.name, rank))
        for pod in fleet.pods
        for rank in range(len(pod.caches))
    }


def _expected_engine_blocks(fleet: Fleet) -> dict[tuple[str, int], set[str]]:
    """Every engine hash each rank holds, whatever the mapping-key setting."""
    return {
        (pod.name, rank): {eh for eh, _ in cache.engine_contents()}
        for pod in fleet.pods
        for rank, cache in enumerate(pod.caches)
    }


def _matches(redis_client, fleet: Fleet, mapping_keys: bool) -> bool:
    truth = fleet.contents()
    if any(_index(redis_client, pod) != held for pod, held in truth.items()):
        return False
    if _mappings(redis_client, fleet) != _expected_mappings(fleet, mapping_keys):
        return False
    if _engine_blocks(redis_client, fleet) != _expected_engine_blocks(fleet):
        return False
    matrix = _matrix(redis_client)
    expected = _expected_matrix(truth)
    return matrix.keys() == expected.keys() and all(
        VALUE.match(value) and value.partition("|")[2] == expected[key]
        for key, value in matrix.items()
    )


def _caught_up(redis_client, fleet: Fleet) -> None:
    """Every stream has applied everything its publisher sent so far."""
    fleet.flush()
    streams = [
        (StreamId(pod.name, rank), publisher.next_seq - 1)
        for pod in fleet.pods
        for rank, publisher in enumerate(pod.publishers)
    ]
    wait_until(
        lambda: all(status.last_seq(redis_client, s) == seq for s, seq in streams),
        timeout=30,
        what=f"every stream to catch up: {streams} "
        + str([status.read_statuses(redis_client, [s])[0].status for s, _ in streams]),
    )


RNG = random.Random(7)
PREFIXES = [[RNG.randrange(1, 150_000) for _ in range(16 * RNG.randint(2, 6))] for _ in range(8)]


def _traffic(fleet: Fleet, rng: random.Random, requests: int) -> None:
    """Shared system prompts (2-6 blocks) with per-request suffixes, on every pod in turn."""
    for n in range(requests):
        suffix = [rng.randrange(1, 150_000) for _ in range(16 * rng.randint(1, 4))]
        fleet.pods[n % len(fleet.pods)].serve(rng.choice(PREFIXES) + suffix)


@pytest.mark.parametrize("mapping_keys", MAPPING_KEYS)
def test_the_index_equals_the_fleets_caches(subprocess_env, redis_client, mapping_keys) -> None:
    configs = [
        _config("vllm-0.default", "vllm", cpu_blocks=40),
        _config("vllm-1.default", "vllm", dp_size=2, cpu_blocks=24),
        _config("sglang-0.default", "sglang", cpu_blocks=24, disk_blocks=40),
    ]
    env = subprocess_env | {
        "KVADMIN_LEASE_SECONDS": "3",
        "KVADMIN_SIDECAR_MAPPING_KEYS": "on" if mapping_keys else "off",
    }
    workers = {name: start_worker(env, name) for name in ("a", "b")}
    rng = random.Random(7)
    try:
        with Fleet(configs) as fleet:
            for config in configs:
                Engine.objects.create(**config.engine_fields())
            streams = [(c.name, r) for c in configs for r in range(c.dp_size)]
            wait_until(
                lambda: all(redis_client.get(stream_lease_key(p, r)) for p, r in streams),
                timeout=30,
                what="every stream owned",
            )
            fleet.wait_for_subscribers()
            _traffic(fleet, rng, 40)
            _caught_up(redis_client, fleet)

            fleet.pod("vllm-0.default").drop(count=3)  # a gap, repaired by replay
            _traffic(fleet, rng, 30)
            _caught_up(redis_client, fleet)

            fleet.pod("sglang-0.default").restart()  # seq reset, cache gone unannounced
            _traffic(fleet, rng, 30)
            _caught_up(redis_client, fleet)

            owner = redis_client.get(stream_lease_key("vllm-1.default", 1)).partition("@")[0]
            survivor = "b" if owner == "a" else "a"
            os.kill(workers[owner].pid, signal.SIGKILL)
            workers[owner].wait()
            _traffic(fleet, rng, 60)  # published while the stream has no reader
            _caught_up(redis_client, fleet)
            assert redis_client.get(stream_lease_key("vllm-1.default", 1)).startswith(survivor)

            fleet.pod("vllm-1.default").restart(rank=0)
            _traffic(fleet, rng, 60)
            _caught_up(redis_client, fleet)
            wait_until(
                lambda: _matches(redis_client, fleet, mapping_keys),
                timeout=30,
                what="the index to equal the fleet's caches",
            )
            assert set(redis_client.hkeys(POD_MODELS_KEY)) <= {c.name for c in configs}
            assert sum(len(held) for held in fleet.contents().values()) > 100
        # The faults really happened and were handled as such.
        assert (
            int(
                status.read_statuses(redis_client, [StreamId("vllm-0.default", 0)])[0].status[
                    "gaps"
                ]
            )
            >= 1
        )
        assert (
            status.read_statuses(redis_client, [StreamId("sglang-0.default", 0)])[0].status.get(
                "restarts"
            )
            == "1"
        )
        assert (
            status.read_statuses(redis_client, [StreamId("vllm-1.default", 0)])[0].status.get(
                "restarts"
            )
            == "1"
        )
        assert workers[owner].returncode == -signal.SIGKILL
    finally:
        stop_process(*workers.values())
