"""/readyz tells anyone whether each check is ok; what failed and where (the Redis address,
raw errors, worker counts) only to an API token or a staff session."""

import json

import pytest
from django.test import Client, override_settings

from kvadmin.api.models import ApiToken
from kvadmin.redis_server import free_port

pytestmark = pytest.mark.django_db


@pytest.fixture
def redis_away() -> str:
    """The index points at a port nothing listens on."""
    url = f"redis://127.0.0.1:{free_port()}/0"
    with override_settings(INDEX_REDIS_URL=url):
        yield url


def _checks(response) -> dict:
    assert response.status_code == 503
    return json.loads(response.content)["checks"]


def test_an_anonymous_caller_sees_only_ok_or_fail(client: Client, redis_away: str) -> None:
    response = client.get("/readyz")
    checks = _checks(response)
    assert checks == {
        "redis": {"ok": False},
        "database": {"ok": True},
        "ingest": {"ok": False},
        "engines": {"ok": False},
    }
    assert redis_away.split("//")[1].split("/")[0] not in response.content.decode()


def test_a_logged_in_operator_who_is_not_staff_sees_no_more(
    client: Client, redis_away: str, django_user_model
) -> None:
    client.force_login(django_user_model.objects.create_user("alice"))
    assert set(_checks(client.get("/readyz"))["redis"]) == {"ok"}


def test_a_token_or_staff_sees_the_details(
    client: Client, redis_away: str, django_user_model
) -> None:
    token = ApiToken.issue("probe")[1]
    by_token = _checks(client.get("/readyz", HTTP_AUTHORIZATION=f"Bearer {token}"))
    assert "Connection" in by_token["redis"]["error"] and "ms" in by_token["redis"]
    client.force_login(django_user_model.objects.create_user("sam", is_staff=True))
    assert "error" in _checks(client.get("/readyz"))["redis"]
