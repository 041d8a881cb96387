"""A Redis outage is logged once when it starts and once when it is over, not once per 503
(hundreds a second under load): by the API's lean path under a gateway's calls, and by the
pages' middleware."""

from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from tests.faults.conftest import REQUESTS, Request, Site
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)
SCORE = next(request for request in REQUESTS if request.path == "/api/v1/score")
PAGE = next(request for request in REQUESTS if request.path == "/pods/")
CALLS = 40


@pytest.fixture
def site_log(tmp_path: Path) -> Iterator[IO[bytes]]:
    """The web server's log, in a file the test reads."""
    with (tmp_path / "web.log").open("wb") as log:
        yield log


def lines(site_log: IO[bytes], text: str) -> int:
    return Path(site_log.name).read_text().count(text)


@pytest.mark.parametrize("request_", [SCORE, PAGE], ids=["lean path", "pages"])
def test_an_outage_is_logged_when_it_starts_and_when_it_ends(
    site: Site, site_log: IO[bytes], request_: Request
) -> None:
    assert site.call(request_).status == 200
    site.stop_redis()
    assert [site.call(request_).status for _ in range(CALLS)] == [503] * CALLS
    # The first 503 is logged before its answer is sent: the log holds it already.
    assert lines(site_log, "Redis unavailable") == 1
    assert lines(site_log, "Redis is back") == 0
    site.start_redis()
    wait_until(lambda: site.call(request_).status == 200, timeout=30, what="Redis to be back")
    for _ in range(3):
        assert site.call(request_).status == 200
    assert lines(site_log, "Redis is back") == 1
    assert lines(site_log, "Redis unavailable") == 1
