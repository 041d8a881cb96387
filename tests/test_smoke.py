"""The real ASGI server serves the login page and sends anonymous users to it."""

import urllib.error
import urllib.request


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def test_it_serves_the_login_page(asgi_server: str) -> None:
    with urllib.request.urlopen(f"{asgi_server}/accounts/login/") as response:
        body = response.read().decode()
    assert response.status == 200
    assert 'name="password"' in body
    assert "csrfmiddlewaretoken" in body


def test_it_redirects_anonymous_users_to_login(asgi_server: str) -> None:
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        opener.open(f"{asgi_server}/")
        raise AssertionError("expected a redirect")
    except urllib.error.HTTPError as redirect:
        assert redirect.code == 302
        assert redirect.headers["Location"] == "/accounts/login/?next=/"


def test_admin_requires_login(asgi_server: str) -> None:
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        opener.open(f"{asgi_server}/admin/")
        raise AssertionError("expected a redirect")
    except urllib.error.HTTPError as redirect:
        assert redirect.code == 302
        assert "/admin/login/" in redirect.headers["Location"]


def test_no_template_markup_reaches_the_page(asgi_server: str) -> None:
    """A `{# ... #}` comment spanning lines is text to Django: it would show on every page."""
    with urllib.request.urlopen(f"{asgi_server}/accounts/login/") as response:
        body = response.read().decode()
    assert not any(mark in body for mark in ("{#", "#}", "{%", "%}"))
