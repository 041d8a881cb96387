"""Redis held by a long script answers BUSY to everyone else: every page and endpoint answers
that as the outage it is (a fast 503, or the degraded page), never a 500."""

import threading
from collections.abc import Iterator

import pytest
import redis

from tests.faults.conftest import REQUESTS, Site, not_a_fast_503
from tests.redis_busy import BUSY_SCRIPT
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def busy_redis(site: Site) -> Iterator[None]:
    """The site's Redis held by a script for a few seconds, answering BUSY past 50 ms."""
    client = redis.Redis.from_url(site.redis.url, socket_timeout=None)
    client.config_set("busy-reply-threshold", 50)
    for request in REQUESTS:  # every page warm, as in the other fault tests
        assert site.call(request).status in (200, 202), request
    script = threading.Thread(target=client.eval, args=(BUSY_SCRIPT, 0, 6))
    script.start()

    def answers_busy() -> bool:
        try:
            redis.Redis.from_url(site.redis.url, socket_timeout=1).ping()
        except redis.ResponseError as error:  # "BUSY ..." (its class is kvadmin's to give)
            return "busy running a script" in str(error)
        return False

    wait_until(answers_busy, what="Redis answering BUSY")
    yield
    script.join()
    client.close()


def test_every_page_and_endpoint_answers_a_busy_redis_with_a_fast_503(site, busy_redis) -> None:
    assert not not_a_fast_503(site)
