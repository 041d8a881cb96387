"""A group's primary killed by its PID in the middle of ingest, with real processes: the group
on a primary, its replica and three Sentinels (tests/sentinel/topology.py), REDIS_URL and the
default group on another server. Sentinel promotes the replica; meanwhile the default group's
model is routed as before while the group's answers 503; then the group's decisions resume and
its index equals the fleet's caches, the missed batches replayed. The times are printed (-s)."""

import json
import random
import threading
import time
from collections.abc import Iterator

import pytest

from kvadmin import redis_urls
from kvadmin.api.models import ApiToken
from kvadmin.engines.models import Engine
from kvadmin.fleet.fleet import Fleet
from tests.conftest import start_asgi_server, start_worker, stop_process
from tests.groups.conftest import DEFAULT_POD, GROUPED
from tests.index import MODEL, OTHER_MODEL
from tests.ingest.test_index_matches_fleet import _caught_up, _config, _matches, _traffic
from tests.sentinel.test_failover import _decide, _streaming, _works
from tests.sentinel.topology import SentinelTopology
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


class Decisions:
    """A gateway asking for decisions of both models without pause: (time, model, status)."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token
        self.answers: list[tuple[float, str, int]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            for model in (MODEL, OTHER_MODEL):
                self.answers.append((time.monotonic(), model, _decide(self.url, self.token, model)))

    def first(self, model: str, status: int, after: float) -> float | None:
        answers = list(self.answers)
        return next((t for t, m, s in answers if m == model and s == status and t > after), None)


@pytest.fixture
def env(subprocess_env: dict[str, str], topology: SentinelTopology) -> dict[str, str]:
    """MODEL's group on the Sentinel-watched primary, every other model on REDIS_URL."""
    groups = {GROUPED: topology.url, "*": subprocess_env["REDIS_URL"]}
    return subprocess_env | {
        "KVADMIN_INDEX_GROUPS": json.dumps(groups),
        "KVADMIN_LEASE_SECONDS": "3",
    }


@pytest.fixture
def decisions(env: dict[str, str]) -> Iterator[Decisions]:
    """The web server of that setting, asked for decisions from a thread."""
    Engine.objects.create(
        pod=DEFAULT_POD, model=OTHER_MODEL, kind="vllm", events_endpoint="tcp://127.0.0.1:9"
    )
    process, url = start_asgi_server(env)
    decisions = Decisions(url, ApiToken.issue("gateway", "score decisions:read")[1])
    thread = threading.Thread(target=decisions.run)
    thread.start()
    yield decisions
    decisions.stopping.set()
    thread.join()
    stop_process(process)


def test_a_groups_failover_leaves_the_other_groups_routed(
    env: dict[str, str], topology: SentinelTopology, decisions: Decisions
) -> None:
    configs = [
        _config("vllm-0.default", "vllm", cpu_blocks=40),
        _config("sglang-0.default", "sglang", cpu_blocks=24),
    ]
    worker = start_worker(env, "a")
    index = redis_urls.client(topology.url, decode_responses=True, socket_timeout=2)
    rng = random.Random(12)
    try:
        with Fleet(configs) as fleet:
            _streaming(fleet, configs, index, rng)
            wait_until(lambda: decisions.first(MODEL, 200, 0), timeout=30, what="decisions")

            _traffic(fleet, rng, 20)  # in flight while the primary dies
            killed_at = time.monotonic()
            killed = topology.kill_primary()
            _traffic(fleet, rng, 40)  # published while the group has no primary
            wait_until(lambda: topology.primary() != killed, timeout=30, what="a promotion")
            promoted_at = time.monotonic()
            unavailable_at = wait_until(
                lambda: decisions.first(MODEL, 503, killed_at), timeout=30, what="the group's 503"
            )
            back_at = wait_until(
                lambda: decisions.first(MODEL, 200, unavailable_at),
                timeout=30,
                what="the group's decisions again",
            )
            wait_until(lambda: _works(index), timeout=30, what="the index client")
            _traffic(fleet, rng, 20)
            _caught_up(index, fleet)
            wait_until(
                lambda: _matches(index, fleet, False),
                timeout=30,
                what="the group's index to equal the fleet's caches",
            )
            indexed_at = time.monotonic()
        answers = list(decisions.answers)
        other = [s for t, m, s in answers if m == OTHER_MODEL and t > killed_at]
        assert set(other) == {200}, set(other)
        # The thread asks for both models in turn: the other model was routed during the 503s.
        assert any(m == OTHER_MODEL and unavailable_at < t < back_at for t, m, _ in answers)
        print(
            f"\ngroup failover: promoted {promoted_at - killed_at:.1f} s after the kill; the "
            f"group's decisions 503 from {unavailable_at - killed_at:.1f} s, 200 again at "
            f"{back_at - killed_at:.1f} s; the other group's {len(other)} decisions meanwhile "
            f"all 200; the group's index equal to the fleet at {indexed_at - killed_at:.1f} s"
        )
    finally:
        stop_process(worker)
