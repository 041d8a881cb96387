"""A revoked token never works on the first request to a web process that was idle: its copy
of the tokens, older than API_CACHE_REFRESH_SECONDS, is checked before the request is
authorized (the real ASGI server, the lean path and Django's path alike)."""

import time
from collections.abc import Iterator

import pytest

from kvadmin.api.models import ApiToken
from tests.api.test_fast_path import engines, score  # noqa: F401  (a shared fixture)
from tests.conftest import http_json, start_asgi_server, stop_process
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)
PERIOD = 0.2


@pytest.fixture
def server(subprocess_env) -> Iterator[str]:
    process, url = start_asgi_server(
        subprocess_env | {"KVADMIN_API_CACHE_REFRESH_SECONDS": str(PERIOD)}
    )
    yield url
    stop_process(process)


def test_a_revoked_token_fails_on_the_first_request_after_idling(server, engines) -> None:  # noqa: F811
    row, token = ApiToken.issue("gateway")
    assert score(server, token)[0] == 200  # the process's copy holds the token
    answered = time.monotonic()
    wait_until(lambda: time.monotonic() - answered > 2 * PERIOD, what="the process to idle")
    row.revoke()
    assert score(server, token)[0] == 401


def test_a_new_token_works_at_once_and_a_known_one_keeps_working(server, engines) -> None:  # noqa: F811
    _, first = ApiToken.issue("first")
    assert score(server, first)[0] == 200
    _, second = ApiToken.issue("second")
    assert score(server, second)[0] == 200
    assert score(server, first)[0] == 200
    assert http_json(f"{server}/api/v1/decisions?limit=1", token=first)[0] == 403  # no scope
