"""An operator watches the dashboard while a simulated fleet serves traffic: the tiles update
live over the websocket (engines healthy, blocks per medium, ingest and decision rates, the
hit-ratio chart) without a reload."""

import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from kvadmin.dashboard.tasks import publish_tiles
from kvadmin.engines.models import Engine
from kvadmin.fleet.fleet import Fleet
from kvadmin.fleet.traffic import PodEndpoint, TrafficGenerator
from kvadmin.fleet.workload import Workload
from kvadmin.index import status
from kvadmin.index.writer import Applier
from kvadmin.ingest.probes import probe_engines
from kvadmin.ingest.reader import IngestLoop
from kvadmin.ingest.registered import load_streams
from kvadmin.metrics import recorder
from kvadmin.routing.service import score
from tests.browser.conftest import log_in
from tests.fleet.conftest import local_config
from tests.index import MODEL
from tests.waiting import patient, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
RATES = ("events", "blocks", "decisions")


@pytest.fixture
def fleet(redis_url: str, redis_client: redis.Redis) -> Iterator[Fleet]:
    """A vLLM and an SGLang pod with CPU offloading, registered, their streams read by an
    ingest loop (as a worker runs it)."""
    configs = [
        local_config("vllm-0.default", gpu_blocks=64, cpu_blocks=128),
        local_config("sglang-0.default", "sglang", gpu_blocks=64, cpu_blocks=128),
    ]
    for config in configs:
        Engine.objects.create(**config.engine_fields())
    specs = load_streams()  # the registered engines' streams, as a worker reads them
    with Fleet(configs) as fleet:
        client = redis.Redis.from_url(redis_url, decode_responses=True)
        loop = IngestLoop(Applier(client), lambda: specs, int)
        thread = threading.Thread(target=loop.run, daemon=True)
        thread.start()
        for spec in specs:
            wait_until(
                lambda spec=spec: status.read_statuses(redis_client, [spec.id])[0].connected,
                what=f"{spec.id} connected",
            )
        yield fleet
        loop.stop()
        thread.join(timeout=patient(15))


class KvadminRouter:
    """Routes as a gateway asking kvadmin would: the scoring service decides, and the
    decision is recorded for the metrics and the dashboard."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def choose(
        self, model: str, token_ids: Sequence[int], pods: Sequence[PodEndpoint], request_id: str
    ) -> tuple[PodEndpoint, int | None]:
        decision = score(model, token_ids=list(token_ids), record=False)
        recorder.record_decision(self.client, decision)
        return next(p for p in pods if p.name == decision.chosen), None


def _publish() -> None:
    """What celery beat does every 2 s (probe the engines, publish the tiles); in a thread of
    its own, away from Playwright's loop."""
    with ThreadPoolExecutor(1) as pool:
        pool.submit(probe_engines).result()
        pool.submit(publish_tiles).result()


def test_the_tiles_follow_the_fleet(
    page, asgi_server, django_user_model, fleet, redis_client
) -> None:
    django_user_model.objects.create_user("dana", password="pw-dana-12345")
    log_in(page, asgi_server, "dana", "pw-dana-12345")
    page.wait_for_selector("#dashboard[data-live=connected]")
    assert page.locator("#tile-media [data-total]").get_attribute("data-total") == "0"
    assert page.locator("#tile-ingest [data-rate=events]").inner_text() == "—"
    traffic = TrafficGenerator(fleet.endpoints(), KvadminRouter(redis_client), Workload(MODEL))

    def updated() -> bool:
        traffic.run(requests=4)
        _publish()
        rates = [page.locator(f"[data-rate={name}]").inner_text() for name in RATES]
        return "—" not in rates and "0.0" not in rates

    wait_until(updated, timeout=60, interval=0.2, what="live rates on the dashboard")
    _publish()
    decisions = page.locator("#tile-decisions [data-decisions-hour]")
    wait_until(
        lambda: decisions.get_attribute("data-decisions-hour") == str(traffic.summary.requests),
        what="every decision counted",
    )

    healthy = page.locator("#tile-engines .health-counts [data-state=ok]")
    assert healthy.get_attribute("data-count") == "2"
    assert page.locator("#tile-engines tr[data-state=ok][data-health=ok]").count() == 2
    assert page.locator("#tile-ingest [data-engines-healthy]").inner_text() == "2 / 2"
    assert int(page.locator("#tile-media [data-total]").get_attribute("data-total")) > 0
    assert page.locator("#tile-media li[data-medium=GPU]").is_visible()
    assert page.locator("#hit-chart canvas").count() >= 1
    assert page.locator("#hit-chart").get_attribute("data-minutes") in ("1", "2")
    assert page.url == f"{asgi_server}/", "no reload"
