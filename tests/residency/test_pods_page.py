"""/pods/: every engine with its blocks per medium as a stacked bar and its streams' health."""

import re
import time

import pytest

from scoring.keys import stream_lease_key, stream_status_key
from tests.index import NOW
from tests.residency.conftest import register

pytestmark = pytest.mark.django_db


def _row(html: str, pod: str) -> str:
    return html.split(f'<tr class="pod-row" data-pod="{pod}"')[1].split("</tr>")[0]


def _widths(row: str) -> dict[str, float]:
    found = re.findall(r'data-medium="([^"]*)" style="width: ([\d.]+)%"', row)
    return {medium: float(width) for medium, width in found}


def test_each_pod_has_a_bar_of_its_blocks_per_medium(browsing, index) -> None:
    register("vllm-0.default")
    register("vllm-1.default")
    index.store("vllm-0.default", range(6), at=NOW)
    index.offload("vllm-0.default", range(2), "CPU", at=NOW)
    index.store("vllm-1.default", range(4), at=NOW)

    response = browsing.get("/pods/")

    assert response.status_code == 200
    first, second = _row(response.text, "vllm-0.default"), _row(response.text, "vllm-1.default")
    assert _widths(first) == {"GPU": 75.0, "CPU": 25.0}  # bars share the largest pod's scale
    assert _widths(second) == {"GPU": 50.0}
    assert 'aria-label="GPU 6 blocks, CPU 2 blocks"' in first
    assert 'class="m-gpu" data-medium="GPU"' in first and 'class="m-cpu" data-medium="CPU"' in first


def test_a_registered_pod_without_blocks_has_an_empty_bar(browsing, index) -> None:
    register("vllm-0.default")

    row = _row(browsing.get("/pods/").text, "vllm-0.default")

    assert _widths(row) == {}
    assert "no blocks" in row


def test_a_pod_the_index_still_holds_but_nobody_registered_is_shown(browsing, index) -> None:
    index.store("vllm-7.default", range(2), at=NOW)

    row = _row(browsing.get("/pods/").text, "vllm-7.default")

    assert "not registered" in row and _widths(row) == {"GPU": 100.0}


def test_stream_health_shows_connection_gaps_replays_and_lost_batches(
    browsing, index, redis_client
) -> None:
    register("vllm-0.default", dp_size=2)
    redis_client.hset(
        stream_status_key("vllm-0.default", 0),
        mapping={"connected": 1, "gaps": 2, "replays": 3, "batches_lost": 4},
    )
    redis_client.set(stream_lease_key("vllm-0.default", 0), "worker-a")
    redis_client.hset(stream_status_key("vllm-0.default", 1), mapping={"connected": 0})

    row = _row(browsing.get("/pods/").text, "vllm-0.default")

    rank0, rank1 = row.split('data-stream="0">')[1], row.split('data-stream="1">')[1]
    assert 'title="connected"' in rank0.split("</li>")[0]
    assert "gaps 2, replays 3" in rank0 and "lost batches 4" in rank0
    assert "disconnected" in rank1.split("</li>")[0]


def test_the_last_event_is_the_pods_last_store_until_ingestion_records_one(
    browsing, index, redis_client
) -> None:
    register("vllm-0.default")
    register("vllm-1.default")
    index.store("vllm-0.default", [1], at=int(time.time()) - 120)
    redis_client.hset(stream_status_key("vllm-1.default", 0), "last_event_at", int(time.time()))

    html = browsing.get("/pods/").text

    assert re.search(r"<td[^>]*>2 min ago</td>", _row(html, "vllm-0.default"))
    assert re.search(r"<td[^>]*>\d+ s ago</td>", _row(html, "vllm-1.default"))


def test_no_engines_and_an_empty_index_say_so(browsing, index) -> None:
    assert "No engine is registered" in browsing.get("/pods/").text


def test_the_page_listens_for_live_updates(browsing, index) -> None:
    html = browsing.get("/pods/").text

    assert 'hx-ext="ws" ws-connect="/ws/pods/"' in html
    assert '<div id="pods-table" data-updated=' in html
