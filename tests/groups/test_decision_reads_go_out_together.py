"""A grouped model's decision sends its two reads, the walk to the model's group and the
routing state to REDIS_URL, before it waits for either: on both paths, with the group's
redis-server stopped (SIGSTOP) until REDIS_URL has received its read, the decision completes.
Sent one after the other, REDIS_URL's read would wait for the stopped server's reply."""

import signal
import threading
from collections.abc import Iterator

import pytest
import redis

from kvadmin.redis_clients import index_client
from kvadmin.redis_server import RedisServer
from kvadmin.routing.service import score
from tests.index import MODEL
from tests.routing.conftest import PODS, hold, request_tokens
from tests.waiting import patient, wait_until

pytestmark = pytest.mark.django_db


@pytest.fixture
def patient_clients(settings) -> Iterator[None]:
    """Request-path clients that wait for a stopped server as long as the test does (their
    0.5 s socket timeout would fail the read from the stopped group first)."""
    index_client.cache_clear()
    settings.REDIS_TIMEOUT_SECONDS = patient(60.0)
    yield
    index_client.cache_clear()


def _script_calls(client: redis.Redis) -> int:
    return client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)


def _stopped_until_redis_url_is_read(
    group: RedisServer, app: redis.Redis, seen: list[bool]
) -> threading.Thread:
    """Stops the group's server, and a thread that resumes it once REDIS_URL has a script call
    more (`seen` says whether it had), or once the wait gives up."""
    before = _script_calls(app)
    assert group.process is not None
    group.process.send_signal(signal.SIGSTOP)

    def resume() -> None:
        try:
            wait_until(lambda: _script_calls(app) > before, what="REDIS_URL's read")
            seen.append(True)
        except AssertionError:  # the wait gave up: the test fails on `seen`
            seen.append(False)
        finally:
            group.process.send_signal(signal.SIGCONT)

    watcher = threading.Thread(target=resume, daemon=True)
    watcher.start()
    return watcher


def test_the_sync_service_sends_both_reads_before_it_waits(
    engines,
    grouped: redis.Redis,
    primaries: list[RedisServer],
    redis_client: redis.Redis,
    patient_clients,
) -> None:
    request = request_tokens(4)
    hold(grouped, PODS[0], request, ["GPU"] * 4)
    score(MODEL, token_ids=request, record=False)  # scripts loaded, connections open
    seen: list[bool] = []

    watcher = _stopped_until_redis_url_is_read(primaries[0], redis_client, seen)
    decision = score(MODEL, token_ids=request)
    watcher.join()

    assert seen == [True]
    assert decision.chosen == PODS[0] and decision.longest_match == 4


def test_the_api_sends_both_reads_before_it_waits(
    post_score,
    engines,
    grouped: redis.Redis,
    primaries: list[RedisServer],
    redis_client: redis.Redis,
    patient_clients,
) -> None:
    request = request_tokens(4)
    hold(grouped, PODS[1], request, ["GPU"] * 4)
    assert post_score({"model": MODEL, "token_ids": request})[0] == 200
    seen: list[bool] = []

    watcher = _stopped_until_redis_url_is_read(primaries[0], redis_client, seen)
    status, answer = post_score({"model": MODEL, "token_ids": request})
    watcher.join()

    assert seen == [True]
    assert status == 200 and answer["chosen"] == PODS[1]
