"""Every page, in both themes and on a phone: axe-core finds no WCAG A/AA violation (at phone
width too), nothing
scrolls the page sideways at 390 px, the navigation folds behind a menu button, and the dark
theme follows the system until the toggle chooses (and remembers) one."""

import pytest
from django.contrib.auth.models import User
from django.test import RequestFactory

from kvadmin.api.models import ApiToken
from kvadmin.errors import server_error
from tests.browser.accessibility import SWAGGER_UI_MARKUP, violations
from tests.browser.conftest import TIMEOUT_MS, log_in
from tests.conftest import http_json
from tests.faults.conftest import site  # noqa: F401 (a web server on a Redis of its own)
from tests.index import MODEL, NOW, IngestedIndex, block_tokens, std
from tests.residency.conftest import register
from tests.routing.delivered import routed

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
MISSING = 12345


@pytest.fixture
def fleet(redis_client, django_user_model) -> IngestedIndex:
    """Two pods holding blocks in every styled medium, one scored request on the feed, and
    Carol, an operator with every permission (so pages show their edit controls too)."""
    register("vllm-0.default")
    register("vllm-1.default")
    index = IngestedIndex(redis_client)
    index.store("vllm-0.default", range(10), at=NOW)
    index.offload("vllm-0.default", range(3), "CPU", at=NOW + 60)
    index.offload("vllm-0.default", range(3, 5), "DISK", at=NOW + 60)
    index.store("vllm-1.default", range(10, 40), at=NOW + 30)
    index.offload("vllm-1.default", range(10, 12), "CPU_PINNED", at=NOW + 60)
    django_user_model.objects.create_superuser("carol", password="pw-carol-123")
    return index


@pytest.fixture
def delivering(fleet, redis_client) -> IngestedIndex:
    """The fleet, and outcomes vllm-0 delivered: its pod page's prediction error and
    calibration's fit on /weights/ have rows."""
    for n in range(12):
        tokens = 100 + 50 * (n % 4)
        routed(redis_client, "vllm-0.default", model=MODEL, prompt=tokens,
               predicted_s=0.05, ttft_s=0.02 + tokens / 5000)  # fmt: skip
    return fleet


def _score(base_url: str) -> None:
    token = ApiToken.issue("gateway")[1]
    ids = [t for n in range(4) for t in block_tokens(n)]
    status, _ = http_json(
        f"{base_url}/api/v1/score", {"model": MODEL, "token_ids": ids, "request_id": "r-1"}, token
    )
    assert status == 200


PAGES = {
    "dashboard": "/",
    "feed": "/feed/",
    "feed by score": "/feed/?order=score",
    "blocks": f"/blocks/?model={MODEL}",
    "blocks by owners": f"/blocks/?model={MODEL}&sort=owners",
    "blocks oldest first": f"/blocks/?model={MODEL}&sort=last-stored&dir=asc",
    "block": f"/blocks/{MODEL}/{std(1)}/",
    "pods": "/pods/",
    "pod": "/pods/vllm-0.default/",
    "pod, last 24 hours": "/pods/vllm-0.default/?range=24h",
    "dashboard, custom range": "/?range=custom&from=2025-10-09T08:00&to=2025-10-09T09:00",
    "weights": "/weights/",
    "explain": "/explain/",
    "missing block": f"/blocks/{MODEL}/{MISSING}/",
    "search results": "/search/?q=vllm-",
    "search without a match": "/search/?q=nothing-here",
    "no such page": "/no-such-page/",
}


def _visit(page, base_url: str, path: str) -> None:
    page.goto(base_url + path)
    page.wait_for_load_state("load")


def _explained(page) -> None:
    """The explain page's answer: its form submitted (token ids, the default input), the grid
    drawn."""
    page.get_by_label("Request").fill(",".join(str(t) for n in range(4) for t in block_tokens(n)))
    page.get_by_role("button", name="Explain").click()
    page.locator("#grid").wait_for()


def _open_a_decision(page, base_url: str) -> None:
    """The feed, live, with its first decision opened."""
    _visit(page, base_url, "/feed/")
    page.locator('#feed-status[data-state="live"]').wait_for()
    page.locator("details.decision summary").first.click()
    page.locator("details.decision .explanation").wait_for()


def _decision_page(page, base_url: str) -> None:
    """From the feed, the page of its first decision (where the header search jumps)."""
    explained = page.locator("details.decision").first.get_attribute("hx-get")
    _visit(page, base_url, explained.replace("/feed/decisions/", "/decisions/"))
    page.get_by_role("heading", name="Decision").wait_for()


def _api_docs(page, base_url: str) -> None:
    """The API reference, once Swagger UI has rendered the operations."""
    _visit(page, base_url, "/api/v1/docs")
    page.locator(".opblock").first.wait_for()


def _server_error(page, base_url: str) -> None:
    """The 500 page, as kvadmin's handler renders it for Carol (no page of the site fails on
    purpose, so it is rendered here and shown at the site's origin, its assets from there)."""
    request = RequestFactory().get("/pods/")
    request.user = User.objects.get(username="carol")
    html = server_error(request).content.decode()
    _visit(page, base_url, "/")
    page.set_content(html, wait_until="load")
    page.get_by_role("heading", name="Something went wrong").wait_for()


