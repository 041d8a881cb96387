"""Redis goes away while an operator watches the dashboard: the page stops claiming to be
live and shows, visibly, that its data is stale since the last good update."""

import pytest

from tests.browser.conftest import log_in
from tests.faults.conftest import Site, site  # noqa: F401 (a web server on its own Redis)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_dashboard_says_it_is_stale_when_its_refresh_fails(page, site: Site) -> None:  # noqa: F811
    log_in(page, site.url, "alice", "pw-alice-123")
    page.wait_for_selector("#dashboard[data-live=connected]")
    marker = page.locator("#dashboard-updated")
    assert marker.inner_text().startswith("live, every 2 s; updated ")
    taken_at = int(marker.get_attribute("data-taken-at"))

    site.stop_redis()

    page.wait_for_selector("#dashboard-updated[data-state=stale][role=alert]")
    assert marker.is_visible() and "stale" in marker.inner_text()
    assert "live, every" not in marker.inner_text()
    shown = page.evaluate("Date.parse(document.querySelector('#dashboard-updated time').dateTime)")
    assert shown == taken_at * 1000
