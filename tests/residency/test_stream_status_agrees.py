"""One stream status for every page: a worker that died without clearing its stream's connected
flag leaves no live lease, and /pods/, the pod page and the dashboard all call the stream
disconnected (issue 21: /pods/ used to read the flag alone and say connected)."""

import time

import pytest

from kvadmin.dashboard.tiles import dashboard_tiles
from kvadmin.index import status
from kvadmin.index.streams import StreamId
from scoring.keys import WORKERS_KEY, stream_lease_key
from tests.residency.conftest import register

pytestmark = pytest.mark.django_db

POD = "vllm-0.default"
STREAM = StreamId(POD, 0)


def _pods_row(browsing) -> str:
    html = browsing.get("/pods/").text
    row = html.split(f'<tr class="pod-row" data-pod="{POD}"')[1].split("</tr>")[0]
    return row.split('data-stream="0">')[1].split("</li>")[0]


def _pod_page_connection(browsing) -> str:
    html = browsing.get(f"/pods/{POD}/").text
    rows = html.split('<table id="streams">')[1].split("<tbody>")[1]
    (rank0,) = [row for row in rows.split("</tr>") if "<td>rank 0</td>" in row]
    return rank0


def _dashboard_health(redis_client) -> str:
    (engine,) = dashboard_tiles(redis_client).engines
    return engine.health


def test_a_dead_workers_stream_is_disconnected_everywhere(browsing, index, redis_client) -> None:
    register(POD)
    status.connected(redis_client, STREAM, "worker-gone")  # its lease has expired since

    assert "disconnected" in _pods_row(browsing)
    assert '<span class="bad">no</span>' in _pod_page_connection(browsing)
    assert _dashboard_health(redis_client) == "disconnected"


def test_a_live_workers_stream_is_connected_everywhere(browsing, index, redis_client) -> None:
    register(POD)
    redis_client.zadd(WORKERS_KEY, {"worker-a": time.time()})
    redis_client.set(stream_lease_key(POD, STREAM.name), "worker-a")
    status.connected(redis_client, STREAM, "worker-a")

    assert 'title="connected"' in _pods_row(browsing)
    assert '<span class="ok">yes</span>' in _pod_page_connection(browsing)
    assert _dashboard_health(redis_client) == "ok"
