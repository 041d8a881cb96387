"""Index groups on real Redis primaries of the test's own: the session's Redis is REDIS_URL
(app state and the default group), `primaries` two more redis-server processes on free ports
for the named groups."""

import json
from collections.abc import Callable, Iterator

import pytest
import redis
from django.conf import settings
from django.test import override_settings

from kvadmin.redis_server import RedisServer
from tests.routing.conftest import engines, post_score, token  # noqa: F401 (scoring fixtures)
from tests.sentinel.conftest import topology  # noqa: F401 (a Sentinel-watched primary)

GROUPED = "Qwen/*"
"""The named group's pattern in these tests: tests.index.MODEL ("Qwen/Qwen3-8B") matches it,
OTHER_MODEL (a Llama) falls to the default group."""


@pytest.fixture
def primaries() -> Iterator[list[RedisServer]]:
    """Two redis-server primaries of this test alone, gone at its end."""
    servers = [RedisServer().start(), RedisServer().start()]
    try:
        yield servers
    finally:
        for server in servers:
            server.stop()


Configure = Callable[[dict[str, str]], None]


@pytest.fixture
def configure_groups() -> Iterator[Configure]:
    """Set KVADMIN_INDEX_GROUPS (a dict of patterns to URLs) for the rest of the test; may be
    called again to change it (a move)."""
    overrides: list[override_settings] = []

    def configure(groups: dict[str, str]) -> None:
        if overrides:
            overrides.pop().disable()
        knobs = dict(getattr(settings, "KVADMIN", {})) | {"INDEX_GROUPS": json.dumps(groups)}
        override = override_settings(KVADMIN=knobs)
        override.enable()
        overrides.append(override)

    yield configure
    for override in overrides:
        override.disable()


@pytest.fixture
def grouped(primaries: list[RedisServer], configure_groups: Configure, redis_url: str):
    """MODEL's index on the first extra primary; every other model's on REDIS_URL. Yields the
    named group's client, emptied."""
    configure_groups({GROUPED: primaries[0].url, "*": redis_url})
    client = redis.Redis.from_url(primaries[0].url, decode_responses=True)
    client.flushdb()
    yield client
    client.close()


GROUPED_POD = "vllm-q.default"
DEFAULT_POD = "vllm-l.default"


@pytest.fixture
def two_models(db, grouped: redis.Redis) -> dict[str, str]:
    """A registered engine of MODEL (the named group) and one of OTHER_MODEL (the default
    group): pod -> model."""
    from kvadmin.engines.models import Engine
    from tests.index import MODEL, OTHER_MODEL

    pods = {GROUPED_POD: MODEL, DEFAULT_POD: OTHER_MODEL}
    for number, (pod, model) in enumerate(pods.items()):
        Engine.objects.create(
            pod=pod, model=model, kind="vllm", events_endpoint=f"tcp://127.0.0.1:{5557 + number}"
        )
    return pods
