"""The probe task asks each enabled engine's replay socket and /health (real sockets, a real
simulated engine): a live engine answers both; once the engine is gone, the next probe finds
it unreachable, and the dashboard, the pod page and /readyz say so."""

import json

import pytest
import redis
from django.test import Client

from kvadmin.api.models import ApiToken
from kvadmin.dashboard.tiles import dashboard_tiles
from kvadmin.engines.models import Engine
from kvadmin.index import status
from kvadmin.index.streams import StreamId
from kvadmin.ingest import probes
from kvadmin.ingest.probes import probe_engines
from kvadmin.ingest.streams import StreamSpec
from kvadmin.residency.pod_detail import pod_page
from scoring import keys
from tests.conftest import local_config
from tests.ingest.conftest import start_loop  # noqa: F401  (a shared fixture)
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db
POD = "vllm-0.default"


@pytest.fixture
def engine(start_fleet, start_loop, redis_client: redis.Redis):  # noqa: F811
    """A registered simulated vLLM pod with a replay socket and an HTTP server, its stream read
    by an ingest loop (as a worker runs it)."""
    config = local_config(POD)
    fleet = start_fleet(config)
    Engine.objects.create(**config.engine_fields())
    spec = StreamSpec(
        StreamId(POD, 0),
        config.model,
        config.kind,
        config.events_endpoint,
        config.replay_endpoint,
        config.topic.encode(),
        config.block_size,
    )
    start_loop([spec])
    wait_until(
        lambda: status.read_statuses(redis_client, [spec.id])[0].connected,
        what="the stream connected",
    )
    return fleet


def _readyz(client: Client) -> tuple[int, dict]:
    token = ApiToken.issue(f"probe-{ApiToken.objects.count()}")[1]
    response = client.get("/readyz", HTTP_AUTHORIZATION=f"Bearer {token}")
    return response.status_code, json.loads(response.content)


def test_a_live_engine_answers_both_probes(engine, redis_client: redis.Redis) -> None:
    assert probe_engines() == 1

    probe = redis_client.hgetall(keys.engine_probe_key(POD))
    assert probe["replay_ok"] == "1" and probe["http_ok"] == "1", probe
    health = pod_page(POD, redis_client).summary.health
    assert health is not None and health.state == "idle"
    assert health.healthy


def test_a_dead_engine_is_unreachable_everywhere(
    engine, redis_client: redis.Redis, client: Client
) -> None:
    probe_engines()
    engine.stop()

    probes.probe_and_record(redis_client, timeout=0.3)

    probe = redis_client.hgetall(keys.engine_probe_key(POD))
    assert probe["replay_ok"] == "0" and probe["http_ok"] == "0", probe
    assert pod_page(POD, redis_client).summary.health.state == "unreachable"
    tiles = dashboard_tiles(redis_client)
    assert [e.state for e in tiles.engines] == ["unreachable"]
    assert tiles.healthy_engines == 0 and tiles.state_counts["unreachable"] == 1
    code, body = _readyz(client)
    assert code == 503 and body["status"] == "not ready"
    assert body["checks"]["engines"]["unhealthy"][POD]["state"] == "unreachable"


def test_an_engine_nobody_probes_is_stale(engine, redis_client: redis.Redis) -> None:
    health = pod_page(POD, redis_client).summary.health
    assert health.state == "stale" and not health.healthy
