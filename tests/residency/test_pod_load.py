"""/pods/<pod>/ shows the engine's load as the scraper last read it from the pod's /metrics:
running, waiting, KV usage, the scrape's age (stale past LOAD_STALE_SECONDS) and failures."""

import re

import pytest
from django.test import override_settings

from kvadmin.load.scraper import LoadScraper, ScrapeSettings, Target
from scoring.ttft import TtftParameters
from tests.conftest import http_json, local_config
from tests.residency.conftest import register
from tests.waiting import ANSWER_SECONDS

pytestmark = pytest.mark.django_db
POD = "vllm-0.default"


def _load_section(html: str) -> str:
    found = re.search(r'<section id="load">(.*?)</section>', html, re.S)
    assert found
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", found.group(1)))


def test_the_pod_page_shows_the_scraped_load_then_its_failures_and_staleness(
    browsing, redis_client, start_fleet
) -> None:
    config = local_config(
        POD,
        time_scale=1.0,
        prefill=TtftParameters(first_token_s=0.001),
        decode_seconds=60,
        gpu_blocks=40,
    )
    fleet = start_fleet(config)
    register(POD, http_base_url=config.http_url)
    for seed in range(2):  # 64 + 16 tokens: 5 blocks each of 40
        prompt = [seed * 1000 + i for i in range(64)]
        assert http_json(f"{config.http_url}/v1/completions", {"prompt": prompt})[0] == 200
    targets = [Target(c.name, c.kind, c.http_url) for c in fleet.configs]
    settings = ScrapeSettings(period=0.01, timeout=ANSWER_SECONDS, threads=1)
    scraper = LoadScraper(redis_client, lambda: targets, lambda: 1, "w1", settings)

    assert "never" in _load_section(browsing.get(f"/pods/{POD}/").text)
    scraper.tick()
    fresh = _load_section(browsing.get(f"/pods/{POD}/").text)

    assert "Running 2 Waiting 0 KV cache usage 25.0%" in fresh
    assert "stale" not in fresh
    assert "Scrapes 1: 0 failed" in fresh

    http_json(
        f"{config.http_url}/admin/fault", {"action": "slow_metrics", "delay": 10 * ANSWER_SECONDS}
    )
    redis_client.delete(f"kvadmin:load-lock:{POD}")
    scraper.tick()
    with override_settings(KVADMIN={"LOAD_STALE_SECONDS": 0.25}):
        stale = _load_section(browsing.get(f"/pods/{POD}/").text)

    assert re.search(r"Last scrape \d+\.\d s ago, stale", stale), stale
    assert "Running 2" in stale  # the last good load, shown as stale
    assert "Scrapes 2: 1 failed (1 timeout)" in stale
    # However long this machine took to render the page since the failure (whole seconds).
    assert re.search(r"Last failure timeout \d+ s ago: no answer within 2s", stale), stale
