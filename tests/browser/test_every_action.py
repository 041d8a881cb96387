"""Every action on every page, clicked in a real browser, shows its result.

htmx 2 lets a child inherit hx-select and hx-swap from a region that refreshes itself, so a
button inside the region swapped its own answer away ("Find engine hashes" on a block's page
showed nothing). kvadmin turns inheritance off site-wide (templates/base.html): each element
names its own target and swap. These tests hold every page to that: each page's user-triggered
htmx elements are listed (a new one fails the test until it is clicked here too), and each is
clicked and its answer looked for.
"""

import pytest
from playwright.sync_api import expect

from kvadmin.routing import decisions
from kvadmin.routing.consumers import FEED_ROWS
from kvadmin.weights.config import KTHENA_DEFAULTS
from tests.browser.conftest import log_in
from tests.browser.test_every_screen import _score, fleet  # noqa: F401 (the fixture)
from tests.index import MODEL, engine_hash, std
from tests.routing.feed_socket import decision

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TRIGGERS = """() => Array.from(document.querySelectorAll("[hx-get], [hx-post], [ws-send]"))
  .filter((e) => !e.closest("[hidden]"))
  .filter((e) => !/\\b(every|load|revealed)\\b/.test(e.getAttribute("hx-trigger") || ""))
  .map((e) => e.tagName === "FORM" ? e.id || "form: " + e.querySelector("[type=submit]").textContent
    : e.tagName === "DETAILS" ? "details" : e.textContent)
  .map((label) => label.trim().replace(/\\s+/g, " "))
  .sort()"""
"""What an operator can set off on the page: elements htmx sends a request for on a click, a
toggle or a submit (those on a timer, on load or on scrolling into view are left out)."""


def _triggers(page) -> list[str]:
    return page.evaluate(TRIGGERS)


def _visit(page, url: str) -> None:
    page.goto(url)
    page.wait_for_load_state("load")


@pytest.fixture
def carol(page, asgi_server, fleet):  # noqa: F811
    log_in(page, asgi_server, "carol", "pw-carol-123")
    return page


@pytest.mark.parametrize(
    "path",
    [
        "/",
        f"/blocks/?model={MODEL}",
        "/pods/",
        "/explain/",
        "/search/?q=vllm-",
    ],
)
def test_pages_without_htmx_actions_have_none(carol, asgi_server, path) -> None:
    _visit(carol, asgi_server + path)
    assert _triggers(carol) == []


def test_find_engine_hashes_shows_them_on_a_block_page(carol, asgi_server) -> None:
    """Block 1 is held by vllm-0 alone; its scan lists the engine's hash and survives the
    block's own refresh every 5 s (the results are outside the live region)."""
    _visit(carol, f"{asgi_server}/blocks/{MODEL}/{std(1)}/")
    assert _triggers(carol) == ["Find engine hashes"]

    carol.get_by_role("button", name="Find engine hashes").click()

    found = carol.locator("#engine-hashes-1")
    expect(found.locator(".scan-done")).to_have_text("scan complete")
    assert engine_hash(1) in found.inner_text()
    assert carol.locator("#block-live #owners").is_visible(), "the live region is intact"
    carol.evaluate("document.getElementById('block-live').dataset.before = 'refresh'")
    carol.locator("#block-live:not([data-before])").wait_for()
    assert engine_hash(1) in found.inner_text(), "kept across the refresh"


def test_a_pod_page_purges_after_confirming(carol, asgi_server) -> None:
    _visit(carol, f"{asgi_server}/pods/vllm-1.default/")
    assert _triggers(carol) == ["form: Purge index entries"]
    carol.on("dialog", lambda dialog: dialog.accept())
    carol.get_by_role("button", name="Purge index entries").click()
    expect(carol.get_by_role("status")).to_contain_text("30 block ownerships removed.")
    assert carol.locator("#pod-live").count() == 1, "the page around the answer is whole"


def test_the_feed_explains_pauses_resumes_and_shows_more(carol, asgi_server) -> None:
    for n in range(FEED_ROWS + 1):
        decisions.append(decision(f"r-{n}"))
    _visit(carol, f"{asgi_server}/feed/")
    carol.locator('#feed-status[data-state="live"]').wait_for()
    assert _triggers(carol) == ["Pause", "Show more", *["details"] * FEED_ROWS]

    carol.locator("details.decision summary").first.click()
    expect(carol.locator("details.decision .explanation").first).to_contain_text("tier weights")

    carol.get_by_role("button", name="Pause").click()
    expect(carol.locator("#feed-status")).to_have_attribute("data-state", "paused")
    carol.get_by_role("button", name="Resume").click()
    expect(carol.locator("#feed-status")).to_have_attribute("data-state", "live")

    carol.get_by_role("button", name="Show more").click()
    expect(carol.locator("#feed-rows details.decision")).to_have_count(FEED_ROWS + 1)
    expect(carol.locator("#feed-more")).to_be_hidden()


def test_every_weights_action_shows_its_answer(carol, asgi_server, version_one) -> None:
    # An install from before the physical defaults: its version 1 leaves media unconfigured,
    # so the index's media offer "Configure".
    version_one.config = KTHENA_DEFAULTS.to_json()
    version_one.save(update_fields=["config"])
    _visit(carol, f"{asgi_server}/weights/")
    assert _triggers(carol) == sorted(
        [
            "Add medium",
            "Add model speed",
            "Configure",  # a medium seen in the index, not in the draft
            "Fit from engine metrics",
            "Preview",
            "weights-form",
        ]
    )
    rows = carol.locator("#draft-table tr")
    before = rows.count()
    carol.get_by_role("button", name="Add medium").click()
    expect(rows).to_have_count(before + 1)
    other = carol.locator("tbody.other-media tr").first
    name = other.locator("td").first.inner_text()
    other.get_by_role("button", name="Configure").click()
    expect(carol.get_by_label(f"Weight of {name}", exact=True)).to_be_visible()
    expect(carol.get_by_role("button", name="Configure")).to_have_count(0)
    speeds = carol.locator("#speed-table tr")
    count = speeds.count()
    carol.get_by_role("button", name="Add model speed").click()
    expect(speeds).to_have_count(count + 1)

    carol.get_by_role("button", name="Fit from engine metrics").click()
    expect(carol.locator("#fit-summary")).to_be_visible()

    _visit(carol, f"{asgi_server}/weights/")
    carol.get_by_label("Weight of cpu", exact=True).fill("0.5")
    carol.get_by_role("button", name="Preview").click()
    expect(carol.locator("#whatif h2")).to_be_visible()
    carol.get_by_role("button", name="Review and save…").click()
    review = carol.locator("#review")
    expect(review.locator(".diff")).to_have_text("cpu 0.8 → 0.5")
    assert "Back to editing" in _triggers(carol)
    carol.get_by_role("button", name="Back to editing").click()
    expect(review).to_have_count(0)
    carol.get_by_role("button", name="Review and save…").click()
    carol.get_by_label("Reason").fill("every action")
    carol.get_by_role("button", name="Confirm: save version 2").click()
    expect(carol.locator("#active-version")).to_have_text("2")

    assert "Restore version 1…" in _triggers(carol)
    carol.get_by_role("link", name="Restore version 1…").click()
    restore = carol.locator("#restore-form")
    expect(restore).to_be_visible()
    assert "restore-form" in _triggers(carol)
    restore.get_by_label("Reason").fill("undo")
    carol.get_by_role("button", name="Confirm: restore version 1").click()
    expect(carol.locator("#active-version")).to_have_text("3")
