"""The dashboard's figures, from the index as ingestion and scoring leave it: engines with
their stream health, blocks per medium, rates from the sampled totals, the hour's hit ratio
per medium, and the last garbage collection."""

import json
import time
from dataclasses import dataclass, field

import pytest

from kvadmin.dashboard.tiles import dashboard_tiles
from kvadmin.engines.models import Engine
from kvadmin.index import gc
from kvadmin.index.writer import Applier
from kvadmin.metrics import recorder
from scoring.keys import DASHBOARD_SAMPLES_KEY, WORKERS_KEY, stream_lease_key, stream_status_key
from tests.index import MODEL

pytestmark = pytest.mark.django_db
PODS = ["vllm-0.default", "vllm-1.default", "vllm-2.default"]


@dataclass
class Scored:
    pod: str
    media: dict[str, int]


@dataclass
class DecisionStub:
    """The fields of a routing Decision the recorder reads."""

    ts: float
    blocks: int
    longest_match: int
    chosen: str
    scores: list[Scored]
    model: str = MODEL
    input: str = "token_ids"
    timings_ms: dict[str, float] = field(default_factory=lambda: {"index": 0.3, "total": 1.0})
    tokenizer: str = "given"
    tokenizer_fallback: str = ""


@pytest.fixture
def fleet(redis_client, index) -> None:
    """Three engines: vllm-0 read by a live worker, vllm-1 whose worker is gone, vllm-2 read
    by a live worker but late; vllm-0 holds 3 GPU and 2 CPU blocks."""
    for pod in PODS:
        Engine.objects.create(pod=pod, model=MODEL, kind="vllm", events_endpoint="tcp://h:1")
    now = time.time()
    redis_client.zadd(WORKERS_KEY, {"worker-a": now})
    for pod in PODS:
        redis_client.hset(stream_status_key(pod, 0), mapping={"connected": 1, "owner": "worker-a"})
    for pod in ("vllm-0.default", "vllm-2.default"):
        redis_client.set(stream_lease_key(pod, 0), "worker-a")
    redis_client.hset(
        stream_status_key("vllm-2.default", 0), mapping={"lag_seconds": 42, "last_event_at": now}
    )
    index.store(PODS[0], range(3), "GPU", at=now)
    index.offload(PODS[0], range(2), "CPU", at=now)


def _health(tiles) -> dict[str, str]:
    return {engine.pod: engine.health for engine in tiles.engines}


def test_engines_show_their_stream_health(fleet, redis_client) -> None:
    tiles = dashboard_tiles(redis_client)

    assert _health(tiles) == {
        "vllm-0.default": "ok",
        "vllm-1.default": "disconnected",
        "vllm-2.default": "lagging",
    }
    assert [e.pod for e in tiles.engines][0] == "vllm-1.default", "worst first"
    # Nobody probes these engines: without evidence of life none of them is "ok".
    assert {e.pod: e.state for e in tiles.engines} == {
        "vllm-0.default": "stale",
        "vllm-1.default": "stale",
        "vllm-2.default": "lagging",
    }
    assert tiles.health_counts == {"ok": 1, "lagging": 1, "degraded": 0, "disconnected": 1}
    assert (tiles.streams, tiles.connected, tiles.workers) == (3, 2, 1)


def test_lost_batches_since_the_last_minute_degrade_an_engine(fleet, redis_client) -> None:
    dashboard_tiles(redis_client, record_sample=True)
    _age_samples(redis_client, 30)
    redis_client.hincrby(stream_status_key("vllm-0.default", 0), "batches_lost", 3)

    assert _health(dashboard_tiles(redis_client))["vllm-0.default"] == "degraded"


def test_blocks_per_medium_add_up_over_the_fleet(fleet, redis_client) -> None:
    tiles = dashboard_tiles(redis_client)

    assert [(medium, count) for medium, count, _ in tiles.media] == [("GPU", 3), ("CPU", 2)]
    assert tiles.total_blocks == 5
    assert next(e for e in tiles.engines if e.pod == PODS[0]).blocks == 5


def test_rates_come_from_the_sampled_totals(fleet, redis_client) -> None:
    assert dashboard_tiles(redis_client, record_sample=True).events_per_s is None
    _age_samples(redis_client, 4)
    redis_client.hincrby(stream_status_key("vllm-0.default", 0), "events", 20)
    redis_client.hincrby(stream_status_key("vllm-0.default", 0), "blocks_stored", 40)

    tiles = dashboard_tiles(redis_client)

    # Over the time between the sample and the tiles: the 4 s it was aged, and however long
    # this machine took since (a loaded one takes longer).
    (sampled_at,) = (json.loads(s)["t"] for s in redis_client.lrange(DASHBOARD_SAMPLES_KEY, 0, -1))
    seconds = tiles.taken_at - sampled_at
    assert seconds >= 4
    assert tiles.events_per_s == pytest.approx(20 / seconds)
    assert tiles.blocks_per_s == pytest.approx(40 / seconds)
    assert tiles.decisions_per_s == 0


def test_the_hour_hit_ratio_is_split_by_medium(fleet, redis_client) -> None:
    now = time.time()
    hit = DecisionStub(now, 10, 8, PODS[0], [Scored(PODS[0], {"GPU": 6, "CPU": 2})])
    miss = DecisionStub(now, 10, 0, PODS[1], [])
    for decision in (hit, miss):
        recorder.record_decision(redis_client, decision)

    tiles = dashboard_tiles(redis_client)

    assert tiles.decisions_hour == 2
    assert tiles.hit_ratio_hour == pytest.approx(8 / 20)
    assert tiles.hit_ratio_by_medium == [("GPU", pytest.approx(6 / 20)), ("CPU", 0.1)]
    chart = json.loads(tiles.chart.as_json())
    assert chart["total"][-1] == pytest.approx(0.4)
    assert dict(chart["media"])["GPU"][-1] == pytest.approx(0.3)
    assert chart["total"][0] is None, "no decisions an hour ago"


def test_the_last_garbage_collection_is_shown(fleet, redis_client) -> None:
    report = gc.collect_garbage(Applier(redis_client), 86400, registered=lambda: set(PODS))

    tiles = dashboard_tiles(redis_client)

    assert tiles.gc_last == report
    assert tiles.gc_totals["runs"] == 1
    assert 0 <= tiles.gc_age < 60


def _age_samples(redis_client, seconds: float) -> None:
    """Pretend the recorded samples were taken `seconds` earlier (no sleeping in tests)."""
    samples = [json.loads(s) for s in redis_client.lrange(DASHBOARD_SAMPLES_KEY, 0, -1)]
    redis_client.delete(DASHBOARD_SAMPLES_KEY)
    for sample in reversed(samples):
        sample["t"] -= seconds
        redis_client.lpush(DASHBOARD_SAMPLES_KEY, json.dumps(sample))
