"""The dashboard's "Delivered hits" tile on a 1,440 px screen, with the demo's long pod and
model names: every column of its per-pod table is in view (Delivered and TTFT were cut off)."""

from concurrent.futures import ThreadPoolExecutor

import pytest

from kvadmin.engines.models import Engine
from kvadmin.routing import outcomes, service
from kvadmin.routing.outcomes import Outcome
from tests.browser.conftest import TIMEOUT_MS, log_in
from tests.routing.conftest import hold, request_tokens

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MODEL = "deepseek-ai/DeepSeek-V4-Flash"
PODS = ("sglang-0.default", "vllm-1.default", "sglang-1.default")


def _report(redis_client) -> None:
    for i, pod in enumerate(PODS):
        Engine.objects.create(
            pod=pod, model=MODEL, kind="vllm", events_endpoint=f"tcp://127.0.0.1:{5557 + i}"
        )
        hold(redis_client, pod, request_tokens(4, start=1000 * i), ["GPU"] * 3, model=MODEL)
        decision = service.score(MODEL, token_ids=request_tokens(4, start=1000 * i))
        reported = Outcome(cached_tokens=48, prompt_tokens=64, ttft_ms=123456.7)
        assert outcomes.record(redis_client, decision, reported, 16) == "recorded"


def test_the_delivered_hits_table_fits_a_wide_screen(
    browser, asgi_server, redis_client, django_user_model
) -> None:
    django_user_model.objects.create_user("carol", password="pw-carol-123")
    with ThreadPoolExecutor(1) as pool:  # away from Playwright's event loop
        pool.submit(_report, redis_client).result()
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    log_in(page, asgi_server, "carol", "pw-carol-123")
    table = page.locator("#tile-delivered table")
    assert table.locator("tbody tr").count() == len(PODS)
    inner, outer = table.evaluate("t => [t.scrollWidth, t.closest('.tile-scroll').clientWidth]")
    assert inner <= outer, f"the table is {inner} px wide in a {outer} px tile: cut off"
    for name in ("Delivered", "TTFT ms"):
        header = table.get_by_role("columnheader", name=name)
        box, tile = header.bounding_box(), page.locator("#tile-delivered").bounding_box()
        assert box["x"] + box["width"] <= tile["x"] + tile["width"], f"{name} is cut off"
    context.close()
