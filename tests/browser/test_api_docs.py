"""An operator reads the API's reference at /api/v1/docs, reached from the navigation: the
vendored Swagger UI renders the OpenAPI document under the Content-Security-Policy."""

import pytest

from tests.browser.conftest import log_in
from tests.browser.test_content_security_policy import WATCH

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_api_reference_renders_every_operation(page, asgi_server, django_user_model):
    django_user_model.objects.create_user("dora", password="pw-dora-12345")
    page.add_init_script(WATCH)
    log_in(page, asgi_server, "dora", "pw-dora-12345")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="API").click()
    page.wait_for_url("**/api/v1/docs")
    score = page.locator(".opblock-post", has_text="/api/v1/score")
    score.wait_for()
    assert page.locator(".opblock").count() >= 5  # score, decisions, outcome, events, docs...
    score.locator(".opblock-summary").click()
    score.get_by_text("Request body").first.wait_for()
    assert page.evaluate("window.__violations") == []


def test_strangers_are_sent_to_log_in(page, asgi_server) -> None:
    page.goto(f"{asgi_server}/api/v1/docs")
    assert "/accounts/login/" in page.url
