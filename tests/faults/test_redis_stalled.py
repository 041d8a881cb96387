"""Redis accepts connections but answers nothing (the process is stopped with SIGSTOP): every
page and endpoint still answers within 2 s, a 503 (or the degraded page), never a hang."""

import pytest

from tests.faults.conftest import FAST_SECONDS, REQUESTS, Site

pytestmark = pytest.mark.django_db(transaction=True)


def test_every_page_and_endpoint_answers_503_fast(site: Site) -> None:
    for request in REQUESTS:
        assert site.call(request).status in (200, 202), request
    site.stall_redis()
    answers = {request: site.call(request) for request in REQUESTS}
    wrong = {
        request.path: (answer.status, round(answer.seconds, 2))
        for request, answer in answers.items()
        if answer.status != (200 if request.degrades else 503) or answer.seconds > FAST_SECONDS
    }
    assert not wrong
