"""Real Celery workers scrape the registered, enabled engines' load, one worker per engine per
period, and the load families reach /metrics."""

import subprocess
from collections.abc import Iterator

import pytest

from kvadmin.engines.models import Engine
from kvadmin.metrics import families
from kvadmin.metrics.collector import IndexCollector
from kvadmin.metrics.families import label_field
from scoring.keys import load_key
from tests.conftest import STARTUP_SECONDS, local_config, start_worker, stop_process
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def scraping_workers(subprocess_env, redis_client) -> Iterator[list[subprocess.Popen]]:
    """Two real Celery workers that scrape the engines' load and ingest nothing."""
    env = subprocess_env | {"KVADMIN_LOAD_SCRAPE": "1", "KVADMIN_INGEST": "0"}
    workers = [start_worker(env, f"load-{n}") for n in range(2)]
    yield workers
    stop_process(*workers)


def _scrapes(redis_client, pod: str) -> int:
    return int(redis_client.hget(families.LOAD_SCRAPES.key, label_field((pod, "ok"))) or 0)


def test_workers_scrape_each_enabled_engine_once_a_period(
    start_fleet, redis_client, scraping_workers
) -> None:
    configs = [local_config("vllm-0.default"), local_config("sglang-0.default", "sglang")]
    start_fleet(*configs)
    for config in configs:
        Engine.objects.create(**config.engine_fields())
    Engine.objects.create(**local_config("vllm-9.default").engine_fields(), enabled=False)

    wait_until(
        lambda: all(redis_client.exists(load_key(c.name)) for c in configs),
        timeout=STARTUP_SECONDS,
        what="both engines' load",
    )
    start = {c.name: _scrapes(redis_client, c.name) for c in configs}
    first = float(redis_client.hget(load_key("vllm-0.default"), "scraped_at"))
    wait_until(
        lambda: float(redis_client.hget(load_key("vllm-0.default"), "scraped_at")) >= first + 3,
        what="three more seconds of scrapes",
    )
    latest = float(redis_client.hget(load_key("vllm-0.default"), "scraped_at"))
    # About one scrape a second between two workers, not one each.
    done = _scrapes(redis_client, "vllm-0.default") - start["vllm-0.default"]
    assert done <= (latest - first) * 1.0 + 2, done
    assert not redis_client.exists(load_key("vllm-9.default"))
    exposed = {m.name: m for m in IndexCollector(redis_client).collect()}
    samples = exposed["kvadmin_load_scrapes"].samples
    assert any(s.labels == {"pod": "sglang-0.default", "result": "ok"} for s in samples)
