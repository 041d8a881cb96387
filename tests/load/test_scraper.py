"""The load scraper against real simulated pods' /metrics and a real Redis: the load HASH it
writes, failures and timeouts within the bound, one scraper per pod per period."""

import concurrent.futures as cf
import json
import threading
import time
import urllib.request
from collections.abc import Iterator

import pytest
import redis

from kvadmin.fleet.fleet import Fleet
from kvadmin.load.scraper import LoadScraper, ScrapeSettings, Target
from kvadmin.metrics import families
from kvadmin.metrics.families import label_field
from kvadmin.redis_server import free_port
from scoring.keys import load_error_key, load_fit_samples_key, load_key, queue_key
from scoring.ttft import TtftParameters
from tests.conftest import http_json, local_config
from tests.fleet.conftest import StartFleet
from tests.waiting import ANSWER_SECONDS, patient, wait_until

SETTINGS = ScrapeSettings(period=1.0, timeout=ANSWER_SECONDS, max_bytes=1 << 20, threads=4, ttl=30)
SLOW = 10 * ANSWER_SECONDS
"""Seconds a slow pod takes to answer /metrics: far beyond the timeout."""
DRIP = 0.5
"""Seconds between the lines of a dripping pod's /metrics."""


def _scraper(client: redis.Redis, targets: list[Target], worker: str = "w1") -> LoadScraper:
    return LoadScraper(client, lambda: targets, lambda: 1, worker, SETTINGS)


def _targets(fleet: Fleet) -> list[Target]:
    return [Target(c.name, c.kind, c.http_url) for c in fleet.configs]


def _scrapes(client: redis.Redis, pod: str, result: str) -> int:
    return int(client.hget(families.LOAD_SCRAPES.key, label_field((pod, result))) or 0)


@pytest.fixture
def busy_fleet(start_fleet: StartFleet) -> Iterator[Fleet]:
    """A vLLM and an SGLang pod, each with requests still decoding (holding KV memory)."""
    timed = {
        "time_scale": 1.0,
        "prefill": TtftParameters(first_token_s=0.001),
        "decode_seconds": 60.0,
        "gpu_blocks": 200,
    }
    fleet = start_fleet(
        local_config("vllm-0.default", "vllm", **timed),
        local_config("sglang-0.default", "sglang", **timed),
    )
    for n, config in enumerate(fleet.configs):
        for seed in range(n + 2):  # 2 requests on vLLM, 3 on SGLang
            prompt = [seed * 1000 + i for i in range(64)]
            status, _ = http_json(f"{config.http_url}/v1/completions", {"prompt": prompt})
            assert status == 200
    yield fleet


def test_it_writes_each_engines_load_from_its_metrics(redis_client, busy_fleet) -> None:
    before = time.time()
    outcomes = _scraper(redis_client, _targets(busy_fleet)).tick()

    assert sorted(o.reason for o in outcomes) == ["ok", "ok"]
    vllm = redis_client.hgetall(load_key("vllm-0.default"))
    sglang = redis_client.hgetall(load_key("sglang-0.default"))
    # 64 prompt tokens + 16 generated: 5 blocks each of 200.
    assert (vllm["running"], vllm["waiting"], float(vllm["kv_usage"])) == ("2", "0", 0.05)
    assert (sglang["running"], sglang["waiting"], float(sglang["kv_usage"])) == ("3", "0", 0.075)
    assert before <= float(vllm["scraped_at"]) <= time.time()
    assert float(vllm["prompt_tokens_total"]) == 128
    assert float(vllm["prefill_seconds_count"]) == 2
    assert float(sglang["prompt_tokens_total"]) == 192
    assert 0 < redis_client.ttl(load_key("vllm-0.default")) <= 30
    assert _scrapes(redis_client, "vllm-0.default", "ok") == 1


