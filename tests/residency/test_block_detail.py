"""/blocks/<model>/<hash>/: every owner with its media and write times, whether kthena's router
counts it, and the engine hashes naming it, found in bounded scan steps."""

import re

import pytest

from kvadmin.index.writer import Applier
from kvadmin.residency import block_detail
from scoring.keys import stream_status_key
from tests.index import MAPPING_KEYS, MODEL, NOW, OTHER_MODEL, engine_hash, std
from tests.residency.conftest import register

pytestmark = pytest.mark.django_db


def _owner(html: str, pod: str) -> str:
    return html.split(f'data-pod="{pod}"')[1].split("</tbody>")[0]


def test_it_shows_every_owner_with_each_medium_and_store_time(browsing, index) -> None:
    index.store("vllm-0.default", [1], at=NOW)
    index.offload("vllm-0.default", [1], "CPU", at=NOW + 30)
    index.store("sglang-0.default", [1], "CPU_PINNED", at=NOW + 60, kind="sglang")

    response = browsing.get(f"/blocks/{MODEL}/{std(1)}/")

    assert response.status_code == 200
    vllm = _owner(response.text, "vllm-0.default")
    assert f"<code>{NOW + 30}|GPU</code>" in vllm  # what the router reads: the best tier
    assert 'class="badge m-gpu">GPU</span>' in vllm and 'class="badge m-cpu">CPU</span>' in vllm
    assert "(not registered)" in vllm
    sglang = _owner(response.text, "sglang-0.default")
    assert f"<code>{NOW + 60}|CPU_PINNED</code>" in sglang


def test_an_owner_written_after_its_pods_start_is_fresh(browsing, index, redis_client) -> None:
    register("vllm-0.default")
    register("vllm-1.default")
    index.store("vllm-0.default", [1], at=NOW)
    index.store("vllm-1.default", [1], at=NOW)
    redis_client.hset(stream_status_key("vllm-0.default", 0), "started_at", NOW - 1)
    redis_client.hset(stream_status_key("vllm-1.default", 0), "started_at", NOW)  # same second

    response = browsing.get(f"/blocks/{MODEL}/{std(1)}/")

    assert 'class="ok freshness">fresh' in _owner(response.text, "vllm-0.default")
    assert 'class="bad freshness">stale' in _owner(response.text, "vllm-1.default")


def test_an_owner_of_a_pod_without_a_known_start_counts(browsing, index) -> None:
    index.store("vllm-0.default", [1], at=NOW)

    owner = _owner(browsing.get(f"/blocks/{MODEL}/{std(1)}/").text, "vllm-0.default")

    assert "fresh" in owner and "start time unknown" in owner


def test_two_engine_blocks_with_the_same_content_are_both_counted(browsing, index) -> None:
    index.store("vllm-0.default", [1], at=NOW)
    index.store("vllm-0.default", [1], at=NOW + 1, rank=1)

    owner = _owner(browsing.get(f"/blocks/{MODEL}/{std(1)}/").text, "vllm-0.default")

    assert "2 engine blocks" in owner


def test_an_unknown_block_is_not_found(browsing, index) -> None:
    index.store("vllm-0.default", [1], at=NOW)

    assert browsing.get(f"/blocks/{MODEL}/{std(2)}/").status_code == 404
    assert browsing.get(f"/blocks/{OTHER_MODEL}/{std(1)}/").status_code == 404
    assert browsing.get(f"/blocks/{MODEL}/not-a-hash/").status_code == 404


def _scan(browsing, url: str) -> tuple[str, int]:
    """Follow the scan's htmx chain to its end: everything found, and how many requests."""
    html, requests = "", 0
    while url:
        response = browsing.get(url.replace("&amp;", "&"), headers={"HX-Request": "true"})
        assert response.status_code == 200
        html += response.text
        requests += 1
        more = re.search(r'hx-get="([^"]+)" hx-trigger="load"', response.text)
        url = more.group(1) if more else ""
    return html, requests


@pytest.mark.parametrize("mapping_keys", MAPPING_KEYS)
def test_the_engine_hashes_of_a_block_are_found_on_every_rank(
    browsing, index, monkeypatch, redis_client, mapping_keys
) -> None:
    """The scan reads the streams' engine blocks; kthena's mapping key is shown when kept."""
    monkeypatch.setattr(block_detail, "SCAN_BUCKETS", 300)
    index.applier = Applier(redis_client, mapping_keys=mapping_keys)
    index.store("vllm-0.default", range(600), at=NOW)  # over several steps of 300 buckets
    index.store("vllm-0.default", [7, 8], at=NOW, rank=1)
    index.offload("vllm-0.default", [7], "CPU", at=NOW)

    html, requests = _scan(browsing, f"/blocks/{MODEL}/{std(7)}/engine-hashes/?pod=vllm-0.default")

    assert requests > 2
    assert f"<code>{engine_hash(7)}</code> (rank 0): GPU, CPU;" in html
    assert f"<code>{engine_hash(7, rank=1)}</code> (rank 1): GPU;" in html
    if mapping_keys:
        assert "kthena mapping key present, expires in" in html
    else:
        assert "no kthena mapping key" in html
    assert engine_hash(8) not in html
    assert "scan complete" in html


def test_a_pod_without_engine_blocks_has_nothing_to_scan(browsing, index) -> None:
    html, requests = _scan(browsing, f"/blocks/{MODEL}/{std(1)}/engine-hashes/?pod=nobody.ns")

    assert requests == 1
    assert "the pod has no engine blocks" in html


def test_a_malformed_scan_step_is_refused(browsing, index) -> None:
    url = f"/blocks/{MODEL}/{std(1)}/engine-hashes/"

    assert browsing.get(url).status_code == 400
    assert browsing.get(url, {"pod": "vllm-0.default", "cursor": "x"}).status_code == 400


def test_a_scan_cursor_out_of_range_is_refused(browsing, index) -> None:
    url = f"/blocks/{MODEL}/{std(1)}/engine-hashes/"

    response = browsing.get(url, {"pod": "vllm-0.default", "cursor": str(2**64)})

    assert response.status_code == 400
