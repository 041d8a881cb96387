"""The outage page (Redis down: 503) keeps its promise to recover by itself: it reloads after
Retry-After, waits twice as long after each reload that finds Redis still down, and shows the
page asked for once Redis answers, with no operator action."""

import pytest
from playwright.sync_api import expect

from tests.faults.conftest import site  # noqa: F401 (a web server on a Redis of its own)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_outage_page_reloads_itself_until_redis_is_back(browser, site) -> None:  # noqa: F811
    context = browser.new_context()
    # The page's clock runs on as usual, and the test moves it on to each try (5 s, then 10 s
    # away) instead of waiting for them.
    context.clock.install()
    name, value = site.cookie.split("=", 1)
    context.add_cookies([{"name": name, "value": value, "url": site.url}])
    page = context.new_page()
    site.stop_redis()
    response = page.goto(f"{site.url}/pods/")
    assert response is not None and response.status == 503
    notice = page.locator("[data-retry-after]")
    assert notice.get_attribute("data-wait") == "5", "Retry-After first"
    assert notice.locator("[data-countdown]").inner_text() in {"5", "4"}

    # Reloaded after 5 s, still down: the next try waits twice as long.
    page.clock.run_for(5000)
    expect(notice).to_have_attribute("data-wait", "10")

    site.start_redis()
    heading = page.get_by_role("heading", name="Pods", exact=True)
    page.clock.run_for(10_000)
    expect(heading).to_be_visible()
    assert notice.count() == 0
    context.close()
