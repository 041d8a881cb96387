"""Redis accepts connections but answers nothing (the process is stopped with SIGSTOP): every
page and endpoint still answers within 2 s, a 503 (or the degraded page), never a hang."""

import signal
from concurrent.futures import ThreadPoolExecutor

import pytest

from kvadmin.redis_server import RedisServer
from tests.faults.conftest import FAST_SECONDS, REQUESTS, Site, not_a_fast_503, running_site
from tests.waiting import wait_until

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


def test_a_push_answers_503_fast_when_only_the_broker_stalls(
    subprocess_env: dict[str, str], transactional_db, django_user_model, site_log
) -> None:
    """The index takes the batch, then queueing its apply task meets a stalled broker (a Redis
    of its own): the push fails within the request path's timeout, where kombu's publish would
    wait for the broker as long as it stalls. Once the broker is back, pushes are taken again."""
    push = next(request for request in REQUESTS if request.path.startswith("/api/v1/events/"))
    with (
        RedisServer() as broker,
        running_site(
            subprocess_env, django_user_model, site_log, CELERY_BROKER_URL=broker.url
        ) as site,
    ):
        assert site.call(push).status == 202
        broker.process.send_signal(signal.SIGSTOP)
        try:
            answer = site.call(push)
        finally:
            broker.process.send_signal(signal.SIGCONT)
        assert (answer.status, answer.seconds <= FAST_SECONDS) == (503, True), answer
        wait_until(lambda: site.call(push).status == 202, what="pushes taken again")
