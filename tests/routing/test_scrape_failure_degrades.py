"""A failing /metrics scrape degrades the `ttft` policy to kvadmin's own queue estimate for
that pod, with a visible warning: real timed pods, the real load scraper, the real scoring
service and Redis, and the feed's decision page."""

import time

import pytest
from django.test import override_settings

from kvadmin.engines.models import Engine
from kvadmin.load.scraper import LoadScraper, ScrapeSettings, Target
from kvadmin.routing import decisions
from tests.conftest import http_json, local_config
from tests.index import MODEL
from tests.routing.conftest import request_tokens
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db
# Long beside the work done while a load must stay fresh (one scrape, one or two decisions), so
# a starved test process does not see the healthy pod's load go stale too.
FRESH_S = 3.0
# The requests priced by kvadmin's queue alone: 65,536 tokens, whose predicted prefill (6.6 s at
# the default speed) is long beside the time between two decisions on a loaded machine, so
# the second still waits behind the first.
QUEUED_BLOCKS = 4096


def estimate(answer: dict, pod: str) -> dict:
    return next(e for e in answer["estimates"] if e["pod"] == pod)


def test_a_failing_scrape_prices_the_pod_by_kvadmins_queue_and_says_so(
    post_score, redis_client, start_fleet, client, django_user_model
) -> None:
    configs = [
        local_config(f"vllm-{i}.default", time_scale=1.0, decode_seconds=60, gpu_blocks=64)
        for i in range(2)
    ]
    fleet = start_fleet(*configs)
    for config in configs:
        Engine.objects.create(
            pod=config.name,
            model=MODEL,
            kind="vllm",
            events_endpoint=config.events_endpoint,
            http_base_url=config.http_url,
        )
    failing, healthy = (config.name for config in configs)
    prompt = {"prompt": list(range(40)), "max_tokens": 8}
    assert http_json(f"{configs[0].http_url}/v1/completions", prompt)[0] == 200  # running: 1
    targets = [Target(c.name, c.kind, c.http_url) for c in fleet.configs]
    scraper = LoadScraper(
        redis_client, lambda: targets, lambda: 1, "w1", ScrapeSettings(0.01, 0.5, threads=2)
    )

    def scrape() -> float:
        redis_client.delete(*(f"kvadmin:load-lock:{c.name}" for c in configs))
        scraper.tick()
        return time.time()

    with override_settings(KVADMIN={"LOAD_STALE_SECONDS": FRESH_S}):
        scraped = scrape()
        _, answer = post_score({"model": MODEL, "token_ids": request_tokens(8)})
        assert answer["stale_loads"] == []
        assert estimate(answer, failing)["engine_waiting"] == 0

        http_json(f"{configs[0].http_url}/admin/fault", {"action": "slow_metrics", "delay": 5})
        wait_until(lambda: time.time() - scraped > FRESH_S, what="the last good scrape to age")
        scrape()  # the failing pod times out; the healthy one is read afresh

        queued = request_tokens(QUEUED_BLOCKS, start=5000)
        _, first = post_score({"model": MODEL, "token_ids": queued, "pods": [failing]})
        _, second = post_score(
            {"model": MODEL, "token_ids": [t + 1 for t in queued], "pods": [failing]}
        )
        scrape()  # the healthy pod's load is fresh again for the next decision
        _, both = post_score({"model": MODEL, "token_ids": request_tokens(8, start=20_000)})

    for answer in (first, second):
        assert answer["stale_loads"] == [failing]
        priced = estimate(answer, failing)
        assert priced["load_stale"] is True and priced["engine_waiting"] is None
        assert priced["wait_s"] == priced["queue_wait_s"]  # kvadmin's own queue only
    # The second request waits behind the first one's predicted prefill, in kvadmin's queue.
    assert 0 < estimate(second, failing)["wait_s"] <= estimate(first, failing)["prefill_s"]
    assert both["stale_loads"] == [failing]
    assert estimate(both, healthy)["load_stale"] is False

    client.force_login(django_user_model.objects.create_user("bob", password="pw-bob-12345"))
    [logged] = decisions.recent(1)
    page = client.get(f"/feed/decisions/{logged.log_id}/").content.decode()
    assert f"Engine load stale or absent (priced by kvadmin's own queue): {failing}." in page
    assert "stale: virtual queue only" in page
