"""Sorting covers the whole set, not the rows loaded: on /blocks/ and the live feed, with more
rows than one page, the top of a sort is a row the first page newest first did not hold, the
next pages continue the same sort, and live decisions join a sorted feed in their place."""

import pytest
from playwright.sync_api import expect

from kvadmin.residency.listing import PAGE_SIZE
from kvadmin.routing import decisions
from kvadmin.routing.consumers import FEED_ROWS
from tests.browser.conftest import log_in
from tests.index import NOW, IngestedIndex, std
from tests.residency.conftest import register
from tests.routing.feed_socket import decision

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BLOCKS = PAGE_SIZE + 10


@pytest.fixture
def carol(django_user_model):
    django_user_model.objects.create_user("carol", password="pw-carol-123")


def test_blocks_sort_by_owners_and_age_over_every_page(
    page, asgi_server, carol, redis_client
) -> None:
    for pod in ("vllm-0.default", "vllm-1.default", "vllm-2.default"):
        register(pod)
    index = IngestedIndex(redis_client)
    for n in range(BLOCKS):  # block 0 oldest, shared by all three pods
        index.store("vllm-0.default", [n], at=NOW + n)
    index.store("vllm-1.default", [0], at=NOW)
    index.store("vllm-2.default", [0], at=NOW)
    log_in(page, asgi_server, "carol", "pw-carol-123")
    page.goto(f"{asgi_server}/blocks/")
    rows = page.locator("tr.block-row")
    hashes = lambda: rows.locator("a code").all_inner_texts()  # noqa: E731
    assert str(std(0)) not in hashes(), "newest first, the shared block is on a later page"

    page.locator("#blocks th[data-sort-key=owners] a").click()
    page.wait_for_url("**sort=owners&dir=desc**")
    assert hashes()[0] == str(std(0))
    assert rows.first.locator(".badge").count() == 3
    assert (
        page.locator("#blocks th[data-sort-key=owners]").get_attribute("aria-sort") == "descending"
    )
    assert page.locator("#blocks-sorted").inner_text() == "most owners first"
    page.locator("tr.more").scroll_into_view_if_needed()
    expect(rows).to_have_count(BLOCKS)
    assert hashes() == [str(std(0)), *(str(std(n)) for n in reversed(range(1, BLOCKS)))]

    page.locator("#blocks th[data-sort-key=last-stored] a").click()  # newest first
    page.locator("#blocks th[data-sort-key=last-stored] a").click()  # then oldest first
    page.wait_for_url("**sort=last-stored&dir=asc**")
    assert page.locator("#blocks-sorted").inner_text() == "oldest first"
    page.locator("tr.more").scroll_into_view_if_needed()
    expect(rows).to_have_count(BLOCKS)
    assert hashes() == [str(std(n)) for n in range(BLOCKS)]
    page.get_by_label("Pod").select_option("vllm-1.default")  # a filter keeps the sort
    page.wait_for_url("**pod=vllm-1.default**")
    assert "sort=last-stored&dir=asc" in page.url and hashes() == [str(std(0))]


def _append(request_id: str, score: int) -> None:
    one = decision(request_id)
    one.scores[0].score = score
    decisions.append(one)


def test_the_feed_sorts_the_whole_log_and_pages_on(page, asgi_server, carol, redis_client) -> None:
    """The log starts empty (redis_client), so the count is this test's decisions alone."""
    count = FEED_ROWS + 10
    for n in range(count):  # the oldest scores highest
        _append(f"r{n}", 1000 - n)
    log_in(page, asgi_server, "carol", "pw-carol-123")
    page.goto(f"{asgi_server}/feed/")
    rows = page.locator("#feed-rows details.decision")
    shown = lambda: [rows.nth(i).get_attribute("data-request-id") for i in range(rows.count())]  # noqa: E731
    assert "r0" not in shown()

    page.get_by_label("Order").select_option("score")
    page.wait_for_url("**order=score**")
    page.locator('#feed-status[data-state="live"]').wait_for()
    assert shown() == [f"r{n}" for n in range(FEED_ROWS)]
    assert page.locator("#feed-count").inner_text().startswith(f"{count} of the {count} decisions")

    # Live: one that ranks first joins at the top; one that ranks below the last row shown
    # waits for the next page, which brings it in its place.
    _append("top", 5000)
    _append("low", 1000 - count - 5)
    page.locator('details.decision[data-request-id="top"]').wait_for()
    assert shown()[0] == "top" and "low" not in shown()
    page.get_by_role("button", name="Show more").click()
    expect(rows).to_have_count(count + 2)
    assert shown() == ["top", *(f"r{n}" for n in range(count)), "low"]
    assert page.locator("#feed-more").is_hidden()
