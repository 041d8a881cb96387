"""POST /api/v1/decisions/<id>/outcome: the gateway reports the engine's usage for a decision
once; GET /api/v1/decisions then shows predicted vs delivered hits."""

import json

import pytest

from kvadmin.api.models import ApiToken
from kvadmin.routing import decisions
from tests.index import MODEL
from tests.routing.conftest import PODS, hold, request_tokens

pytestmark = pytest.mark.django_db


@pytest.fixture
def decided(post_score, engines, redis_client) -> dict:
    """A scored request of 3 blocks (48 tokens) whose first 2 blocks vllm-0 holds."""
    hold(redis_client, PODS[0], request_tokens(3), ["GPU", "GPU"])
    status, answer = post_score({"model": MODEL, "token_ids": request_tokens(3)})
    assert status == 200, answer
    return answer


@pytest.fixture
def post_outcome(client, token):
    """POST a decision's outcome in-process; returns the status and the JSON answer."""

    def post(decision_id: str, body, auth: str | None = token) -> tuple[int, dict]:
        headers = {"HTTP_AUTHORIZATION": f"Bearer {auth}"} if auth else {}
        data = body if isinstance(body, str | bytes) else json.dumps(body)
        response = client.post(
            f"/api/v1/decisions/{decision_id}/outcome",
            data=data,
            content_type="application/json",
            **headers,
        )
        return response.status_code, json.loads(response.content)

    return post


def test_an_outcome_is_recorded_with_what_was_predicted(decided, post_outcome) -> None:
    assert decided["chosen"] == PODS[0]
    status, answer = post_outcome(
        decided["decision_id"], {"cached_tokens": 16, "prompt_tokens": 48, "ttft_ms": 12.5}
    )
    assert status == 201, answer
    chosen = next(e for e in decided["estimates"] if e["pod"] == decided["chosen"])
    assert answer["predicted"] == {
        "available_tokens": 32,
        "achieved_tokens": 32,
        "ttft_ms": pytest.approx((chosen["wait_s"] + chosen["prefill_s"]) * 1000),
    }
    assert answer["delivered"]["cached_tokens"] == 16
    assert answer["delivered"]["ttft_ms"] == 12.5


def test_a_timed_outcome_puts_delivered_beside_predicted_ttft_on_metrics(
    decided, post_outcome, client
) -> None:
    post_outcome(decided["decision_id"], {"cached_tokens": 16, "prompt_tokens": 48, "ttft_ms": 40})
    predicted = decided["predicted"]["ttft_ms"] / 1000
    _, scrape = ApiToken.issue("prometheus", "metrics")
    text = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {scrape}").content.decode()
    labels = f'model="{MODEL}",pod="{PODS[0]}"'
    assert f"kvadmin_outcome_ttft_seconds_count{{{labels}}} 1.0" in text
    assert f"kvadmin_outcome_ttft_seconds_sum{{{labels}}} 0.04" in text
    assert f'kvadmin_outcome_ttft_seconds_bucket{{le="0.025",{labels}}} 0.0' in text
    assert f'kvadmin_outcome_ttft_seconds_bucket{{le="0.05",{labels}}} 1.0' in text
    assert f"kvadmin_outcome_predicted_ttft_seconds_count{{{labels}}} 1.0" in text
    summed = f"kvadmin_outcome_predicted_ttft_seconds_sum{{{labels}}} "
    line = next(line for line in text.splitlines() if line.startswith(summed))
    assert float(line.removeprefix(summed)) == pytest.approx(predicted)
    error = f"kvadmin_outcome_ttft_error_ratio_sum{{{labels}}} "
    line = next(line for line in text.splitlines() if line.startswith(error))
    assert float(line.removeprefix(error)) == pytest.approx(abs(predicted - 0.04) / 0.04)
    assert f"kvadmin_outcome_ttft_error_ratio_count{{{labels}}} 1.0" in text


def test_the_decisions_api_shows_predicted_vs_delivered_once_it_arrived(
    decided, post_outcome, client, token
) -> None:
    def listed() -> dict:
        response = client.get("/api/v1/decisions", HTTP_AUTHORIZATION=f"Bearer {token}")
        return response.json()["decisions"][0]

    assert decided["delivered"] is None and listed()["delivered"] is None
    post_outcome(decided["decision_id"], {"cached_tokens": 32, "prompt_tokens": 48})
    shown = listed()
    assert shown["predicted"] == decided["predicted"]
    assert shown["predicted"]["achieved_tokens"] == shown["predicted"]["available_tokens"] == 32
    assert shown["delivered"]["cached_tokens"] == 32
    assert shown["delivered"]["prompt_tokens"] == 48
    assert shown["delivered"]["ttft_ms"] is None


def test_a_repeated_outcome_is_a_409(decided, post_outcome) -> None:
    body = {"cached_tokens": 16, "prompt_tokens": 48}
    assert post_outcome(decided["decision_id"], body)[0] == 201
    status, answer = post_outcome(decided["decision_id"], body | {"cached_tokens": 0})
    assert status == 409 and "already" in answer["error"]


