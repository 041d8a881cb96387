"""Fixtures for simulated pods on free ports of 127.0.0.1."""

import socket
from collections.abc import Callable

from kvadmin.fleet.fleet import Fleet
from kvadmin.redis_server import free_port
from tests.conftest import local_config

StartFleet = Callable[..., Fleet]
__all__ = ["StartFleet", "free_base_port", "local_config"]


def free_base_port(*offsets: int) -> int:
    """A free base port whose `base + offset` ports are free too (engines bind base + rank,
    a simulated fleet base + pod, and replay sockets sit at a fixed offset)."""
    for _ in range(100):
        base = free_port()
        try:
            for offset in offsets:
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", base + offset))
        except OSError:
            continue
        return base
    raise AssertionError(f"no free port with free ports at offsets {offsets}")