def test_a_down_or_slow_pod_fails_within_the_bound_and_delays_no_other(
    redis_client, start_fleet: StartFleet
) -> None:
    fleet = start_fleet(local_config("vllm-0.default"), local_config("vllm-1.default"))
    down = Target("vllm-2.default", "vllm", f"http://127.0.0.1:{free_port()}")
    healthy, slow_pod = _targets(fleet)
    # The failing pods first: scraped one after the other, they would hold the healthy one up.
    scraper = _scraper(redis_client, [slow_pod, down, healthy])
    scraper.tick()
    first = redis_client.hget(load_key("vllm-1.default"), "scraped_at")
    slow = fleet.configs[1].http_url
    assert http_json(f"{slow}/admin/fault", {"action": "slow_metrics", "delay": SLOW})[0] == 200
    redis_client.delete(*(f"kvadmin:load-lock:{t.pod}" for t in scraper.load_targets()))

    started = time.monotonic()
    outcomes = {o.pod: o for o in scraper.tick()}
    took = time.monotonic() - started

    assert SETTINGS.timeout <= took < SLOW  # the round ends at the bound, not with the slow pod
    assert outcomes["vllm-0.default"].reason == "ok"
    # Not held up by the slow one (scraped first): done before the slow one was given up.
    assert outcomes["vllm-0.default"].seconds < outcomes["vllm-1.default"].seconds
    assert outcomes["vllm-1.default"].reason == "timeout"
    assert outcomes["vllm-2.default"].reason == "error"
    assert _scrapes(redis_client, "vllm-1.default", "timeout") == 1
    assert _scrapes(redis_client, "vllm-2.default", "error") == 2
    # The slow pod keeps its last good load, which ages; the down pod never had one.
    assert redis_client.hget(load_key("vllm-1.default"), "scraped_at") == first
    assert not redis_client.exists(load_key("vllm-2.default"))
    assert redis_client.hget(load_error_key("vllm-1.default"), "reason") == "timeout"
    assert "Connection refused" in redis_client.hget(load_error_key("vllm-2.default"), "message")


def test_one_scraper_per_pod_per_period_across_workers(redis_client, busy_fleet) -> None:
    targets = _targets(busy_fleet)
    scrapers = [_scraper(redis_client, targets, f"worker-{n}") for n in range(3)]
    barrier = threading.Barrier(len(scrapers))

    def tick(scraper: LoadScraper) -> list[str]:
        barrier.wait()
        return [o.pod for o in scraper.tick()]

    with cf.ThreadPoolExecutor(len(scrapers)) as pool:
        scraped = [pod for pods in pool.map(tick, scrapers) for pod in pods]

    assert sorted(scraped) == sorted(t.pod for t in targets)
    for target in targets:
        assert _scrapes(redis_client, target.pod, "ok") == 1


def test_the_loop_keeps_the_period_and_stops(redis_client, busy_fleet) -> None:
    scraper = LoadScraper(
        redis_client,
        lambda: _targets(busy_fleet),
        lambda: 1,
        "w1",
        ScrapeSettings(period=0.2, timeout=ANSWER_SECONDS, threads=2, ttl=30),
    )
    thread = threading.Thread(target=scraper.run)
    thread.start()
    try:
        wait_until(
            lambda: _scrapes(redis_client, "vllm-0.default", "ok") >= 5,
            what="five rounds",
        )
    finally:
        scraper.stop()
        thread.join(timeout=patient(2))
    assert not thread.is_alive()


def test_an_oversized_exposition_is_refused(redis_client, start_fleet: StartFleet) -> None:
    fleet = start_fleet(local_config())
    settings = ScrapeSettings(timeout=ANSWER_SECONDS, max_bytes=200, threads=1)
    scraper = LoadScraper(redis_client, lambda: _targets(fleet), lambda: 1, "w1", settings)

    [outcome] = scraper.tick()

    assert outcome.reason == "too_large"
    assert not redis_client.exists(load_key("vllm-0.default"))


