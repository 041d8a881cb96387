"""Redis accepts connections but answers nothing (the process is stopped with SIGSTOP): every
page and endpoint still answers within 2 s, a 503 (or the degraded page), never a hang."""

import pytest

from tests.faults.conftest import REQUESTS, Site, not_a_fast_503

pytestmark = pytest.mark.django_db(transaction=True)


def test_every_page_and_endpoint_answers_503_fast(site: Site) -> None:
    for request in REQUESTS:
        assert site.call(request).status in (200, 202), request
    site.stall_redis()
    assert not not_a_fast_503(site)
