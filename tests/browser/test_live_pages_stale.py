"""Redis goes away while an operator watches a pod's page, which refreshes itself: the page
stops claiming to be live and shows, visibly, since when its data is stale."""

import pytest

from tests.browser.conftest import log_in
from tests.faults.conftest import POD, Site, site  # noqa: F401 (a web server on its own Redis)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_pod_page_says_it_is_stale_when_its_refresh_fails(page, site: Site) -> None:  # noqa: F811
    page.clock.install()  # runs on as usual; the test moves it on to the next refresh
    log_in(page, site.url, "alice", "pw-alice-123")
    page.goto(f"{site.url}/pods/{POD}/")
    marker = page.locator("#pod-updated")
    assert marker.get_attribute("data-state") == "live"
    assert marker.inner_text().startswith("live, every 5 s; updated ")
    taken_at = int(marker.get_attribute("data-taken-at"))

    site.stop_redis()
    page.clock.run_for(5000)

    page.wait_for_selector("#pod-updated[data-state=stale][role=alert]")
    assert "stale: the refresh failed; last good update at" in marker.inner_text()
    shown = page.evaluate("Date.parse(document.querySelector('#pod-updated time').dateTime)")
    assert shown == taken_at * 1000

    site.start_redis()
    page.clock.run_for(5000)

    page.wait_for_selector("#pod-updated[data-state=live]")
