"""Fixtures for the residency browser: registered engines, people with and without the right to
purge, and pods that tokenize (the index itself is the root conftest's `index`)."""

from collections.abc import Callable, Iterator

import pytest
from django.contrib.auth.models import Permission

from kvadmin.engines.models import Engine
from kvadmin.fleet.fleet import Fleet
from kvadmin.fleet.pod import PodConfig
from kvadmin.redis_server import free_port
from kvadmin.routing.tokenize import CACHE
from tests.index import MODEL


def register(pod: str, model: str = MODEL, **fields) -> Engine:
    return Engine.objects.create(
        pod=pod,
        model=model,
        kind=fields.pop("kind", "vllm"),
        events_endpoint=fields.pop("events_endpoint", "tcp://127.0.0.1:5557"),
        **fields,
    )


@pytest.fixture
def alice(db, django_user_model):
    """Alice operates the fleet: she may browse, but not change engines."""
    return django_user_model.objects.create_user("alice", password="pw-alice-123")


@pytest.fixture
def bob(db, django_user_model):
    """Bob administers engines: he may purge a pod's index entries."""
    user = django_user_model.objects.create_user("bob", password="pw-bob-12345")
    user.user_permissions.add(Permission.objects.get(codename="change_engine"))
    return user


@pytest.fixture
def browsing(client, alice):
    """A test client logged in as Alice."""
    client.force_login(alice)
    return client


@pytest.fixture
def tokenizing_pod() -> Iterator[Callable[[str], PodConfig]]:
    """Start simulated pods of MODEL serving /tokenize; each stopped after the test. The token
    cache starts and ends empty, so each test asks the pods."""
    fleets: list[Fleet] = []

    def start(name: str) -> PodConfig:
        ports = {"events_port": free_port(), "replay_port": free_port(), "http_port": free_port()}
        config = PodConfig(name=name, kind="vllm", model=MODEL, **ports)  # type: ignore[arg-type]
        fleets.append(Fleet([config]).start())
        return config

    CACHE.clear()
    yield start
    CACHE.clear()
    for fleet in fleets:
        fleet.stop()
