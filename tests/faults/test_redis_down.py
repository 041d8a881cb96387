"""Redis is down: every page and endpoint answers 503 fast (never a 500), pages with the
site's navigation and a plain explanation, the API with JSON and Retry-After."""

import json

import pytest

from tests.faults.conftest import REQUESTS, Request, Site, not_a_fast_503

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def site_without_redis(site: Site) -> Site:
    """The site answered every request once, then its Redis stopped."""
    for request in REQUESTS:
        assert site.call(request).status in (200, 202), request
    site.stop_redis()
    return site


def test_every_page_and_endpoint_answers_503_fast(site_without_redis: Site) -> None:
    assert not not_a_fast_503(site_without_redis)


def test_a_page_keeps_the_navigation_and_says_what_is_wrong(site_without_redis: Site) -> None:
    answer = site_without_redis.call(Request("/pods/"))
    page = answer.body.decode()
    assert answer.status == 503 and answer.content_type.startswith("text/html")
    assert 'nav aria-label="Main"' in page and 'href="/weights/"' in page
    assert "Redis" in page and "unavailable" in page
    assert answer.retry_after is not None


def test_the_api_answers_json_with_retry_after(site_without_redis: Site) -> None:
    answer = site_without_redis.call(next(r for r in REQUESTS if r.path == "/api/v1/score"))
    assert answer.status == 503 and answer.content_type == "application/json"
    body = json.loads(answer.body)
    assert set(body) >= {"error", "retry_after"} and "Redis" in body["error"]
    assert answer.retry_after == str(body["retry_after"])
