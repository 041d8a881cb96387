"""Fixtures for simulated pods on free ports of 127.0.0.1."""

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from kvadmin.fleet.fleet import Fleet
from tests.conftest import local_config

StartFleet = Callable[..., Fleet]
__all__ = ["StartFleet", "local_config", "post"]


def post(url: str, body: Any) -> tuple[int, dict[str, Any]]:
    """POST JSON (or raw bytes) and return the status and the decoded answer, errors included."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())