def _refused(page) -> None:
    """A form posted without its CSRF token (a page left open across a login): the 403 page."""
    page.evaluate("document.querySelector('.logout [name=csrfmiddlewaretoken]').remove()")
    page.get_by_role("button", name="Log out").click()
    page.get_by_role("heading", name="Not allowed").wait_for()


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_every_page_passes_axe(page, asgi_server, delivering, theme) -> None:
    page.emulate_media(color_scheme=theme)
    _visit(page, asgi_server, "/accounts/login/")
    found = {"login": violations(page)}
    log_in(page, asgi_server, "carol", "pw-carol-123")
    _score(asgi_server)
    for name, path in PAGES.items():
        _visit(page, asgi_server, path)
        found[name] = violations(page)
    _visit(page, asgi_server, "/explain/")
    _explained(page)
    found["explain answer"] = violations(page)
    _open_a_decision(page, asgi_server)
    found["decision explained"] = violations(page)
    _decision_page(page, asgi_server)
    found["decision page"] = violations(page)
    _api_docs(page, asgi_server)
    found["api docs"] = violations(page, waived=SWAGGER_UI_MARKUP)
    _server_error(page, asgi_server)
    found["server error"] = violations(page)
    _visit(page, asgi_server, "/")
    _refused(page)
    found["refused form"] = violations(page)

    assert {name: v for name, v in found.items() if v} == {}


def test_every_page_fits_a_phone(browser, asgi_server, delivering) -> None:
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    wide = {}
    found = {}

    def measure(name: str) -> None:
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > PHONE["width"]:
            wide[name] = width
        # axe at phone width too: what scrolls there (a wide table) must be reachable by keyboard
        waived = SWAGGER_UI_MARKUP if name == "api docs" else frozenset()
        if problems := violations(page, waived=waived):
            found[name] = [(problem["id"], problem["nodes"]) for problem in problems]

    _visit(page, asgi_server, "/accounts/login/")
    measure("login")
    log_in(page, asgi_server, "carol", "pw-carol-123")
    _score(asgi_server)
    for name, path in PAGES.items():
        _visit(page, asgi_server, path)
        measure(name)
    _visit(page, asgi_server, "/explain/")
    _explained(page)
    measure("explain answer")
    _open_a_decision(page, asgi_server)
    measure("decision explained")
    _decision_page(page, asgi_server)
    measure("decision page")
    _api_docs(page, asgi_server)
    measure("api docs")
    assert wide == {}
    assert found == {}

    nav = page.get_by_role("navigation", name="Main")
    menu = page.get_by_role("button", name="Menu")
    assert menu.is_visible() and not nav.is_visible()
    menu.click()
    assert nav.is_visible() and menu.get_attribute("aria-expanded") == "true"
    nav.get_by_role("link", name="Pods").click()
    page.wait_for_url("**/pods/")
    assert not nav.is_visible()
    context.close()


def test_the_navigation_is_open_on_a_wide_screen(page, asgi_server, fleet) -> None:
    log_in(page, asgi_server, "carol", "pw-carol-123")
    assert page.get_by_role("navigation", name="Main").is_visible()
    assert not page.get_by_role("button", name="Menu").is_visible()


def _background(page) -> str:
    return page.evaluate("getComputedStyle(document.body).backgroundColor")


DARK, LIGHT = "rgb(20, 23, 29)", "rgb(246, 247, 249)"


def test_the_theme_follows_the_system_until_the_toggle_chooses(page, asgi_server, fleet) -> None:
    page.emulate_media(color_scheme="dark")
    log_in(page, asgi_server, "carol", "pw-carol-123")
    toggle = page.get_by_role("button", name="Dark theme")
    assert _background(page) == DARK and toggle.get_attribute("aria-pressed") == "true"

    toggle.click()  # light, although the system is dark: remembered across pages
    assert _background(page) == LIGHT and toggle.get_attribute("aria-pressed") == "false"
    _visit(page, asgi_server, "/pods/")
    assert _background(page) == LIGHT
    assert page.evaluate("document.documentElement.dataset.theme") == "light"

    page.get_by_role("button", name="Dark theme").click()  # back to the system's: forgotten
    assert _background(page) == DARK
    assert page.evaluate("localStorage.getItem('kvadmin-theme')") is None
    page.emulate_media(color_scheme="light")
    _visit(page, asgi_server, "/pods/")
    assert _background(page) == LIGHT


def test_a_skip_link_leads_to_the_content(page, asgi_server, fleet) -> None:
    log_in(page, asgi_server, "carol", "pw-carol-123")
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to content")
    assert skip.evaluate("element => element === document.activeElement")
    assert skip.is_visible()
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"


def test_the_outage_page_passes_axe(browser, site) -> None:  # noqa: F811 (the fixture)
    """Redis down: the 503 page, in the site's layout, in both themes."""
    context = browser.new_context()
    name, value = site.cookie.split("=", 1)
    context.add_cookies([{"name": name, "value": value, "url": site.url}])
    page = context.new_page()
    site.stop_redis()
    found = {}
    for theme in ("light", "dark"):
        page.emulate_media(color_scheme=theme)
        response = page.goto(f"{site.url}/pods/")
        assert response is not None and response.status == 503
        assert page.get_by_role("navigation", name="Main").is_visible()
        found[theme] = violations(page)
    context.close()
    assert found == {"light": [], "dark": []}


def test_a_missing_block_says_so_in_the_site_layout(page, asgi_server, fleet) -> None:
    log_in(page, asgi_server, "carol", "pw-carol-123")
    response = page.goto(f"{asgi_server}/blocks/{MODEL}/{MISSING}/")
    assert response is not None and response.status == 404
    assert page.get_by_role("heading", name="Not found").is_visible()
    assert f"No pod holds block {MISSING} of {MODEL}." in page.locator("main").inner_text()
    assert (
        page.get_by_role("navigation", name="Main").get_by_role("link", name="Blocks").is_visible()
    )
