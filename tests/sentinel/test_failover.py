"""Sentinel failover end to end, with real processes: a primary, its replica and three Sentinels
(tests/sentinel/topology.py); kvadmin's web server and an ingest worker on REDIS_URL
`redis+sentinel://...`; simulated engines publishing over ZMQ. The primary is killed (SIGKILL,
by its PID) in the middle of ingest. Sentinel promotes the replica, and then: pages answer 503
during the switch and recover; ingest resumes and replays what it missed (batches published
while no primary answered, and those the replica had not received), so the index equals the
fleet's caches; decisions are made and recorded again. The time each took is printed (-s)."""

import random
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
import redis
from django.test import Client

from kvadmin import redis_urls
from kvadmin.api.models import ApiToken
from kvadmin.engines.models import Engine
from kvadmin.fleet.fleet import Fleet
from scoring.keys import DECISIONS_KEY, stream_lease_key
from tests.conftest import start_asgi_server, start_worker, stop_process
from tests.index import MODEL
from tests.ingest.test_index_matches_fleet import _caught_up, _config, _matches, _traffic
from tests.sentinel.topology import SentinelTopology
from tests.waiting import patient, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


class Pages:
    """A logged-in operator loading the pods page without pause: (time, status) of each."""

    def __init__(self, url: str, cookie: str) -> None:
        self.url, self.cookie = url, cookie
        self.answers: list[tuple[float, int]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            request = urllib.request.Request(self.url + "/pods/", headers={"Cookie": self.cookie})
            try:
                with urllib.request.urlopen(request, timeout=patient(5)) as response:
                    status = response.status
            except urllib.error.HTTPError as error:
                status = error.code
            except OSError:
                status = 0  # no answer within 5 s: a hang, which the test refuses
            self.answers.append((time.monotonic(), status))

    def first(self, status: int, after: float) -> float | None:
        return next((t for t, s in list(self.answers) if t > after and s == status), None)


@pytest.fixture
def pages(live: tuple[str, str]) -> Iterator[Pages]:
    pages = Pages(*live)
    thread = threading.Thread(target=pages.run)
    thread.start()
    yield pages
    pages.stopping.set()
    thread.join()


@pytest.fixture
def live(
    subprocess_env, topology: SentinelTopology, django_user_model
) -> Iterator[tuple[str, str]]:
    """The web server on the Sentinel URL, and Alice's session cookie."""
    django_user_model.objects.create_user("alice", password="pw-alice-123")
    client = Client()
    client.force_login(django_user_model.objects.get(username="alice"))
    process, url = start_asgi_server(subprocess_env | {"REDIS_URL": topology.url})
    yield url, f"sessionid={client.cookies['sessionid'].value}"
    stop_process(process)


def _works(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


def _decide(url: str, token: str, model: str = MODEL) -> int:
    body = b'{"model": "%s", "token_ids": [1, 2, 3]}' % model.encode()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    request = urllib.request.Request(url + "/api/v1/score", body, headers)
    try:
        with urllib.request.urlopen(request, timeout=patient(5)) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def _streaming(fleet: Fleet, configs: list, index: redis.Redis, rng: random.Random) -> None:
    """The fleet's engines registered, every stream owned and its first traffic indexed."""
    for config in configs:
        Engine.objects.create(**config.engine_fields())
    wait_until(
        lambda: all(index.get(stream_lease_key(c.name, 0)) for c in configs),
        timeout=30,
        what="every stream owned",
    )
    fleet.wait_for_subscribers()
    _traffic(fleet, rng, 40)
    _caught_up(index, fleet)


def test_a_killed_primary_is_replaced_and_everything_recovers(
    subprocess_env, topology: SentinelTopology, live: tuple[str, str], pages: Pages
) -> None:
    url = live[0]
    _, token = ApiToken.issue("gateway", "score decisions:read")
    configs = [
        _config("vllm-0.default", "vllm", cpu_blocks=40),
        _config("sglang-0.default", "sglang", cpu_blocks=24),
    ]
    env = subprocess_env | {"REDIS_URL": topology.url, "KVADMIN_LEASE_SECONDS": "3"}
    worker = start_worker(env, "a")
    index = redis_urls.client(topology.url, decode_responses=True, socket_timeout=2)
    rng = random.Random(11)
    try:
        with Fleet(configs) as fleet:
            _streaming(fleet, configs, index, rng)
            wait_until(lambda: pages.first(200, 0), timeout=30, what="the pods page")
            assert _decide(url, token) == 200

            _traffic(fleet, rng, 20)  # in flight while the primary dies
            killed_at = time.monotonic()
            killed = topology.kill_primary()
            _traffic(fleet, rng, 40)  # published while no primary answers
            wait_until(lambda: topology.primary() != killed, timeout=30, what="a promotion")
            promoted_at = time.monotonic()
            unavailable_at = wait_until(
                lambda: pages.first(503, killed_at), timeout=30, what="a 503 during the switch"
            )
            back_at = wait_until(
                lambda: pages.first(200, unavailable_at), timeout=30, what="pages to recover"
            )
            wait_until(lambda: _decide(url, token) == 200, timeout=30, what="decisions again")
            decided_at = time.monotonic()
            wait_until(lambda: _works(index), timeout=30, what="the index client")
            _traffic(fleet, rng, 20)
            _caught_up(index, fleet)
            wait_until(
                lambda: _matches(index, fleet, False),
                timeout=30,
                what="the index to equal the fleet's caches",
            )
            indexed_at = time.monotonic()
            recorded = index.xlen(DECISIONS_KEY)
        assert recorded >= 2
        assert all(status in (200, 503) for _, status in pages.answers), {
            s for _, s in pages.answers
        }
        print(
            f"\nfailover: promoted {promoted_at - killed_at:.1f} s after the kill; pages 503 "
            f"from {unavailable_at - killed_at:.1f} s, 200 again at {back_at - killed_at:.1f} s; "
            f"decisions at {decided_at - killed_at:.1f} s; index equal to the fleet at "
            f"{indexed_at - killed_at:.1f} s"
        )
    finally:
        stop_process(worker)
