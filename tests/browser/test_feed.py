"""An operator watches routing decisions arrive live and opens one to see why it was made."""

import re

import pytest

from kvadmin.api.models import ApiToken
from kvadmin.engines.models import Engine
from tests.browser.conftest import log_in
from tests.conftest import http_json
from tests.index import MODEL
from tests.routing.conftest import PODS, hold, request_tokens
from tests.waiting import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_three_scored_requests_appear_live_and_explain_themselves(
    page, asgi_server, django_user_model, redis_client
) -> None:
    django_user_model.objects.create_user("carol", password="pw-carol-123")
    for i, pod in enumerate(PODS):
        Engine.objects.create(pod=pod, model=MODEL, events_endpoint=f"tcp://127.0.0.1:{5557 + i}")
    hold(redis_client, PODS[1], request_tokens(8), ["GPU"] * 5 + ["CPU"] * 2)
    token = ApiToken.issue("gateway")[1]

    log_in(page, asgi_server, "carol", "pw-carol-123")
    page.goto(f"{asgi_server}/feed/")
    page.locator('#feed-status[data-state="live"]').wait_for()
    assert page.locator("details.decision").count() == 0

    for n in range(3):
        status, _ = http_json(
            f"{asgi_server}/api/v1/score",
            {"model": MODEL, "token_ids": request_tokens(8), "request_id": f"req-{n}"},
            token,
        )
        assert status == 200

    rows = page.locator("details.decision")
    for n in range(3):
        page.locator(f'details.decision[data-request-id="req-{n}"]').wait_for()
    assert rows.count() == 3
    assert rows.first.get_attribute("data-request-id") == "req-2"  # newest first

    row = page.locator('details.decision[data-request-id="req-1"]')
    row.locator("summary").click()
    explanation = row.locator(".explanation")
    explanation.wait_for()
    chosen = explanation.locator("table.pods tr.chosen")
    assert PODS[1] in chosen.inner_text()
    assert chosen.locator(".badge.m-gpu", has_text="GPU 5").first.is_visible()
    assert chosen.locator(".badge.m-cpu", has_text="CPU 2").first.is_visible()
    assert "= 6.6" in chosen.inner_text()
    # The ttft breakdown: every candidate's estimate, the winner's reason, stale load flagged.
    assert explanation.locator("table.estimates tbody tr").count() == len(PODS)
    estimate = explanation.locator("table.estimates tr.chosen")
    assert PODS[1] in estimate.inner_text() and "stale: virtual queue only" in estimate.inner_text()
    reason = explanation.locator("p.reason")
    assert "Policy ttft" in reason.inner_text() and "lowest estimated time" in reason.inner_text()
    assert explanation.locator("p.stale-load").is_visible()


def test_a_decision_opened_before_the_feed_is_live_stays_open(
    page, asgi_server, django_user_model, redis_client
) -> None:
    """The socket's first message (on every connect: the first and each reconnect) replaces the
    rows the page was served with; a decision the operator opened meanwhile stays open, its
    explanation loaded. The socket is held until the decision is open, then let through."""
    django_user_model.objects.create_user("carol", password="pw-carol-123")
    Engine.objects.create(pod=PODS[0], model=MODEL, events_endpoint="tcp://127.0.0.1:5557")
    token = ApiToken.issue("gateway")[1]
    for n in range(2):
        body = {"model": MODEL, "token_ids": request_tokens(2), "request_id": f"req-{n}"}
        assert http_json(f"{asgi_server}/api/v1/score", body, token)[0] == 200
    sockets = []
    page.route_web_socket(re.compile(r"/ws/feed/"), lambda socket: sockets.append(socket))

    def let_through(count: int) -> None:
        # Playwright delivers the route only inside one of its calls: the wait makes one.
        wait_until(lambda: len(sockets) >= count or page.wait_for_timeout(1), what="a socket")
        sockets[-1].connect_to_server()
        page.locator('#feed-status[data-state="live"]').wait_for()

    log_in(page, asgi_server, "carol", "pw-carol-123")
    page.goto(f"{asgi_server}/feed/")
    row = page.locator('details.decision[data-request-id="req-0"]')
    row.locator("summary").click()
    row.locator(".explanation").wait_for()
    assert page.locator("#feed-status").get_attribute("data-state") == "connecting"

    let_through(1)
    assert row.get_attribute("open") is not None
    assert row.locator(".explanation").is_visible()

    sockets[-1].close(code=1011)  # as the server closes it on a Redis error: the page reconnects
    page.locator('#feed-status[data-state="reconnecting"]').wait_for()
    let_through(2)
    assert row.get_attribute("open") is not None
    assert row.locator(".explanation").is_visible()
    assert page.locator("details.decision").count() == 2


