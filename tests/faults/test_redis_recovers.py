"""Under load, Redis stops, stalls and restarts: every answer is a success or a fast 503 (never
a 500, never a hang), and the site recovers by itself once Redis is back."""

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.faults.conftest import FAST_SECONDS, REQUESTS, Answer, Request, Site
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)
CALLERS = 4


class Load:
    """CALLERS threads calling every page and endpoint in turn until stopped."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.answers: list[tuple[Request, Answer]] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    def run(self, offset: int) -> None:
        turn = offset
        while not self.stopping.is_set():
            request = REQUESTS[turn % len(REQUESTS)]
            answer = self.site.call(request)
            with self.lock:
                self.answers.append((request, answer))
            turn += 1

    def since(self, mark: int) -> list[tuple[Request, Answer]]:
        with self.lock:
            return self.answers[mark:]

    def mark(self) -> int:
        with self.lock:
            return len(self.answers)


@pytest.fixture
def load(site: Site) -> Iterator[Load]:
    """Callers hitting the site's pages and endpoints without pause until the test ends."""
    load = Load(site)
    with ThreadPoolExecutor(CALLERS) as pool:
        running = [pool.submit(load.run, offset) for offset in range(CALLERS)]
        yield load
        load.stopping.set()
        for future in running:
            future.result()


def _outage_answered(load: Load, mark: int) -> bool:
    return sum(answer.status == 503 for _, answer in load.since(mark)) >= len(REQUESTS)


def _recovered(load: Load, mark: int) -> bool:
    """Every page and endpoint answered a success after `mark`."""
    fine = {request.path for request, answer in load.since(mark) if answer.status in (200, 202)}
    return fine >= {request.path for request in REQUESTS}


def _bad(answers: list[tuple[Request, Answer]]) -> list[tuple[str, int, float]]:
    return [
        (request.path, answer.status, round(answer.seconds, 2))
        for request, answer in answers
        if answer.status not in (200, 202, 503) or answer.seconds > FAST_SECONDS
    ]


@pytest.mark.parametrize(
    ("fault", "repair"),
    [(Site.stop_redis, Site.start_redis), (Site.stall_redis, Site.resume_redis)],
    ids=["stopped", "stalled"],
)
def test_every_answer_is_fine_or_a_fast_503_and_the_site_recovers(
    site: Site, load: Load, fault: Callable[[Site], None], repair: Callable[[Site], None]
) -> None:
    wait_until(lambda: _recovered(load, 0), timeout=30, what="every page to answer")
    outage = load.mark()
    fault(site)
    wait_until(lambda: _outage_answered(load, outage), timeout=30, what="503s during the outage")
    back = load.mark()
    repair(site)
    wait_until(lambda: _recovered(load, back), timeout=30, what="the site to recover by itself")
    assert not _bad(load.since(0))
