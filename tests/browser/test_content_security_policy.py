"""Every page works under the Content-Security-Policy: no violation is reported in a real
browser, the live socket connects, and the behaviours moved out of inline handlers work."""

from urllib.parse import urlencode

import pytest

from kvadmin.engines.models import Engine
from tests.browser.conftest import log_in
from tests.index import MODEL

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PAGES = [
    "/",
    "/feed/",
    "/blocks/",
    "/pods/",
    "/pods/vllm-0.default/",
    "/weights/",
    "/explain/",
    "/admin/",
    "/admin/engines/engine/",
]
WATCH = """
window.__violations = [];
document.addEventListener("securitypolicyviolation",
  (e) => window.__violations.push(e.violatedDirective + " " + (e.blockedURI || e.sample)));
"""


@pytest.fixture
def operator(django_user_model):
    """Olga, a superuser who may open every page, and one engine for the pages to show."""
    Engine.objects.create(
        pod="vllm-0.default", model=MODEL, kind="vllm", events_endpoint="tcp://h:5557"
    )
    django_user_model.objects.create_superuser("olga", password="pw-olga-12345")


def test_no_page_breaks_the_policy(page, asgi_server, operator, redis_client) -> None:
    page.add_init_script(WATCH)
    console = []
    page.on("console", lambda message: console.append(message.text))
    log_in(page, asgi_server, "olga", "pw-olga-12345")
    response = page.goto(f"{asgi_server}/")
    assert "script-src 'self' 'nonce-" in response.headers["content-security-policy"]
    page.wait_for_selector("#dashboard[data-live=connected]")
    for path in PAGES:
        page.goto(f"{asgi_server}{path}")
        page.wait_for_load_state("load")
        assert page.evaluate("window.__violations") == [], path
    assert not [text for text in console if "Content Security Policy" in text]


def test_a_filter_submits_when_its_choice_changes(page, asgi_server, operator) -> None:
    log_in(page, asgi_server, "olga", "pw-olga-12345")
    page.goto(f"{asgi_server}/feed/")
    page.select_option("select[name=model]", MODEL)
    page.wait_for_url(f"**/feed/?{urlencode({'model': MODEL})}*")
