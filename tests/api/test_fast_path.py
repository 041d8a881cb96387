"""The scoring API's lean path (kvadmin/api/fast_path.py) in the real ASGI server: its
backpressure, its bounds, and its per-process copy of tokens and engines kept current across
two web processes, with the live feed of one showing what the other decided."""

import asyncio
import json
import socket
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from email.message import Message
from pathlib import Path

import pytest
import websockets

from kvadmin.api.models import ApiToken
from kvadmin.engines.models import Engine
from tests.conftest import http_json, start_asgi_server, stop_process
from tests.index import MODEL
from tests.routing.conftest import PODS, request_tokens
from tests.waiting import WAIT_SECONDS, patient, wait_until

# One worker of `make test`'s runs them all (pytest-xdist): two_servers starts once.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("fast_path")]


@pytest.fixture
def engines(redis_client) -> list[Engine]:
    """Three vLLM engines serving MODEL, registered (the index database flushed first)."""
    return [
        Engine.objects.create(pod=pod, model=MODEL, events_endpoint=f"tcp://127.0.0.1:{5557 + i}")
        for i, pod in enumerate(PODS)
    ]


@pytest.fixture(scope="module")
def two_servers(subprocess_env) -> Iterator[tuple[str, str]]:
    """Two web processes on the same database and Redis, as `make run` starts per core; for
    the module's tests one after the other. Each test's tokens and engines are its own: the
    table emptied after a test and the index database flushed before the next (redis_client)
    move what the processes compare their copies with, and they load them again."""
    started = [start_asgi_server(subprocess_env) for _ in range(2)]
    yield started[0][1], started[1][1]
    for process, _ in started:
        stop_process(process)


@pytest.fixture
def two_workers(subprocess_env) -> Iterator[tuple[subprocess.Popen, str]]:
    """`make run`'s web server on a two-core machine: one uvicorn with two worker processes."""
    process, url = start_asgi_server(subprocess_env | {"KVADMIN_WEB_WORKERS": "2"})
    yield process, url
    stop_process(process)


def score(url: str, token: str, **body) -> tuple[int, dict]:
    return http_json(
        f"{url}/api/v1/score", {"model": MODEL, "token_ids": request_tokens(2)} | body, token
    )


def test_a_revoked_token_stops_working_in_every_process(two_servers, engines) -> None:
    row, token = ApiToken.issue("gateway")
    for url in two_servers:
        assert score(url, token)[0] == 200  # each process has loaded its copy
    row.revoke()
    for url in two_servers:
        wait_until(lambda url=url: score(url, token)[0] == 401, what="the 401")


def test_make_runs_web_server_revokes_in_all_its_workers(two_workers, engines) -> None:
    process, url = two_workers
    tasks = Path(f"/proc/{process.pid}/task")

    def workers() -> int:  # uvicorn's supervisor may start them from any of its threads
        children = [
            pid for task in tasks.iterdir() for pid in (task / "children").read_text().split()
        ]
        return sum(b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes() for pid in children)

    wait_until(lambda: workers() == 2, timeout=30, what="two worker processes")
    row, token = ApiToken.issue("gateway")
    assert all(score(url, token)[0] == 200 for _ in range(20))  # both workers answered
    row.revoke()
    wait_until(lambda: all(score(url, token)[0] == 401 for _ in range(20)), what="401s")


def test_a_disabled_engine_stops_being_a_candidate_in_every_process(two_servers, engines):
    token = ApiToken.issue("gateway")[1]
    for url in two_servers:
        assert score(url, token)[1]["candidates"] == list(PODS)
    engines[0].enabled = False
    engines[0].save()

    def left_out(url: str) -> bool:
        return score(url, token)[1]["candidates"] == list(PODS[1:])

    for url in two_servers:
        wait_until(lambda url=url: left_out(url), what="the engine left out")


def test_a_token_and_an_engine_created_a_moment_ago_work_at_once(asgi_server, engines) -> None:
    first = ApiToken.issue("first")[1]
    assert score(asgi_server, first)[0] == 200
    second = ApiToken.issue("second")[1]
    Engine.objects.create(pod="vllm-9.default", model="other/model", events_endpoint="tcp://x:1")
    status, answer = score(asgi_server, second, model="other/model")
    assert status == 200 and answer["candidates"] == ["vllm-9.default"]


def test_the_feed_of_one_process_shows_what_another_decided(
    two_servers, engines, session_cookie
) -> None:
    scoring, watching = two_servers
    token = ApiToken.issue("gateway")[1]
    address = watching.replace("http://", "ws://") + "/ws/feed/"

    async def watch() -> str:
        headers = {"Cookie": session_cookie, "Origin": watching}
        async with websockets.connect(address, additional_headers=headers) as feed:
            await feed.recv()  # the opening frame: the feed reads the log from here on
            status, answer = await asyncio.to_thread(score, scoring, token, request_id="r-7")
            assert status == 200
            while True:
                frame = await asyncio.wait_for(feed.recv(), patient(WAIT_SECONDS))
                if answer["decision_id"] in frame:
                    return frame

    assert 'data-request-id="r-7"' in asyncio.run(watch())


