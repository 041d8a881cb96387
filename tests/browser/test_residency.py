"""An operator browses the residency index in a real browser: blocks, a medium filter, one
block, the pods and one pod's per-medium bars."""

import pytest
from django.contrib.auth.models import Permission
from playwright.sync_api import expect

from kvadmin.residency.listing import PAGE_SIZE
from kvadmin.residency.tasks import sample_pods
from tests.browser.conftest import log_in
from tests.index import MODEL, NOW, IngestedIndex, std
from tests.residency.conftest import register
from tests.waiting import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def fleet(redis_client) -> IngestedIndex:
    """vllm-0 holds blocks 0-9 in GPU and offloaded 0-2 to CPU; vllm-1 holds 10-69 in GPU."""
    register("vllm-0.default")
    register("vllm-1.default")
    index = IngestedIndex(redis_client)
    index.store("vllm-0.default", range(10), at=NOW)
    index.offload("vllm-0.default", range(3), "CPU", at=NOW + 60)
    index.store("vllm-1.default", range(10, 70), at=NOW + 30)
    return index


def test_an_operator_browses_blocks_and_pods(page, asgi_server, django_user_model, fleet) -> None:
    django_user_model.objects.create_user("carol", password="pw-carol-123")
    log_in(page, asgi_server, "carol", "pw-carol-123")

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Blocks").click()
    rows = page.locator("tr.block-row")
    assert page.get_by_role("heading", name="Cached blocks").is_visible()
    assert rows.count() == PAGE_SIZE
    page.locator("tr.more").scroll_into_view_if_needed()  # infinite scroll: htmx `revealed`
    # A locator wait, not wait_for_function: the page's CSP refuses the eval that needs.
    expect(rows).to_have_count(70)

    page.get_by_label("Medium").select_option("CPU")
    page.wait_for_url("**medium=CPU**")
    assert rows.count() == 3
    # Each shows the medium it matched in (CPU), and the router's (GPU) beside it, labelled.
    assert page.locator("tr.block-row .badge.m-cpu").count() == 3
    assert page.locator("tr.block-row .badge.m-gpu").count() == 0
    assert page.locator("tr.block-row .router-medium").all_inner_texts() == ["router: GPU"] * 3

    page.locator("tr.block-row a code").first.click()
    assert page.get_by_role("heading", name="Block").inner_text() in {
        f"Block {std(n)}" for n in range(3)
    }
    owner = page.locator("tbody.owner", has_text="vllm-0.default")
    assert owner.locator(".badge.m-gpu").is_visible() and owner.locator(".badge.m-cpu").is_visible()

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Pods").click()
    page.wait_for_selector("#pods-live[data-live=connected]")
    page.get_by_role("link", name="vllm-0.default").click()
    assert page.get_by_role("heading", name="Pod vllm-0.default").is_visible()
    bar = page.locator("#media .bar")
    assert bar.get_attribute("aria-label") == "GPU 10 blocks, CPU 3 blocks"
    gpu, cpu = bar.locator("[data-medium=GPU]"), bar.locator("[data-medium=CPU]")
    assert gpu.is_visible() and cpu.is_visible()
    assert gpu.bounding_box()["width"] > 3 * cpu.bounding_box()["width"]
    assert MODEL in page.locator("dl.facts").first.inner_text()


def test_the_pods_bars_follow_the_index_live(
    page, asgi_server, celery_worker, django_user_model, fleet
) -> None:
    django_user_model.objects.create_user("carol", password="pw-carol-123")
    log_in(page, asgi_server, "carol", "pw-carol-123")
    page.goto(f"{asgi_server}/pods/")
    page.wait_for_selector("#pods-live[data-live=connected]")
    bar = page.locator('tr[data-pod="vllm-1.default"] .bar')
    assert bar.get_attribute("aria-label") == "GPU 60 blocks"

    fleet.offload("vllm-1.default", range(10, 20), "CPU", at=NOW + 90)

    def updated() -> bool:
        sample_pods.delay()  # what celery beat sends every few seconds
        return bar.get_attribute("aria-label") == "GPU 60 blocks, CPU 10 blocks"

    wait_until(updated, interval=0.3, what="the pods table to update live")
    assert page.url == f"{asgi_server}/pods/"


def test_an_engine_admin_purges_a_pod_after_confirming(
    page, asgi_server, django_user_model, fleet
) -> None:
    dave = django_user_model.objects.create_user("dave", password="pw-dave-1234")
    dave.user_permissions.add(Permission.objects.get(codename="change_engine"))
    log_in(page, asgi_server, "dave", "pw-dave-1234")
    page.goto(f"{asgi_server}/pods/vllm-0.default/")
    confirmations = []
    page.on("dialog", lambda dialog: (confirmations.append(dialog.message), dialog.accept()))

    page.get_by_role("button", name="Purge index entries").click()

    assert page.get_by_role("status").inner_text().endswith("10 block ownerships removed.")
    assert confirmations and confirmations[0].startswith("Remove every index entry")
    assert page.locator("#media .bar").get_attribute("aria-label") == "no blocks"


def test_the_block_and_pod_pages_follow_the_index_live(
    page, asgi_server, django_user_model, fleet
) -> None:
    """Like the lists, a block's page and a pod's page refresh themselves (every 5 s): a new
    owner of the block, and the pod's new blocks, show without a reload."""
    django_user_model.objects.create_user("carol", password="pw-carol-123")
    page.clock.install()  # runs on as usual; the test moves it on to the next refresh
    log_in(page, asgi_server, "carol", "pw-carol-123")
    page.goto(f"{asgi_server}/blocks/{MODEL}/{std(15)}/")
    owners = page.locator("tbody.owner")
    assert owners.count() == 1

    fleet.store("vllm-0.default", [15], at=NOW + 120)
    page.clock.run_for(5000)

    expect(page.locator('tbody.owner[data-pod="vllm-0.default"]')).to_be_visible()
    assert page.url == f"{asgi_server}/blocks/{MODEL}/{std(15)}/"

    page.goto(f"{asgi_server}/pods/vllm-1.default/")
    facts = page.locator("#pod-live dl.facts").first
    assert "60 (a block held" in facts.inner_text()
    assert "probes the replay socket and /health every 2 s" in page.locator("#health").inner_text()

    fleet.store("vllm-1.default", range(70, 75), at=NOW + 120)
    page.clock.run_for(5000)

    expect(facts).to_contain_text("65 (a block held")
