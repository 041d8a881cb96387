"""GET /api/v1/decisions takes a logged-in operator's session, as openapi.json does: the pages
show the same decisions. Strangers still need a token with decisions:read."""

import pytest

pytestmark = pytest.mark.django_db


def test_a_logged_in_operator_reads_the_decisions(client, django_user_model, redis_client):
    client.force_login(django_user_model.objects.create_user("ann", password="pw-ann-12345"))
    response = client.get("/api/v1/decisions")
    assert response.status_code == 200 and response.json() == {"decisions": []}


def test_strangers_need_a_token(client, redis_client) -> None:
    assert client.get("/api/v1/decisions").status_code == 401