@pytest.mark.parametrize(
    "decision_id", ["0123456789abcdef", "not-hex!", "f" * 65, "%2e%2e"], ids=str
)
def test_an_unknown_decision_is_a_404(decided, post_outcome, decision_id) -> None:
    status, _ = post_outcome(decision_id, {"cached_tokens": 0, "prompt_tokens": 48})
    assert status == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("{not json", None),
        ('[{"cached_tokens": 1}]', None),
        ("[" * 100 + "]" * 100, None),
        (json.dumps({"prompt_tokens": 48}), "cached_tokens"),
        (json.dumps({"cached_tokens": 1}), "prompt_tokens"),
        (json.dumps({"cached_tokens": -1, "prompt_tokens": 48}), "cached_tokens"),
        (json.dumps({"cached_tokens": 1.5, "prompt_tokens": 48}), "cached_tokens"),
        (json.dumps({"cached_tokens": True, "prompt_tokens": 48}), "cached_tokens"),
        (json.dumps({"cached_tokens": 0, "prompt_tokens": 2**31}), "prompt_tokens"),
        (json.dumps({"cached_tokens": 0, "prompt_tokens": "48"}), "prompt_tokens"),
        ('{"cached_tokens": 0, "prompt_tokens": 48, "ttft_ms": NaN}', None),
        ('{"cached_tokens": 0, "prompt_tokens": 48, "ttft_ms": 1e999}', None),
        (json.dumps({"cached_tokens": 0, "prompt_tokens": 48, "ttft_ms": -1}), "ttft_ms"),
        (json.dumps({"cached_tokens": 0, "prompt_tokens": 48, "ttft_ms": "5"}), "ttft_ms"),
        (json.dumps({"cached_tokens": 0, "prompt_tokens": 48, "cached": 3}), "cached"),
        (json.dumps({"cached_tokens": 0, "prompt_tokens": 48, "pad": "x" * 2000}), None),
        (b"\xff\xfe", None),
    ],
)
def test_a_bad_body_is_a_400_and_records_nothing(decided, post_outcome, body, field) -> None:
    status, answer = post_outcome(decided["decision_id"], body)
    assert status == 400, answer
    assert answer.get("field") == field
    good = {"cached_tokens": 0, "prompt_tokens": 48}
    assert post_outcome(decided["decision_id"], good)[0] == 201


def test_it_needs_the_score_scope(decided, post_outcome) -> None:
    reader = ApiToken.issue("dashboard", "decisions:read")[1]
    body = {"cached_tokens": 0, "prompt_tokens": 48}
    status, answer = post_outcome(decided["decision_id"], body, auth=reader)
    assert status == 403 and answer["missing_scope"] == "score"
    assert post_outcome(decided["decision_id"], body, auth=None)[0] == 401
    assert post_outcome(decided["decision_id"], body)[0] == 201


def test_it_is_documented_with_its_scope(client, token) -> None:
    document = client.get("/api/v1/openapi.json", HTTP_AUTHORIZATION=f"Bearer {token}").json()
    operation = document["paths"]["/api/v1/decisions/{decision_id}/outcome"]["post"]
    assert operation["x-required-scope"] == "score"
    assert {"201", "400", "401", "403", "404", "409"} <= set(operation["responses"])


def test_outcomes_are_kept_as_long_as_the_log_keeps_decisions(
    post_score, post_outcome, engines, redis_client, settings
) -> None:
    settings.KVADMIN = {"DECISIONS_MAX": 2}
    ids = [
        post_score({"model": MODEL, "token_ids": request_tokens(1, start=n)})[1]["decision_id"]
        for n in range(2)
    ]
    assert post_outcome(ids[0], {"cached_tokens": 0, "prompt_tokens": 16})[0] == 201
    post_score({"model": MODEL, "token_ids": request_tokens(1, start=2)})
    assert post_outcome(ids[0], {"cached_tokens": 0, "prompt_tokens": 16})[0] == 404
    assert redis_client.hkeys("kvadmin:outcomes") == []
    assert post_outcome(ids[1], {"cached_tokens": 0, "prompt_tokens": 16})[0] == 201


def test_the_feed_explains_predicted_vs_delivered_once_it_arrived(
    decided, post_outcome, client, django_user_model
) -> None:
    [decision] = decisions.recent(1)
    client.force_login(django_user_model.objects.create_user("bob", password="pw-bob-12345"))
    page = client.get(f"/feed/decisions/{decision.log_id}/").content.decode()
    assert "Predicted hit: 32 cached tokens on vllm-0.default (best candidate: 32)" in page
    assert "No outcome reported yet" in page
    post_outcome(decided["decision_id"], {"cached_tokens": 16, "prompt_tokens": 48, "ttft_ms": 9})
    page = client.get(f"/feed/decisions/{decision.log_id}/").content.decode()
    assert "Delivered: 16 of 48 prompt tokens" in page and "after 9.0 ms" in page
    predicted = f"{decided['predicted']['ttft_ms']:.1f} ms"
    assert f"first token in {predicted}" in page and f"(predicted {predicted})" in page
