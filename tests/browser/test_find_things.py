"""An operator finds things: the header's search box takes every kind of id they have in hand
(a block hash, an engine hash from an engine's log, a pod, a model, a request id, a decision
id) and jumps to its page; /pods/ sorts and filters with the choice kept in the URL."""

from concurrent.futures import ThreadPoolExecutor

import pytest

from kvadmin.routing.service import score
from tests.browser.conftest import log_in
from tests.index import MODEL, OTHER_MODEL, block_tokens, engine_hash, std
from tests.residency.conftest import register

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def fleet(index, django_user_model):  # noqa: F811
    """Three pods: vllm-0 (4 blocks) and vllm-1 (2 blocks) of MODEL, llama-0 (1 block) of
    OTHER_MODEL; one recorded decision for request "req-7"; and Fay, an operator."""
    register("vllm-0.default")
    register("vllm-1.default")
    register("llama-0.default", model=OTHER_MODEL)
    index.store("vllm-0.default", range(4))
    index.store("vllm-1.default", range(2))
    index.store("llama-0.default", [9], model=OTHER_MODEL)
    django_user_model.objects.create_user("fay", password="pw-fay-123456")
    with ThreadPoolExecutor(1) as pool:  # away from Playwright's event loop
        ids = [t for n in range(3) for t in block_tokens(n)]
        return pool.submit(score, MODEL, token_ids=ids, request_id="req-7").result()


def _search(page, query: str) -> None:
    box = page.get_by_role("searchbox")
    box.fill(query)
    box.press("Enter")
    page.wait_for_load_state()


def test_the_search_box_finds_every_kind_of_id(page, asgi_server, fleet) -> None:
    decision = fleet
    log_in(page, asgi_server, "fay", "pw-fay-123456")
    heading = page.get_by_role("heading", level=1)

    _search(page, str(std(3)))
    assert heading.inner_text() == f"Block {std(3)}"
    _search(page, engine_hash(1))
    assert heading.inner_text() == f"Block {std(1)}"
    _search(page, "vllm-1.default")
    assert heading.inner_text() == "Pod vllm-1.default"
    _search(page, OTHER_MODEL)
    assert page.url.endswith("/blocks/?model=meta-llama%2FLlama-3.1-8B")
    _search(page, decision.decision_id)
    assert heading.inner_text() == f"Decision {decision.decision_id}"
    _search(page, "req-7")
    assert heading.inner_text() == f"Decision {decision.decision_id}"

    _search(page, "vllm-")
    assert page.locator("#search-count").inner_text().startswith("2 matches")
    page.locator("#search-results a", has_text="vllm-0.default").click()
    assert heading.inner_text() == "Pod vllm-0.default"
    _search(page, "no-such-thing")
    assert page.locator("#search-none").is_visible()


def test_pods_sort_and_filter_with_the_choice_in_the_url(page, asgi_server, fleet) -> None:
    log_in(page, asgi_server, "fay", "pw-fay-123456")
    page.goto(f"{asgi_server}/pods/")
    rows = page.locator("#pods tbody tr.pod-row")
    pods = lambda: [rows.nth(i).get_attribute("data-pod") for i in range(rows.count())]  # noqa: E731

    page.locator("#pods th[data-sort-key=blocks] button").click()
    assert pods() == ["llama-0.default", "vllm-1.default", "vllm-0.default"]
    assert "sort=blocks&dir=asc" in page.url
    page.locator("#pods th[data-sort-key=blocks] button").click()
    assert pods() == ["vllm-0.default", "vllm-1.default", "llama-0.default"]
    assert page.locator("#pods th[data-sort-key=blocks]").get_attribute("aria-sort") == "descending"

    page.get_by_label("Model").select_option(MODEL)
    assert page.locator("output[data-match-count-for=pods]").inner_text() == "2 of 3 shown"
    assert not rows.filter(has_text="llama-0.default").is_visible()
    page.reload()
    assert "model=Qwen%2FQwen3-8B" in page.url  # MODEL, as the URL escapes it
    assert page.locator("output[data-match-count-for=pods]").inner_text() == "2 of 3 shown"
    assert pods() == ["vllm-0.default", "vllm-1.default", "llama-0.default"], "order kept"
