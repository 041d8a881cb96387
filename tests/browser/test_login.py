"""A person logs in with a real browser and finds the navigation; too many failures lock the
login out with a page that passes the accessibility check."""

import pytest

from tests.browser.accessibility import violations
from tests.browser.conftest import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_logging_in_shows_the_navigation(page, asgi_server, django_user_model) -> None:
    django_user_model.objects.create_user("bob", password="pw-bob-12345")
    log_in(page, asgi_server, "bob", "pw-bob-12345")
    nav = page.get_by_role("navigation", name="Main")
    assert nav.get_by_role("link", name="Dashboard").is_visible()
    assert page.get_by_role("heading", name="Dashboard").is_visible()


def test_a_wrong_password_is_refused(page, asgi_server, django_user_model) -> None:
    django_user_model.objects.create_user("bob", password="pw-bob-12345")
    page.goto(f"{asgi_server}/accounts/login/")
    page.fill("input[name=username]", "bob")
    page.fill("input[name=password]", "wrong")
    page.click("button[type=submit]")
    assert page.get_by_role("alert").is_visible()
    assert page.url.startswith(f"{asgi_server}/accounts/login/")


def test_repeated_failures_lock_the_login_out_with_a_clear_page(
    page, asgi_server, django_user_model
) -> None:
    django_user_model.objects.create_user("bob", password="pw-bob-12345")
    for _ in range(5):
        page.goto(f"{asgi_server}/accounts/login/")
        page.fill("input[name=username]", "bob")
        page.fill("input[name=password]", "wrong")
        page.click("button[type=submit]")
    assert page.get_by_role("heading", name="Too many failed logins").is_visible()
    assert "Try again 15 minutes after your last" in page.get_by_role("main").inner_text()
    assert violations(page) == []
