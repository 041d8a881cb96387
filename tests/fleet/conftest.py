"""Fixtures for simulated pods on free ports of 127.0.0.1."""

from collections.abc import Callable

from kvadmin.fleet.fleet import Fleet
from tests.conftest import local_config

StartFleet = Callable[..., Fleet]
__all__ = ["StartFleet", "local_config"]
