"""Redis accepts connections but answers nothing (the process is stopped with SIGSTOP): every
page and endpoint still answers within 2 s, a 503 (or the degraded page), never a hang."""

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.faults.conftest import FAST_SECONDS, REQUESTS, Site, not_a_fast_503

pytestmark = pytest.mark.django_db(transaction=True)
CALLERS = 6


def test_every_page_and_endpoint_answers_503_fast(site: Site) -> None:
    for request in REQUESTS:
        assert site.call(request).status in (200, 202), request
    site.stall_redis()
    assert not not_a_fast_503(site)


def test_concurrent_callers_of_one_page_each_answer_fast(site: Site) -> None:
    """Callers of the same page during a stall do not queue behind each other's timeouts (a
    per-process cache refreshed under a lock held across its Redis reads made the fourth
    caller of /feed/ wait for four timeouts)."""
    for request in REQUESTS:
        assert site.call(request).status in (200, 202), request
    site.stall_redis()
    with ThreadPoolExecutor(CALLERS) as pool:
        answers = {
            request.path: list(pool.map(site.call, [request] * CALLERS)) for request in REQUESTS
        }
    slow = {
        path: [round(answer.seconds, 2) for answer in called]
        for path, called in answers.items()
        if any(answer.seconds > FAST_SECONDS for answer in called)
    }
    assert not slow
