"""Redis held by a long script answers BUSY to everyone else: every page and endpoint answers
that as the outage it is (a fast 503, or the degraded page), never a 500."""

from collections.abc import Iterator

import pytest

from tests.faults.conftest import REQUESTS, Site, not_a_fast_503
from tests.redis_busy import held_busy

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def busy_redis(site: Site) -> Iterator[None]:
    """The site's Redis held by a script for the test, answering BUSY past 50 ms."""
    for request in REQUESTS:  # every page warm, as in the other fault tests
        assert site.call(request).status in (200, 202), request
    with held_busy(site.redis.url):
        yield


def test_every_page_and_endpoint_answers_a_busy_redis_with_a_fast_503(site, busy_redis) -> None:
    assert not not_a_fast_503(site)
