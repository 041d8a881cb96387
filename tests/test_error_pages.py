"""404, 403, 500 pages and the favicon: error pages keep the site's layout and navigation and
say what happened and what to do; /favicon.ico is the site's icon, not a logged 404."""

import http.client
import logging
from urllib.parse import urlsplit

import pytest
from django.test import Client, override_settings

from tests.index import MODEL
from tests.residency.conftest import register
from tests.waiting import patient

pytestmark = pytest.mark.django_db

NAVIGATION = 'nav aria-label="Main"'


@pytest.fixture
def alice(django_user_model) -> Client:
    """Alice may look at everything and change nothing."""
    client = Client()
    client.force_login(django_user_model.objects.create_user("alice", password="pw-alice-123"))
    return client


def test_a_missing_block_names_the_block(alice, redis_client) -> None:
    response = alice.get(f"/blocks/{MODEL}/12345/")
    page = response.content.decode()
    assert response.status_code == 404 and NAVIGATION in page
    assert f"No pod holds block 12345 of {MODEL}." in page
    assert "garbage" in page  # what may have happened to it


def test_an_unknown_address_says_there_is_no_page(alice) -> None:
    response = alice.get("/no-such-page/")
    page = response.content.decode()
    assert response.status_code == 404 and NAVIGATION in page
    assert "There is no page at <code>/no-such-page/</code>" in page


def test_a_refused_edit_says_which_permission_it_needs(alice, redis_client) -> None:
    register("vllm-0.default")
    response = alice.post("/pods/vllm-0.default/purge/")
    page = response.content.decode()
    assert response.status_code == 403 and NAVIGATION in page
    assert "Your account (alice) may not do this. Nothing was changed." in page
    assert "permission" in page


def test_a_form_without_its_token_says_to_reload(django_user_model) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(django_user_model.objects.create_user("bob", password="pw-bob-12345"))
    response = client.post("/accounts/logout/")
    page = response.content.decode()
    assert response.status_code == 403 and NAVIGATION in page
    assert "security token" in page and "reload the page" in page


@override_settings(ROOT_URLCONF="tests.error_urls")
def test_a_server_error_keeps_the_layout(alice) -> None:
    alice.raise_request_exception = False
    response = alice.get("/fails/")
    page = response.content.decode()
    assert response.status_code == 500 and NAVIGATION in page
    assert "Something went wrong" in page and "server's log" in page


def test_a_server_error_still_answers_when_the_layout_cannot_render(alice, settings) -> None:
    """Django's own 500 page (templates/500.html without the request): no navigation, the
    same words."""
    settings.ROOT_URLCONF = "tests.error_urls"
    options = settings.TEMPLATES[0]["OPTIONS"]
    processors = [*options["context_processors"], "tests.error_urls.broken_context"]
    settings.TEMPLATES = [
        settings.TEMPLATES[0] | {"OPTIONS": options | {"context_processors": processors}}
    ]
    alice.raise_request_exception = False
    response = alice.get("/fails/")
    page = response.content.decode()
    assert response.status_code == 500 and NAVIGATION not in page
    assert "Something went wrong" in page


def test_the_favicon_answers_without_a_login_or_a_not_found_line(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = Client().get("/favicon.ico")
    assert response.status_code == 301
    assert response["Location"] == "/static/kvadmin/favicon.svg"
    assert not [r for r in caplog.records if "Not Found" in r.getMessage()]


def test_the_favicon_is_served(asgi_server) -> None:
    connection = http.client.HTTPConnection(urlsplit(asgi_server).netloc, timeout=patient(5))
    try:
        connection.request("GET", "/static/kvadmin/favicon.svg")
        response = connection.getresponse()
        body = response.read()
    finally:
        connection.close()
    assert response.status == 200 and body.startswith(b"<svg")
