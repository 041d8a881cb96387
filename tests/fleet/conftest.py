"""Fixtures for simulated pods on free ports of 127.0.0.1."""

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kvadmin.fleet.fleet import Fleet
from kvadmin.fleet.pod import PodConfig
from kvadmin.redis_server import free_port

StartFleet = Callable[..., Fleet]


def local_config(name: str = "vllm-0.default", kind: str = "vllm", **options: Any) -> PodConfig:
    """A pod whose three base ports were each free a moment ago."""
    ports = {"events_port": free_port(), "replay_port": free_port(), "http_port": free_port()}
    return PodConfig(name=name, kind=kind, **(ports | options))  # type: ignore[arg-type]


@pytest.fixture
def start_fleet() -> Iterator[StartFleet]:
    """Start a fleet of the given pod configs; every fleet started is stopped after the test."""
    fleets: list[Fleet] = []

    def start(*configs: PodConfig) -> Fleet:
        fleet = Fleet(configs).start()
        fleets.append(fleet)
        return fleet

    yield start
    for fleet in fleets:
        fleet.stop()


def post(url: str, body: Any) -> tuple[int, dict[str, Any]]:
    """POST JSON (or raw bytes) and return the status and the decoded answer, errors included."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())
