"""Purging a pod's index entries from its page: a POST with CSRF by someone who may change
engines; it removes exactly that pod's entries."""

import pytest
from django.test import Client

from scoring.keys import POD_MODELS_KEY, block_key, residency_key
from tests.index import MODEL, NOW, std
from tests.residency.conftest import register

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_pods(index):
    """vllm-0 (registered) holds blocks 0-2 and vllm-1 (only the index knows it) blocks 0-1."""
    register("vllm-0.default")
    index.store("vllm-0.default", range(3), at=NOW)
    index.store("vllm-1.default", range(2), at=NOW)
    return index


def test_someone_who_may_change_engines_purges_the_pods_entries(
    client, bob, two_pods, redis_client
) -> None:
    client.force_login(bob)

    response = client.post("/pods/vllm-0.default/purge/")

    assert response.status_code == 302
    assert response["Location"] == "/pods/vllm-0.default/?purged=3"
    assert redis_client.zcard(residency_key("vllm-0.default", "GPU")) == 0
    assert redis_client.hget(block_key(MODEL, std(0)), "vllm-0.default") is None
    assert redis_client.hget(block_key(MODEL, std(0)), "vllm-1.default") is not None
    assert "vllm-1.default" in redis_client.hgetall(POD_MODELS_KEY)
    page = client.get(response["Location"])
    assert "3 block ownerships removed" in page.text


def test_someone_who_may_not_change_engines_is_refused(browsing, two_pods, redis_client) -> None:
    response = browsing.post("/pods/vllm-0.default/purge/")

    assert response.status_code == 403
    assert redis_client.zcard(residency_key("vllm-0.default", "GPU")) == 3
    assert "Purging needs the permission" in browsing.get("/pods/vllm-0.default/").text


def test_the_button_asks_for_confirmation(client, bob, two_pods) -> None:
    client.force_login(bob)

    html = client.get("/pods/vllm-0.default/").text

    assert 'hx-post="/pods/vllm-0.default/purge/"' in html
    assert 'hx-confirm="Remove every index entry of vllm-0.default?' in html


def test_a_purge_without_a_csrf_token_is_refused(bob, two_pods, redis_client) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(bob)

    assert client.post("/pods/vllm-0.default/purge/").status_code == 403
    assert redis_client.zcard(residency_key("vllm-0.default", "GPU")) == 3


def test_purging_needs_a_post(client, bob, two_pods) -> None:
    client.force_login(bob)

    assert client.get("/pods/vllm-0.default/purge/").status_code == 405


def test_purging_an_unknown_pod_is_not_found(client, bob, two_pods) -> None:
    client.force_login(bob)

    assert client.post("/pods/nobody.default/purge/").status_code == 404


def test_a_pod_only_the_index_knew_is_gone_after_its_purge(client, bob, two_pods) -> None:
    client.force_login(bob)

    response = client.post("/pods/vllm-1.default/purge/", follow=True)

    assert response.redirect_chain[-1][0] == "/pods/?purged=2&pod=vllm-1.default"
    notice = "Purged the index entries of vllm-1.default: 2 block ownerships removed."
    assert notice in response.text
    assert 'data-pod="vllm-1.default"' not in response.text
    assert client.get("/pods/vllm-1.default/").status_code == 404
