"""A web server on its own redis-server, so a test can stop, stall (SIGSTOP) or restart that
Redis while pages and the API are hit, without touching the session's Redis."""

import contextlib
import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

import pytest
from django.test import Client

from kvadmin.api.models import ApiToken
from kvadmin.engines.models import Engine
from kvadmin.fleet.wire import Encoding, encode_batch
from kvadmin.redis_server import RedisServer
from tests.conftest import start_asgi_server, stop_process
from tests.index import MODEL
from tests.waiting import patient

POD = "vllm-0.default"
# What an outage must answer within (the issue's bound), and what waiting forever looks like,
# both scaled for this machine (TEST_TIMEOUT_SCALE) as every deadline of the suite.
FAST_SECONDS = patient(2.0)
HANG_SECONDS = patient(8.0)
CSRF_SECRET = "k" * 32


@dataclass(frozen=True)
class Answer:
    status: int  # 0: no answer before HANG_SECONDS
    seconds: float
    content_type: str
    retry_after: str | None
    body: bytes


@dataclass(frozen=True)
class Request:
    path: str
    body: bytes | None = None
    content_type: str = "application/json"
    api: bool = False
    # The page shows what the database holds, and says the index is unavailable (200).
    degrades: bool = False


# Every page and endpoint that reads Redis, as a logged-in operator or a gateway calls them.
REQUESTS = [
    Request("/"),
    Request("/feed/"),
    Request("/blocks/"),
    Request(f"/blocks/?model={MODEL}"),
    Request("/pods/"),
    Request(f"/pods/{POD}/"),
    Request("/weights/", degrades=True),
    Request(
        "/explain/",
        f"model={MODEL}&input=token_ids&text=1,2,3".encode(),
        "application/x-www-form-urlencoded",
    ),
    Request("/api/v1/score", b'{"model": "%s", "token_ids": [1, 2, 3]}' % MODEL.encode(), api=True),
    Request("/api/v1/decisions", api=True),
    Request(
        f"/api/v1/events/{POD}",
        encode_batch(Encoding.VLLM_MAP, []),
        "application/msgpack",
        api=True,
    ),
    Request("/metrics", api=True),
]


class Site:
    """The web server of one test, its own Redis, and who calls it."""

    def __init__(self, redis: RedisServer, url: str, cookie: str, token: str) -> None:
        self.redis = redis
        self.url = url
        self.cookie = cookie
        self.token = token
        self.stalled = False
        self.served: dict[str, float] = {}
        """Per path, the slowest answer it gave with Redis up: what the request costs this
        machine anyway (a loaded one renders a page slower, outage or not)."""

    def call(self, request: Request) -> Answer:
        headers = {"Content-Type": request.content_type}
        if request.api:
            headers["Authorization"] = f"Bearer {self.token}"
        else:
            headers["Cookie"] = self.cookie
        if request.body is not None and not request.api:
            headers["Cookie"] += f"; csrftoken={CSRF_SECRET}"
            headers["X-CSRFToken"] = CSRF_SECRET
        http = urllib.request.Request(self.url + request.path, request.body, headers)
        started = time.monotonic()
        try:
            with urllib.request.urlopen(http, timeout=HANG_SECONDS) as response:
                status, raw, info = response.status, response.read(), response.headers
        except urllib.error.HTTPError as error:
            status, raw, info = error.code, error.read(), error.headers
        except TimeoutError:
            return Answer(0, time.monotonic() - started, "", None, b"")
        seconds = time.monotonic() - started
        if status < 300 and not self.stalled and self.redis.running:
            self.served[request.path] = max(seconds, self.served.get(request.path, 0.0))
        return Answer(status, seconds, info.get("Content-Type", ""), info.get("Retry-After"), raw)

    def stop_redis(self) -> None:
        self.redis.stop()

    def start_redis(self) -> None:
        self.redis = RedisServer(port=self.redis.port).start()

    def stall_redis(self) -> None:
        assert self.redis.process is not None
        os.kill(self.redis.process.pid, signal.SIGSTOP)
        self.stalled = True

    def resume_redis(self) -> None:
        assert self.redis.process is not None
        os.kill(self.redis.process.pid, signal.SIGCONT)
        self.stalled = False


@contextlib.contextmanager
def running_site(
    subprocess_env: dict[str, str], django_user_model, site_log: IO[bytes] | None, **env: str
) -> Iterator[Site]:
    """Alice (an operator) and a gateway token, one registered engine, and a web server whose
    Redis (index, broker, channel layer, cache) is a redis-server of its own; `env` adds to the
    server's environment (another broker, say)."""
    own = RedisServer().start()
    Engine.objects.create(pod=POD, model=MODEL, kind="vllm", events_endpoint="tcp://127.0.0.1:9")
    _, token = ApiToken.issue("gateway", "score decisions:read events:push metrics")
    django_user_model.objects.create_user("alice", password="pw-alice-123")
    client = Client()
    client.force_login(django_user_model.objects.get(username="alice"))
    # The production request-path timeout: what a stalled Redis's 503 waits for.
    env = subprocess_env | {"REDIS_URL": own.url, "REDIS_TIMEOUT_SECONDS": "0.5"} | env
    process, url = start_asgi_server(env, output=site_log)
    site = Site(own, url, f"sessionid={client.cookies['sessionid'].value}", token)
    try:
        yield site
    finally:
        if site.stalled:
            site.resume_redis()
        stop_process(process)
        site.redis.stop()


@pytest.fixture
def site(
    subprocess_env: dict[str, str],
    transactional_db,
    django_user_model,
    site_log: IO[bytes] | None,
) -> Iterator[Site]:
    """`running_site` for one test."""
    with running_site(subprocess_env, django_user_model, site_log) as site:
        yield site


def not_a_fast_503(site: Site) -> dict[str, tuple[int, float]]:
    """Every request of REQUESTS during an outage; path -> (status, seconds) of those not
    answered as they must be: a 503 (a 200 for pages that degrade) within FAST_SECONDS of
    timeouts over what the request took with Redis up (`Site.served`): a page that waits
    out one timeout passes on a loaded machine, one that waits out four does not."""
    answers = {request: site.call(request) for request in REQUESTS}
    return {
        request.path: (answer.status, round(answer.seconds, 2))
        for request, answer in answers.items()
        if answer.status != (200 if request.degrades else 503)
        or answer.seconds > FAST_SECONDS + site.served.get(request.path, 0.0)
    }
