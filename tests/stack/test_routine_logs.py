"""Routine successes stay out of the log; errors and what a person does on a page never do;
a handled 503 is one WARNING, never an ERROR as well. Read from a real web server's log."""

import logging
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.test import Client

from kvadmin.api.models import ApiToken
from kvadmin.engines.models import Engine
from kvadmin.redis_server import RedisServer
from kvadmin.routine_logs import RoutineRequests
from tests.conftest import http_json, start_asgi_server, stop_process
from tests.index import MODEL
from tests.routing.conftest import PODS, hold, request_tokens
from tests.waiting import patient, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def access_line(method: str, path: str, status: int) -> logging.LogRecord:
    """A record as uvicorn's access logger makes it."""
    args = ("127.0.0.1:5000", method, path, "1.1", status)
    return logging.LogRecord(
        "uvicorn.access", logging.INFO, "", 0, '%s - "%s %s HTTP/%s" %d', args, None
    )


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/api/v1/score"),
        ("POST", "/api/v1/decisions/0123abc/outcome"),
        ("POST", "/api/v1/events/vllm-0.default"),
        ("GET", "/healthz"),
        ("GET", "/pods/"),
        ("GET", "/blocks/?model=m"),
    ],
)
def test_routine_successes_are_left_out(method: str, path: str) -> None:
    assert not RoutineRequests().filter(access_line(method, path, 200))


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("POST", "/api/v1/score", 500),
        ("POST", "/api/v1/decisions/0123abc/outcome", 404),
        ("GET", "/pods/", 503),
        ("POST", "/weights/", 302),
        ("POST", "/accounts/login/", 200),
    ],
)
def test_errors_and_what_a_person_does_are_kept(method: str, path: str, status: int) -> None:
    assert RoutineRequests().filter(access_line(method, path, status))


class Server:
    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log
        self._output = log.open("wb")
        self.process, self.url = start_asgi_server(env, log_level="info", output=self._output)

    def lines(self) -> list[str]:
        return self.log.read_text().splitlines()

    def logged(self, text: str) -> list[str]:
        """The lines holding `text`, once one does."""
        return wait_until(
            lambda: [line for line in self.lines() if text in line], what=f"{text!r} logged"
        )

    def stop(self) -> None:
        stop_process(self.process)
        self._output.close()


@pytest.fixture
def server(subprocess_env, tmp_path, transactional_db) -> Iterator[Server]:
    """A web server (one process) logging at INFO into a file."""
    running = Server(subprocess_env | {"KVADMIN_WEB_WORKERS": "1"}, tmp_path / "web.log")
    yield running
    running.stop()


def test_a_gateways_scores_and_outcomes_log_nothing(server: Server, redis_client) -> None:
    Engine.objects.create(pod=PODS[0], model=MODEL, events_endpoint="tcp://127.0.0.1:5557")
    token = ApiToken.issue("gateway", "score")[1]
    hold(redis_client, PODS[0], request_tokens(3), ["GPU"] * 2)
    for _ in range(3):
        status, decision = http_json(
            f"{server.url}/api/v1/score", {"model": MODEL, "token_ids": request_tokens(3)}, token
        )
        assert status == 200, decision
        outcome = {"cached_tokens": 32, "prompt_tokens": 48}
        url = f"{server.url}/api/v1/decisions/{decision['decision_id']}/outcome"
        assert http_json(url, outcome, token)[0] == 201
    urllib.request.urlopen(f"{server.url}/healthz", timeout=patient(10)).read()
    # The last request's line is the marker: the lines of those before it are written.
    assert http_json(f"{server.url}/api/v1/score", {}, "wrong")[0] == 401
    server.logged('"POST /api/v1/score HTTP/1.1" 401')
    access = [line for line in server.lines() if "HTTP/1.1" in line]
    assert len(access) == 1, access


def test_a_redis_outage_is_one_warning_per_answer_and_no_error(
    subprocess_env, tmp_path, transactional_db, django_user_model
) -> None:
    own = RedisServer().start()
    django_user_model.objects.create_user("alice", password="pw-alice-123")
    client = Client()
    client.force_login(django_user_model.objects.get(username="alice"))
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    env = subprocess_env | {"REDIS_URL": own.url, "KVADMIN_WEB_WORKERS": "1"}
    server = Server(env, tmp_path / "web.log")
    try:
        own.stop()
        request = urllib.request.Request(f"{server.url}/pods/", headers={"Cookie": cookie})
        with pytest.raises(urllib.error.HTTPError) as answered:
            urllib.request.urlopen(request, timeout=patient(10))
        assert answered.value.code == 503
        server.logged('"GET /pods/ HTTP/1.1" 503')
        lines = server.lines()
        assert not [line for line in lines if " ERROR " in line], lines
        warnings = [line for line in lines if " WARNING " in line and "/pods/" in line]
        assert len(warnings) == 1 and "Redis unavailable" in warnings[0], lines
    finally:
        server.stop()
