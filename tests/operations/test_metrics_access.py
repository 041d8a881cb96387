"""/metrics answers a Prometheus scraper with an API token or from an allowed address; nobody
else, not even a logged-in person's browser session."""

import pytest
from django.test import Client, override_settings

from kvadmin.api.models import ApiToken

pytestmark = pytest.mark.django_db


def test_it_refuses_an_anonymous_scrape(client: Client) -> None:
    response = client.get("/metrics")

    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_it_answers_a_valid_token(client: Client) -> None:
    _, token = ApiToken.issue("prometheus", "metrics")

    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200


def test_it_refuses_a_revoked_token(client: Client) -> None:
    row, token = ApiToken.issue("prometheus", "metrics")
    row.revoke()

    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 401


def test_a_session_login_is_not_enough(client: Client, django_user_model) -> None:
    client.force_login(django_user_model.objects.create_user("alice", password="pw-alice-123"))

    assert client.get("/metrics").status_code == 401


def test_a_staff_session_may_read_them(client: Client, django_user_model) -> None:
    client.force_login(django_user_model.objects.create_user("sam", is_staff=True))

    assert client.get("/metrics").status_code == 200


@override_settings(KVADMIN={"METRICS_ALLOW": "10.0.0.0/8, 192.168.1.7"})
def test_it_answers_allowed_addresses_and_networks_without_a_token(client: Client) -> None:
    assert client.get("/metrics", REMOTE_ADDR="10.20.30.40").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.168.1.7").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.168.1.8").status_code == 401
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 401


@override_settings(KVADMIN={"METRICS_ALLOW": "not-an-address, 127.0.0.1"})
def test_a_bad_entry_in_the_allow_list_is_ignored(client: Client) -> None:
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 200
