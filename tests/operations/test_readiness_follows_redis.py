"""Readiness fails fast while Redis is down and recovers by itself when Redis is back: probed
against a Redis server of this test's own, never the session's."""

import json
import time
from collections.abc import Iterator

import pytest
from django.test import Client, override_settings

from kvadmin.api.models import ApiToken
from kvadmin.redis_server import RedisServer
from tests.waiting import patient, wait_until

pytestmark = pytest.mark.django_db


@pytest.fixture
def own_redis(own_redis: RedisServer) -> Iterator[RedisServer]:
    """The test's own redis-server as the index's, that the test stops and starts again."""
    with override_settings(INDEX_REDIS_URL=own_redis.url):
        yield own_redis


def _ready(client: Client) -> tuple[int, dict]:
    """What a caller with an API token sees: the details of each check."""
    token = ApiToken.issue(f"probe-{ApiToken.objects.count()}")[1]
    response = client.get("/readyz", HTTP_AUTHORIZATION=f"Bearer {token}")
    return response.status_code, json.loads(response.content)


def test_readiness_fails_while_redis_is_down_and_recovers(own_redis, client: Client) -> None:
    assert _ready(client)[0] == 200

    own_redis.stop()
    started = time.monotonic()
    code, body = _ready(client)

    assert code == 503
    # The Redis check gives up within a second and never retries: well inside this bound on
    # a busy machine too; a check that waited out a long timeout would not be.
    assert time.monotonic() - started < patient(5), "a probe must answer within its timeout"
    assert body["checks"]["redis"]["ok"] is False
    assert "Connection" in body["checks"]["redis"]["error"]
    assert body["checks"]["database"]["ok"] is True

    own_redis.start()
    wait_until(lambda: _ready(client)[0] == 200, what="readiness to recover")
