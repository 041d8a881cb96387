"""Every endpoint x every scope: a token answers only where its scopes reach, elsewhere 403
naming the missing scope; in-process (Django's test client) and once through the real server."""

import json

import pytest
from django.test import Client

from kvadmin.api.models import ApiToken
from tests.conftest import http_json

OWN_POD = "vllm-0.default"
OTHER_POD = "vllm-1.default"


# Each endpoint with a request that any token holding its scope gets past authorisation with,
# and the status that request then answers: the view's own input checks, nothing stored.
ENDPOINTS = {
    "score": ("post", "/api/v1/score", "score", 400),  # {} has no model
    "decisions": ("get", "/api/v1/decisions?limit=0", "decisions:read", 400),
    "push own pod": ("post", f"/api/v1/events/{OWN_POD}", f"events:push={OWN_POD}", 415),
    "push other pod": ("post", f"/api/v1/events/{OTHER_POD}", f"events:push={OTHER_POD}", 415),
    "metrics": ("get", "/metrics", "metrics", 200),
    "openapi": ("get", "/api/v1/openapi.json", None, 200),  # any valid token
}

GRANTS = {
    "score": {"score", "openapi"},
    "decisions:read": {"decisions", "openapi"},
    "events:push": {"push own pod", "push other pod", "openapi"},
    f"events:push={OWN_POD}": {"push own pod", "openapi"},
    "metrics": {"metrics", "openapi"},
    "score metrics": {"score", "metrics", "openapi"},
    "score decisions:read events:push metrics": set(ENDPOINTS),
}


def _request(client: Client, endpoint: str, token: str):
    method, url, _, _ = ENDPOINTS[endpoint]
    headers = {"Authorization": f"Bearer {token}"}
    if method == "get":
        return client.get(url, headers=headers)
    return client.post(url, "{}", content_type="application/json", headers=headers)


@pytest.mark.django_db
@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("grants", GRANTS)
def test_a_token_reaches_exactly_its_scopes(redis_client, grants: str, endpoint: str) -> None:
    _, token = ApiToken.issue("client", grants)
    _, _, needed, answer = ENDPOINTS[endpoint]

    response = _request(Client(), endpoint, token)

    if endpoint in GRANTS[grants]:
        assert response.status_code == answer, response.content
    else:
        assert response.status_code == 403, response.content
        assert response["Content-Type"] == "application/json"
        body = response.json()
        assert body["missing_scope"] == needed
        assert needed.partition("=")[0] in body["error"]


@pytest.mark.django_db
def test_no_token_is_still_401_not_403(redis_client) -> None:
    for endpoint in ENDPOINTS:
        response = _request(Client(), endpoint, "kva_unknown")
        assert response.status_code == 401, endpoint


@pytest.mark.django_db
def test_a_pod_limited_push_names_the_pod_it_lacks() -> None:
    _, token = ApiToken.issue("engine", f"events:push={OWN_POD}")

    body = _request(Client(), "push other pod", token).json()

    assert body["missing_scope"] == f"events:push={OTHER_POD}"
    assert OTHER_POD in body["error"]


@pytest.mark.django_db
def test_the_openapi_document_names_each_operations_scope(client: Client) -> None:
    _, token = ApiToken.issue("reader")
    response = client.get("/api/v1/openapi.json", HTTP_AUTHORIZATION=f"Bearer {token}")
    paths = response.json()["paths"]
    for method, url, needed, _ in ENDPOINTS.values():
        if not url.startswith("/api/v1/") or needed is None:
            continue
        path = url.split("?")[0].replace(OWN_POD, "{pod}").replace(OTHER_POD, "{pod}")
        operation = paths[path][method]
        assert operation["x-required-scope"] == needed.partition("=")[0]
        assert operation["security"] == [{"token": [needed.partition("=")[0]]}]
        assert "403" in operation["responses"]


@pytest.mark.django_db(transaction=True)
def test_the_real_server_refuses_a_scoring_token_a_push(asgi_server: str) -> None:
    _, scoring = ApiToken.issue("gateway")  # the default: score only
    _, pushing = ApiToken.issue("engine", f"events:push={OWN_POD}")
    push = f"{asgi_server}/api/v1/events/{OWN_POD}"

    status, body = http_json(push, b"\x90", token=scoring)
    assert (status, body["missing_scope"]) == (403, f"events:push={OWN_POD}")
    status, body = http_json(f"{asgi_server}/api/v1/score", {}, token=pushing)
    assert (status, body["missing_scope"]) == (403, "score")
    status, body = http_json(f"{asgi_server}/api/v1/score", {}, token=scoring)
    assert status == 400, json.dumps(body)  # past the scope check: no model