@pytest.mark.django_db
def test_metrics_expose_each_enabled_engines_load_and_staleness(redis_client, busy_fleet) -> None:
    from kvadmin.engines.models import Engine
    from kvadmin.metrics.collector import IndexCollector

    for config in busy_fleet.configs:
        Engine.objects.create(**config.engine_fields())
    never = local_config("vllm-7.default")
    Engine.objects.create(**never.engine_fields())
    _scraper(redis_client, _targets(busy_fleet)).tick()

    exposed = {m.name: m for m in IndexCollector(redis_client).collect()}

    def values(name: str) -> dict[str, float]:
        return {s.labels["pod"]: s.value for s in exposed[name].samples}

    assert values("kvadmin_engine_load_running") == {"vllm-0.default": 2, "sglang-0.default": 3}
    assert values("kvadmin_engine_load_kv_usage")["sglang-0.default"] == 0.075
    assert values("kvadmin_engine_load_stale") == {
        "vllm-0.default": 0.0,
        "sglang-0.default": 0.0,
        "vllm-7.default": 1.0,
    }


def test_a_pod_dripping_its_metrics_is_cut_off_at_the_deadline(
    redis_client, start_fleet: StartFleet
) -> None:
    fleet = start_fleet(local_config())
    url = fleet.configs[0].http_url
    with urllib.request.urlopen(f"{url}/metrics", timeout=patient(10)) as response:
        dripped = len(response.read().splitlines()) * DRIP  # how long the whole answer takes
    assert dripped > 2 * SETTINGS.timeout
    assert http_json(f"{url}/admin/fault", {"action": "drip_metrics", "delay": DRIP})[0] == 200
    scraper = _scraper(redis_client, _targets(fleet))

    started = time.monotonic()
    [outcome] = scraper.tick()

    # Each line arrives well within the read timeout; only the deadline on the whole ends it.
    assert outcome.reason == "timeout"
    assert time.monotonic() - started < dripped


def test_prefill_counters_are_sampled_once_per_interval_and_capped(
    redis_client, busy_fleet
) -> None:
    """What the TTFT fit reads: at most one sample per `sample_every`, the newest first, at
    most `samples` of them."""
    targets = _targets(busy_fleet)
    pods = [t.pod for t in targets]

    def ticks(scraper: LoadScraper, n: int) -> None:
        for _ in range(n):
            redis_client.delete(*(f"kvadmin:load-lock:{pod}" for pod in pods))
            scraper.tick()

    hourly = ScrapeSettings(timeout=ANSWER_SECONDS, threads=2, ttl=30, sample_every=3600, samples=5)
    ticks(LoadScraper(redis_client, lambda: targets, lambda: 1, "w1", hourly), 3)
    assert [redis_client.llen(load_fit_samples_key(pod)) for pod in pods] == [1, 1]

    every_tick = ScrapeSettings(
        timeout=ANSWER_SECONDS, threads=2, ttl=30, sample_every=0, samples=2
    )
    ticks(LoadScraper(redis_client, lambda: targets, lambda: 1, "w1", every_tick), 3)
    (newest, older) = redis_client.lrange(load_fit_samples_key("vllm-0.default"), 0, -1)
    assert float(newest.split(" ", 1)[0]) >= float(older.split(" ", 1)[0])
    sample = json.loads(newest.split(" ", 1)[1])
    assert sample.pop("prefill_seconds_sum") > 0
    assert sample == {
        "running": 2,
        "prompt_tokens_total": 128.0,
        "prefill_seconds_count": 2.0,
        "prefix_cache_queries_total": 128.0,
        "prefix_cache_hits_total": 0.0,
    }
    assert 0 < redis_client.ttl(load_fit_samples_key("vllm-0.default")) <= 30


def test_a_scrape_restarts_the_routing_queue_from_the_engines_own(redis_client, busy_fleet) -> None:
    """kvadmin's virtual queue of vllm-0 drifted a minute ahead of the engine, which waits on
    nothing: the scrape brings it back to now, plus at most one mean prefill for what the
    engine runs (scoring.route_state.resynced_busy_until). SGLang's pod had no queue: none
    appears."""
    queue = queue_key("vllm-0.default")
    drifted = (time.time() + 60) * 1000
    redis_client.hset(queue, mapping={"busy_until_ms": repr(drifted), "prefill_ms": "40"})
    before = time.time() * 1000
    _scraper(redis_client, _targets(busy_fleet)).tick()
    busy = float(redis_client.hget(queue, "busy_until_ms"))
    assert before - 1 <= busy <= time.time() * 1000 + 40
    assert not redis_client.exists(queue_key("sglang-0.default"))
