"""/pods/<pod>/: one pod's counts per medium, its chart from samples, streams, recent blocks."""

import json
import re
import time

import pytest

from kvadmin.residency.pods import pods_overview
from kvadmin.residency.samples import record_samples
from scoring.keys import stream_status_key
from tests.index import MODEL, NOW, std
from tests.residency.conftest import register

pytestmark = pytest.mark.django_db


def _chart(html: str) -> dict:
    found = re.search(r'<script id="chart-data" type="application/json">(.*?)</script>', html)
    assert found
    return json.loads(found.group(1))


def test_it_shows_the_pods_blocks_per_medium_and_recent_blocks(browsing, index) -> None:
    register("vllm-0.default")
    index.store("vllm-0.default", range(3), at=NOW)
    index.offload("vllm-0.default", [0], "CPU", at=NOW + 1)
    index.store("vllm-1.default", [9], at=NOW + 2)

    response = browsing.get("/pods/vllm-0.default/")

    assert response.status_code == 200
    assert 'aria-label="GPU 3 blocks, CPU 1 blocks"' in response.text
    recent = response.text.split('id="recent-blocks"')[1]
    assert recent.index(str(std(0))) < recent.index(str(std(1)))  # block 0: newest (offload)
    assert str(std(9)) not in recent
    assert f'href="/blocks/{MODEL}/{std(0)}/"' in recent


def test_the_chart_plots_the_samples_per_medium(browsing, index, redis_client) -> None:
    register("vllm-0.default")
    # Samples of the last hour, the page's default time range (an older one is not drawn).
    now = int(time.time()) - 60
    record_samples(redis_client, pods_overview().pods, now - 7200)
    index.store("vllm-0.default", range(3), at=NOW)
    record_samples(redis_client, pods_overview().pods, now)
    index.offload("vllm-0.default", range(2), "CPU", at=NOW + 5)
    record_samples(redis_client, pods_overview().pods, now + 5)

    chart = _chart(browsing.get("/pods/vllm-0.default/").text)

    assert chart == {"times": [now, now + 5], "series": [["GPU", [3, 3]], ["CPU", [0, 2]]]}


def test_a_pod_without_samples_says_so(browsing, index) -> None:
    register("vllm-0.default")

    response = browsing.get("/pods/vllm-0.default/")

    assert _chart(response.text) == {"times": [], "series": []}
    assert "The index holds no blocks of this pod." in response.text


def test_it_shows_each_streams_counters(browsing, index, redis_client) -> None:
    register("vllm-0.default")
    index.store("vllm-0.default", [1], at=NOW)
    redis_client.hset(stream_status_key("vllm-0.default", 0), mapping={"gaps": 5, "restarts": 1})

    streams = browsing.get("/pods/vllm-0.default/").text.split('id="streams"')[1]

    assert "<td>rank 0</td>" in streams and "<td>5</td>" in streams


def test_an_unknown_pod_is_not_found(browsing, index) -> None:
    assert browsing.get("/pods/nobody.default/").status_code == 404
