"""A Sentinel-watched primary of the test's own (tests/sentinel/topology.py)."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sentinel.topology import SentinelTopology


@pytest.fixture
def topology(tmp_path: Path) -> Iterator[SentinelTopology]:
    """A primary, its replica and three Sentinels of this test alone, gone at its end."""
    topology = SentinelTopology(tmp_path).start()
    try:
        yield topology
    finally:
        topology.stop()
