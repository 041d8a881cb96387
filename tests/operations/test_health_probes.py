"""Kubernetes probes: /healthz says the process is up; /readyz says Redis, the database and
(when engines are registered) a live ingest worker holding stream leases are all there, and
some engine shows evidence of life."""

import json

import pytest
from django.test import Client

from kvadmin.api.models import ApiToken
from kvadmin.engines.models import Engine
from kvadmin.index import status
from kvadmin.index.streams import StreamId
from kvadmin.ingest.probes import probe_and_record
from tests.index import MODEL
from tests.ingest.conftest import spec_for
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db
POD = "vllm-0.default"


def _ready(client: Client) -> tuple[int, dict]:
    """What a caller with an API token sees: the details of each check."""
    token = ApiToken.issue(f"probe-{ApiToken.objects.count()}")[1]
    response = client.get("/readyz", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response["Content-Type"] == "application/json"
    return response.status_code, json.loads(response.content)


def test_liveness_needs_no_login_and_nothing_else(client: Client) -> None:
    response = client.get("/healthz")

    assert response.status_code == 200
    assert json.loads(response.content) == {"status": "ok"}


def test_it_is_ready_without_engines(client: Client, redis_client) -> None:
    code, body = _ready(client)

    assert code == 200
    assert body["status"] == "ready"
    assert body["checks"]["redis"]["ok"] and body["checks"]["database"]["ok"]
    assert body["checks"]["ingest"]["ok"] is True
    assert body["checks"]["ingest"]["streams"] == 0


def test_registered_engines_without_a_worker_are_not_ready(client: Client, redis_client) -> None:
    Engine.objects.create(pod=POD, model=MODEL, kind="vllm", events_endpoint="tcp://h:5557")

    code, body = _ready(client)

    assert code == 503
    assert body["status"] == "not ready"
    assert body["checks"]["ingest"]["ok"] is False
    assert body["checks"]["ingest"]["error"] == "no live ingest worker"


def test_a_worker_holding_the_streams_of_a_live_engine_makes_it_ready(
    client: Client, redis_client, publisher, start_loop
) -> None:
    Engine.objects.create(
        pod=POD,
        model=MODEL,
        kind="vllm",
        events_endpoint=publisher.endpoint,
        replay_endpoint=publisher.replay_endpoint,
        topic="kv-events",
    )
    start_loop([spec_for(publisher, POD)])
    wait_until(lambda: status.read_statuses(redis_client, [StreamId(POD, 0)])[0].connected)
    code, body = _ready(client)
    assert code == 503, "nobody probed the engine yet: no evidence that it lives"
    assert body["checks"]["engines"]["unhealthy"][POD]["state"] == "stale"

    probe_and_record(redis_client)
    code, body = _ready(client)

    assert code == 200 and body["status"] == "ready"
    assert body["checks"]["ingest"]["workers"] == 1
    assert body["checks"]["ingest"]["leased"] == body["checks"]["ingest"]["streams"] == 1
    assert body["checks"]["engines"]["states"] == {"idle": 1}
