"""The lean path against stalled senders, in the real ASGI server with four in-flight slots:
the bearer token is checked from the headers before any body byte is read (401 at once), a
body has a total deadline (408, connection closed), and stalled connections, anonymous or
not, never make a valid request a 503."""

import json
from collections.abc import Iterator

import pytest

from kvadmin.api.models import ApiToken
from tests.api.raw_http import open_request, read_answer
from tests.api.test_fast_path import engines, score  # noqa: F401  (a shared fixture)
from tests.conftest import start_asgi_server, stop_process
from tests.index import MODEL
from tests.routing.conftest import request_tokens
from tests.waiting import patient

pytestmark = pytest.mark.django_db(transaction=True)
SLOTS = 4
BODY_SECONDS = 1.0
PROMPT = json.dumps({"model": MODEL, "token_ids": request_tokens(2)}).encode()


@pytest.fixture(scope="module")
def server(subprocess_env) -> Iterator[str]:
    process, url = start_asgi_server(
        subprocess_env
        | {
            "KVADMIN_API_MAX_IN_FLIGHT": str(SLOTS),
            "KVADMIN_API_BODY_TIMEOUT_SECONDS": str(BODY_SECONDS),
        }
    )
    yield url
    stop_process(process)


def _stalled(url: str, token: str | None) -> str:
    """The head of a scoring request declaring 1,000 body bytes (of which 1 is sent)."""
    authorization = f"\nAuthorization: Bearer {token}" if token else ""
    return (
        "POST /api/v1/score HTTP/1.1\nHost: 127.0.0.1\nContent-Type: application/json\n"
        f"Content-Length: 1000{authorization}"
    )


@pytest.mark.parametrize("token", [None, "kv_not-a-token"], ids=["anonymous", "unknown"])
def test_stalled_anonymous_bodies_are_refused_at_once_and_take_no_slot(
    server,
    engines,  # noqa: F811
    token,
) -> None:
    _, valid = ApiToken.issue("gateway")
    assert score(server, valid)[0] == 200  # the process's copy of tokens is loaded
    stalled = [open_request(server, _stalled(server, token), b"{") for _ in range(2 * SLOTS)]
    try:
        for conn in stalled:
            # 401, not the 408 of the body deadline: refused before any body was waited for.
            answer = read_answer(conn, timeout=patient(10), closing=True)
            assert answer.status == 401, answer
            assert answer.closed, "an unread body must not be read as the next request"
        assert score(server, valid)[0] == 200
    finally:
        for conn in stalled:
            conn.close()


def test_a_stalled_body_gets_408_within_its_deadline_and_frees_its_slot(
    server,
    engines,  # noqa: F811
) -> None:
    _, valid = ApiToken.issue("gateway")
    stalled = [open_request(server, _stalled(server, valid), b"{") for _ in range(2 * SLOTS)]
    try:
        assert score(server, valid)[0] == 200  # while eight bodies stall
        for conn in stalled:
            answer = read_answer(conn, timeout=patient(BODY_SECONDS + 10), closing=True)
            assert answer.status == 408, answer
            assert answer.closed
        for _ in range(SLOTS + 1):
            assert score(server, valid)[0] == 200
    finally:
        for conn in stalled:
            conn.close()


def test_a_valid_body_sent_slowly_within_the_deadline_is_scored(server, engines) -> None:  # noqa: F811
    _, valid = ApiToken.issue("gateway")
    head = (
        "POST /api/v1/score HTTP/1.1\nHost: 127.0.0.1\nContent-Type: application/json\n"
        f"Authorization: Bearer {valid}\nContent-Length: {len(PROMPT)}"
    )
    conn = open_request(server, head, PROMPT[:5])
    try:
        conn.sendall(PROMPT[5:])
        assert read_answer(conn, timeout=patient(10)).status == 200
    finally:
        conn.close()