def test_pausing_holds_new_rows_until_resumed(
    page, asgi_server, django_user_model, redis_client
) -> None:
    django_user_model.objects.create_user("carol", password="pw-carol-123")
    Engine.objects.create(pod=PODS[0], model=MODEL, events_endpoint="tcp://127.0.0.1:5557")
    token = ApiToken.issue("gateway")[1]
    log_in(page, asgi_server, "carol", "pw-carol-123")
    page.goto(f"{asgi_server}/feed/")
    page.locator('#feed-status[data-state="live"]').wait_for()

    page.get_by_role("button", name="Pause").click()
    page.get_by_role("button", name="Resume").wait_for()
    body = {"model": MODEL, "token_ids": request_tokens(2), "request_id": "held"}
    assert http_json(f"{asgi_server}/api/v1/score", body, token)[0] == 200
    page.locator("#feed-paused", has_text="1 new while paused").wait_for()
    assert page.locator("details.decision").count() == 0
    # A paused feed says paused, not live.
    assert page.locator("#feed-status").get_attribute("data-state") == "paused"
    assert page.locator("#feed-updated").get_attribute("data-state") == "paused"
    assert page.locator("#feed-updated").inner_text().startswith("paused")

    page.get_by_role("button", name="Resume").click()
    page.locator('details.decision[data-request-id="held"]').wait_for()
    assert page.locator("#feed-paused").inner_text() == ""
    page.locator('#feed-updated[data-state="live"]').wait_for()


def test_the_feed_orders_and_filters_with_the_choice_in_the_url(
    page, asgi_server, django_user_model, redis_client
) -> None:
    from kvadmin.routing import decisions
    from tests.routing.feed_socket import decision

    django_user_model.objects.create_user("carol", password="pw-carol-123")
    for request_id, score, ms, tie in (
        ("low", 10, 9.0, False),
        ("high", 90, 1.0, True),
        ("mid", 50, 3.0, False),
    ):
        one = decision(request_id)
        one.scores[0].score, one.timings_ms["total"], one.tie_break = score, ms, tie
        decisions.append(one)
    log_in(page, asgi_server, "carol", "pw-carol-123")
    page.goto(f"{asgi_server}/feed/")
    page.locator('#feed-status[data-state="live"]').wait_for()
    rows = page.locator("#feed-rows details.decision")
    shown = lambda: [rows.nth(i).get_attribute("data-request-id") for i in range(rows.count())]  # noqa: E731
    assert shown() == ["mid", "high", "low"], "newest first"

    page.get_by_label("Order").select_option("score")
    page.wait_for_url("**order=score**")
    assert shown() == ["high", "mid", "low"]
    page.get_by_label("Order").select_option("latency")
    page.wait_for_url("**order=latency**")
    assert shown() == ["low", "mid", "high"]

    page.get_by_label("ties only").check()  # applies at once: no "Filter" button to press
    page.wait_for_url("**tie=1**")
    assert shown() == ["high"] and "order=latency" in page.url
    assert (
        page.locator("#feed-count").inner_text().startswith("1 of the 3 decisions in the log match")
    )
