"""The load scraper's loop outlives whatever a round meets: Redis held BUSY by a long script,
a refused command (MOVED), the registry failing, a bug; each counted, logged once and backed
off, and the next rounds scrape again. One engine's surprise costs only that engine."""

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis

from kvadmin.load.scraper import LoadScraper, ScrapeSettings, Target
from kvadmin.metrics import families
from kvadmin.metrics.families import label_field
from tests.conftest import local_config
from tests.fleet.conftest import StartFleet
from tests.redis_busy import held_busy
from tests.waiting import ANSWER_SECONDS, patient, wait_until

FAST = ScrapeSettings(period=0.1, timeout=ANSWER_SECONDS, threads=2, ttl=30)
POD = "vllm-0.default"


def _scrapes(client: redis.Redis, pod: str, result: str) -> int:
    return int(client.hget(families.LOAD_SCRAPES.key, label_field((pod, result))) or 0)


class Targets:
    """The scraper's engine list, whose next reads raise the queued faults."""

    def __init__(self, targets: list[Target]) -> None:
        self.targets = targets
        self.faults: list[Exception] = []
        self.version = 0

    def load(self) -> list[Target]:
        if self.faults:
            raise self.faults.pop(0)
        return self.targets

    def bump(self) -> int:
        return self.version


@pytest.fixture
def target(start_fleet: StartFleet) -> Target:
    config = start_fleet(local_config(POD)).configs[0]
    return Target(config.name, config.kind, config.http_url)


@contextmanager
def _running(scraper: LoadScraper) -> Iterator[threading.Thread]:
    thread = threading.Thread(target=scraper.run, daemon=True)
    thread.start()
    yield thread
    scraper.stop()
    thread.join(timeout=patient(5))
    assert not thread.is_alive()


@pytest.mark.parametrize(
    ("fault", "kind"),
    [(redis.ResponseError("MOVED 12 127.0.0.1:6390"), "redis_error"), (KeyError("x"), "KeyError")],
    ids=["moved", "bug"],
)
def test_failing_rounds_are_counted_backed_off_and_followed_by_scrapes(
    own_client, target, fault, kind
) -> None:
    targets = Targets([target])
    targets.faults = [fault] * 3
    scraper = LoadScraper(own_client, targets.load, targets.bump, "w1", FAST)
    with _running(scraper) as thread:
        wait_until(lambda: _scrapes(own_client, POD, "ok") >= 2, timeout=30, what="scrapes")
        assert thread.is_alive()
        assert scraper.guard.counts[kind] == 3
        # The counts go to Redis once it answers again.
        counted = own_client.hget(families.LOOP_FAILURES.key, label_field(("load_scraper", kind)))
        assert counted == "3"


def test_a_busy_redis_is_outlived(own_redis, own_client, target) -> None:
    scraper = LoadScraper(own_client, lambda: [target], lambda: 0, "w1", FAST)
    with _running(scraper):
        wait_until(lambda: _scrapes(own_client, POD, "ok") >= 1, what="a first scrape")
        with held_busy(own_redis.url):
            wait_until(lambda: scraper.guard.counts["redis_unavailable"], what="a BUSY round")
        before = _scrapes(own_client, POD, "ok")
        wait_until(lambda: _scrapes(own_client, POD, "ok") > before, timeout=30, what="scrapes")


def test_one_engines_surprise_costs_only_that_engine(own_client, target) -> None:
    odd = Target("odd-0.default", "no-such-kind", target.base_url)  # parse_load: KeyError
    scraper = LoadScraper(own_client, lambda: [odd, target], lambda: 0, "w1", FAST)

    outcomes = {o.pod: o.reason for o in scraper.tick()}

    assert outcomes == {"odd-0.default": "error", POD: "ok"}