@pytest.fixture
def stalled_engine() -> Iterator[str]:
    """An engine's HTTP base URL that accepts connections and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join()
    for connection in accepted:
        connection.close()
    listener.close()


@pytest.fixture
def one_in_flight(subprocess_env) -> Iterator[str]:
    """A web process that takes one request at a time, whose engines get 5 s to tokenize."""
    env = subprocess_env | {"KVADMIN_API_MAX_IN_FLIGHT": "1", "KVADMIN_TOKENIZE_TIMEOUT": "5"}
    process, url = start_asgi_server(env)
    yield url
    stop_process(process)


def _post(url: str, body: bytes, token: str) -> tuple[int, Message, bytes]:
    request = urllib.request.Request(
        f"{url}/api/v1/score", data=body, headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=patient(10)) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def test_beyond_its_requests_in_flight_it_answers_503_with_retry_after_at_once(
    one_in_flight, stalled_engine, redis_client
) -> None:
    Engine.objects.create(
        pod=PODS[0], model=MODEL, events_endpoint="tcp://x:1", http_base_url=stalled_engine
    )
    token = ApiToken.issue("gateway")[1]
    quick = b'{"model": "%s", "token_ids": [1]}' % MODEL.encode()
    assert _post(one_in_flight, quick, token)[0] == 200
    slow: list[tuple[int, Message, bytes]] = []

    def tokenize_on_the_stalled_engine() -> None:
        while not slow or b"in flight" in slow[-1][2]:  # until it got the slot
            slow.append(
                _post(one_in_flight, b'{"model": "%s", "prompt": "hi"}' % MODEL.encode(), token)
            )

    waiting = threading.Thread(target=tokenize_on_the_stalled_engine)
    waiting.start()
    try:
        status, headers, body = wait_until(
            lambda: (answer := _post(one_in_flight, quick, token))[0] == 503 and answer,
            interval=0.1,
            what="a 503 while the slow request is in flight",
        )
    finally:
        waiting.join()
    assert headers["Retry-After"] == "1" and b"in flight" in body
    assert slow[-1][0] == 503 and b"tokeniz" in slow[-1][2]  # the engine never answered
    assert _post(one_in_flight, quick, token)[0] == 200  # and the slot is free again


def test_a_body_beyond_the_upload_limit_is_refused_before_it_is_read(asgi_server, engines):
    token = ApiToken.issue("gateway")[1]
    port = int(asgi_server.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=patient(5)) as connection:
        connection.sendall(
            b"POST /api/v1/score HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer %s\r\nContent-Length: 100000000\r\n\r\n{" % token.encode()
        )
        answer = b""
        while b"too large" not in answer and (chunk := connection.recv(65536)):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413"), answer


def _post_score(url: str, token: str, headers: dict[str, str]) -> tuple[int, Message]:
    body = json.dumps({"model": MODEL, "token_ids": request_tokens(2)}).encode()
    request = urllib.request.Request(
        f"{url}/api/v1/score",
        data=body,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"} | headers,
    )
    try:
        with urllib.request.urlopen(request, timeout=patient(10)) as response:
            return response.status, response.headers
    except urllib.error.HTTPError as error:
        return error.code, error.headers


@pytest.fixture
def https_server(subprocess_env) -> Iterator[str]:
    """A web process behind a TLS proxy that says so in X-Forwarded-Proto, with HSTS on."""
    env = subprocess_env | {"SECURE_PROXY_SSL_HEADER": "true", "SECURE_HSTS_SECONDS": "3600"}
    process, url = start_asgi_server(env)
    yield url
    stop_process(process)


def test_the_lean_path_keeps_djangos_host_check(two_servers, engines) -> None:
    url = two_servers[0]
    token = ApiToken.issue("gateway")[1]
    assert _post_score(url, token, {})[0] == 200
    assert _post_score(url, token, {"Host": "evil.example"})[0] == 400  # DisallowedHost


def test_the_lean_path_sends_hsts_over_https_as_django_does(https_server, engines) -> None:
    token = ApiToken.issue("gateway")[1]
    status, headers = _post_score(https_server, token, {"X-Forwarded-Proto": "https"})
    assert status == 200
    assert headers["Strict-Transport-Security"] == "max-age=3600"
    status, headers = _post_score(https_server, token, {})
    assert status == 200 and "Strict-Transport-Security" not in headers
