"""An operator looks further back: the dashboard's time range (presets or custom) redraws its
hit-ratio chart over up to 24 h, and the pod pages follow the same range."""

import time

import pytest

from kvadmin.metrics import recorder
from tests.browser.conftest import log_in
from tests.operations.test_dashboard_tiles import DecisionStub, Scored
from tests.residency.conftest import register

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
POD = "vllm-0.default"


@pytest.fixture
def history(index, redis_client, django_user_model):  # noqa: F811
    """vllm-0 chosen by decisions 5 h and 2 min ago; Gil, an operator."""
    register(POD)
    index.store(POD, range(3))
    now = time.time()
    for ago in (5 * 3600, 120):
        decision = DecisionStub(now - ago, 4, 2, POD, [Scored(POD, {"GPU": 2})])
        recorder.record_decision(redis_client, decision)
    django_user_model.objects.create_user("gil", password="pw-gil-123456")


def test_the_range_is_chosen_once_and_followed_everywhere(page, asgi_server, history) -> None:
    log_in(page, asgi_server, "gil", "pw-gil-123456")
    assert page.locator("#hit-summary").count() == 1, "the last hour: the live chart"

    page.get_by_label("Time range").select_option("6h")
    page.wait_for_url("**range=6h**")
    summary = page.locator("#hit-summary-range")
    assert int(summary.get_attribute("data-points")) <= 120
    assert page.get_by_role("heading", name="Hit ratio by medium, last 6 hours").is_visible()
    assert page.locator("#hit-chart canvas").count() >= 1
    assert "from=" not in page.url, "a preset needs no bounds"

    page.goto(f"{asgi_server}/pods/{POD}/")
    page.wait_for_url("**range=6h**")
    assert page.get_by_role("heading", name="Over time, last 6 hours").is_visible()
    assert page.locator("#pod-hits").get_attribute("data-drawn") == "true"

    page.get_by_label("Time range").select_option("custom")
    page.get_by_label("From (UTC)").fill(
        time.strftime("%Y-%m-%dT%H:%M", time.gmtime(time.time() - 600))
    )
    page.get_by_role("button", name="Show").click()
    page.wait_for_url("**range=custom**")
    assert " UTC" in page.get_by_role("heading", level=2, name="Over time").first.inner_text()
    page.goto(f"{asgi_server}/")
    page.wait_for_url("**range=custom**")
    assert page.locator("#hit-summary-range").count() == 1


def test_a_zoom_survives_the_charts_refresh(page, asgi_server, history) -> None:
    """Dragging across the chart zooms in, a refresh of its data keeps that zoom, and a double
    click zooms back out."""
    log_in(page, asgi_server, "gil", "pw-gil-123456")
    page.goto(f"{asgi_server}/?range=6h")
    chart = page.locator("#hit-chart")
    area = chart.locator(".u-over")
    area.wait_for()
    shown = lambda: float(chart.get_attribute("data-x-min") or 0)  # noqa: E731
    full = shown()
    area.scroll_into_view_if_needed()
    box = area.bounding_box()
    middle = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.4, middle)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.8, middle, steps=5)
    page.mouse.up()
    assert shown() > full + 3600, "zoomed in on the last hours"
    zoomed = shown()

    page.evaluate("document.dispatchEvent(new Event('htmx:afterSwap'))")  # a refresh redraws

    assert shown() == zoomed
    area.dblclick()
    assert shown() == full
