"""/api/v1/openapi.json documents every /api/v1/ endpoint, for token holders and operators."""

import re

import pytest

from kvadmin.api import urls

pytestmark = pytest.mark.django_db


def _openapi_path(route: str) -> str:
    return "/api/v1/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)


def test_every_api_route_is_documented(client, token) -> None:
    response = client.get("/api/v1/openapi.json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"].startswith("3.1")
    routes = {_openapi_path(str(pattern.pattern)) for pattern in urls.urlpatterns}
    assert routes <= set(document["paths"])
    score = document["paths"]["/api/v1/score"]["post"]
    assert {"200", "400", "401", "422", "503"} <= set(score["responses"])


def test_a_logged_in_operator_can_read_it(client, django_user_model) -> None:
    client.force_login(django_user_model.objects.create_user("alice", password="pw-alice-123"))
    assert client.get("/api/v1/openapi.json").status_code == 200


def test_strangers_cannot(client) -> None:
    assert client.get("/api/v1/openapi.json").status_code == 401


def test_the_policy_and_the_estimates_are_documented(client, token) -> None:
    document = client.get("/api/v1/openapi.json", HTTP_AUTHORIZATION=f"Bearer {token}").json()
    schemas = document["components"]["schemas"]
    assert schemas["ScoreRequest"]["properties"]["policy"]["enum"] == ["ttft", "kthena"]
    decision = schemas["Decision"]["properties"]
    assert {"policy", "reason", "estimates", "stale_loads"} <= set(decision)
    estimate = set(schemas["CandidateEstimate"]["properties"])
    assert {"wait_s", "prefill_s", "reload_s", "work_penalty_s", "cost_s", "load_stale"} <= estimate
