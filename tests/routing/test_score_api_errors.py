"""Every bad request gets a clear 4xx naming the field (never a 500) and records nothing."""

import json

import pytest
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvadmin.api.models import ApiToken
from kvadmin.routing import decisions
from tests.conftest import examples
from tests.index import MODEL
from tests.routing.conftest import PODS, request_tokens

pytestmark = pytest.mark.django_db


def test_it_requires_a_token(post_score, engines) -> None:
    status, answer = post_score({"model": MODEL, "token_ids": [1]}, auth=None)
    assert status == 401 and "token" in answer["error"]
    status, _ = post_score({"model": MODEL, "token_ids": [1]}, auth="kva_not-a-token")
    assert status == 401


def test_it_refuses_a_revoked_token(post_score, engines, token) -> None:
    ApiToken.objects.get(name="gateway").revoke()
    status, _ = post_score({"model": MODEL, "token_ids": [1]})
    assert status == 401


BAD_REQUESTS = [
    ({"token_ids": [1]}, "model"),
    ({"model": "", "token_ids": [1]}, "model"),
    ({"model": 7, "token_ids": [1]}, "model"),
    ({"model": MODEL}, "token_ids"),
    ({"model": MODEL, "token_ids": [1], "prompt": "hi"}, "prompt"),
    ({"model": MODEL, "prompt": "hi", "messages": [{"role": "user", "content": "x"}]}, "messages"),
    ({"model": MODEL, "token_ids": []}, "token_ids"),
    ({"model": MODEL, "token_ids": "1,2"}, "token_ids"),
    ({"model": MODEL, "token_ids": [1, "2"]}, "token_ids"),
    ({"model": MODEL, "token_ids": [1, 2.5]}, "token_ids"),
    ({"model": MODEL, "token_ids": [1, True]}, "token_ids"),
    ({"model": MODEL, "token_ids": [1, -3]}, "token_ids"),
    ({"model": MODEL, "token_ids": [2**32]}, "token_ids"),
    ({"model": MODEL, "prompt": ""}, "prompt"),
    ({"model": MODEL, "prompt": ["a"]}, "prompt"),
    ({"model": MODEL, "messages": []}, "messages"),
    ({"model": MODEL, "messages": [{"content": "no role"}]}, "messages"),
    ({"model": MODEL, "messages": [{"role": "user", "content": 5}]}, "messages"),
    ({"model": MODEL, "token_ids": [1], "pods": []}, "pods"),
    ({"model": MODEL, "token_ids": [1], "pods": "vllm-0.default"}, "pods"),
    ({"model": MODEL, "token_ids": [1], "pods": [PODS[0], "ghost-0.default"]}, "pods"),
    ({"model": MODEL, "token_ids": [1], "request_id": "x" * 201}, "request_id"),
    ({"model": MODEL, "token_ids": [1], "request_id": {"a": 1}}, "request_id"),
]


@pytest.mark.parametrize(("body", "field"), BAD_REQUESTS)
def test_bad_input_is_a_400_naming_the_field(post_score, engines, redis_client, body, field):
    status, answer = post_score(body)
    assert status == 400, answer
    assert answer["field"] == field and field in answer["error"]
    assert decisions.recent(1) == []


def test_an_unknown_pod_is_named(post_score, engines, redis_client) -> None:
    body = {"model": MODEL, "token_ids": [1], "pods": [PODS[0], "ghost-0.default"]}
    _, answer = post_score(body)
    assert "ghost-0.default" in answer["error"] and PODS[0] not in answer["error"]


def test_more_tokens_than_the_limit_is_a_400(post_score, engines, redis_client) -> None:
    with override_settings(KVADMIN={"SCORE_MAX_TOKENS": 32}):
        assert post_score({"model": MODEL, "token_ids": request_tokens(2)})[0] == 200
        status, answer = post_score({"model": MODEL, "token_ids": request_tokens(2) + [1]})
    assert status == 400 and answer["field"] == "token_ids"
    assert "33 tokens" in answer["error"] and "32" in answer["error"]


@pytest.mark.parametrize("body", ["{not json", "[1, 2]", '"text"', ""])
def test_a_body_that_is_not_a_json_object_is_a_400(post_score, engines, body) -> None:
    status, answer = post_score(body)
    assert status == 400 and "error" in answer


def test_a_model_without_engines_is_a_422(post_score, engines, redis_client) -> None:
    status, answer = post_score({"model": "other/model", "token_ids": [1]})
    assert status == 422 and answer["field"] == "model" and "other/model" in answer["error"]
    status, _ = post_score({"model": "other/model", "token_ids": [1], "pods": [PODS[0]]})
    assert status == 422


def test_a_model_whose_engines_are_all_disabled_is_a_422(post_score, engines, redis_client):
    for engine in engines:
        engine.enabled = False
        engine.save()
    status, _ = post_score({"model": MODEL, "token_ids": [1]})
    assert status == 422


def test_other_methods_are_refused(client, token) -> None:
    response = client.get("/api/v1/score", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 405


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=10,
)
BODIES = st.fixed_dictionaries(
    {},
    optional={
        "model": st.sampled_from([MODEL, "", "x"]) | JSON,
        "token_ids": st.lists(st.integers(-5, 2**33), max_size=40) | JSON,
        "prompt": JSON,
        "messages": JSON,
        "pods": st.lists(st.sampled_from([*PODS, "ghost"]), max_size=3) | JSON,
        "request_id": JSON,
    },
)


@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(body=BODIES | JSON)
def test_no_body_makes_it_fail(post_score, engines, redis_client, body) -> None:
    status, answer = post_score(json.dumps(body))
    assert status in (200, 400, 422, 503), answer
    assert status == 200 or answer["error"]


def test_a_body_beyond_the_upload_limit_is_a_413(post_score, engines) -> None:
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000):
        status, answer = post_score({"model": MODEL, "token_ids": request_tokens(40)})
    assert status == 413 and "too large" in answer["error"]
