"""An operator watches an engine die: its publisher and HTTP server go away while its ingest
stream stays "connected" (ZMQ says nothing). The pod's page (which updates itself), the
dashboard and /readyz show it unreachable, with the failed evidence and its age, never ok."""

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from kvadmin.api.models import ApiToken
from kvadmin.dashboard.tasks import publish_tiles
from kvadmin.engines.models import Engine
from kvadmin.fleet.fleet import Fleet
from kvadmin.index import status
from kvadmin.index.streams import StreamId
from kvadmin.index.writer import Applier
from kvadmin.ingest.probes import probe_engines
from kvadmin.ingest.reader import IngestLoop
from kvadmin.ingest.registered import load_streams
from tests.browser.conftest import log_in
from tests.conftest import http_json, local_config
from tests.waiting import patient, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
POD = "vllm-0.default"


@pytest.fixture
def engine(redis_url: str, redis_client: redis.Redis) -> Iterator[Fleet]:
    """One registered simulated vLLM pod, its stream read by an ingest loop."""
    config = local_config(POD)
    Engine.objects.create(**config.engine_fields())
    spec = load_streams()[0]  # the registered engine's stream, as a worker reads it
    with Fleet([config]) as fleet:
        client = redis.Redis.from_url(redis_url, decode_responses=True)
        loop = IngestLoop(Applier(client), lambda: [spec], int)
        thread = threading.Thread(target=loop.run, daemon=True)
        thread.start()
        wait_until(lambda: status.read_statuses(redis_client, [spec.id])[0].connected)
        yield fleet
        loop.stop()
        thread.join(timeout=patient(15))


def _beat() -> None:
    """What celery beat runs every 2 s: probe the engines, publish the dashboard's tiles (in a
    thread of its own, away from Playwright's event loop)."""
    with ThreadPoolExecutor(1) as pool:
        pool.submit(probe_engines).result()
        pool.submit(publish_tiles).result()


def test_a_dead_engine_shows_as_unreachable_everywhere(
    page, asgi_server, django_user_model, engine: Fleet, redis_client: redis.Redis
) -> None:
    django_user_model.objects.create_user("erin", password="pw-erin-12345")
    _beat()
    log_in(page, asgi_server, "erin", "pw-erin-12345")
    row = page.locator(f'#tile-engines tr[data-pod="{POD}"]')
    assert row.get_attribute("data-state") == "idle", "reachable, nothing published yet"
    page.goto(f"{asgi_server}/pods/{POD}/")
    assert page.locator("#health [data-state]").first.inner_text() == "idle"
    replay = page.locator('#health tr[data-evidence="replay socket"]')
    assert replay.get_attribute("data-ok") == "yes"
    link = page.locator("#streams td[data-link]").first
    assert link.get_attribute("data-link") == "ok"

    engine.stop()
    _beat()

    # The pod's page refreshes itself: no reload.
    page.locator("#health span[data-state=unreachable]").wait_for()
    assert replay.get_attribute("data-ok") == "no"
    assert "failed" in replay.inner_text() and "ago" in replay.inner_text()
    assert status.read_statuses(redis_client, [StreamId(POD, 0)])[0].connected, (
        "the ingest stream still says connected: only the evidence tells"
    )
    # The stream beside it agrees with the evidence: no green "connected" (health must agree).
    assert link.get_attribute("data-link") == "bad"
    assert "socket open, engine unreachable" in link.inner_text()
    page.goto(f"{asgi_server}/pods/")
    dot = page.locator(f'tr[data-pod="{POD}"] .stream [data-link]').first
    assert dot.get_attribute("data-link") == "bad"
    assert (
        "socket open, engine unreachable"
        in page.locator(f'tr[data-pod="{POD}"] .stream').first.inner_text()
    )
    page.goto(f"{asgi_server}/")
    assert row.get_attribute("data-state") == "unreachable"
    unreachable = page.locator("#tile-engines .health-counts [data-state=unreachable]")
    assert unreachable.get_attribute("data-count") == "1"
    assert page.locator("#tile-ingest [data-engines-healthy]").inner_text() == "0 / 1"
    code, body = http_json(f"{asgi_server}/readyz", token=ApiToken.issue("kubelet")[1])
    assert code == 503 and body["checks"]["engines"]["unhealthy"][POD]["state"] == "unreachable"
