"""An outcome is bound to the decision it reports: only the token that asked for the decision
(or the in-process caller that made it) may report it, and only with counts that can be the
decision's. Through Django and through the ASGI fast path alike."""

import asyncio
import json

import pytest

from kvadmin.api.models import ApiToken
from kvadmin.engines.models import Engine
from kvadmin.metrics import families
from kvadmin.metrics.families import label_field
from kvadmin.redis_clients import async_index_client
from kvadmin.routing import decisions, outcomes, requesters, service
from tests.conftest import http_json
from tests.index import MODEL
from tests.routing.conftest import PODS, hold, request_tokens

FIELD = label_field((MODEL, PODS[0]))


@pytest.fixture
def post_outcome(client):
    def post(decision_id: str, body: dict, token: str) -> tuple[int, dict]:
        response = client.post(
            f"/api/v1/decisions/{decision_id}/outcome",
            data=json.dumps(body),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )
        return response.status_code, json.loads(response.content)

    return post


@pytest.fixture
def decided(post_score, engines, redis_client, db) -> str:
    """The id of a 48-token decision the `token` fixture's gateway asked for."""
    hold(redis_client, PODS[0], request_tokens(3), ["GPU", "GPU"])
    status, answer = post_score({"model": MODEL, "token_ids": request_tokens(3)})
    assert status == 200, answer
    return answer["decision_id"]


def _nothing_recorded(redis_client) -> bool:
    return (
        redis_client.hkeys("kvadmin:outcomes") == []
        and redis_client.hget(families.HIT_TOKENS_DELIVERED.key, FIELD) is None
        and redis_client.hget(families.OUTCOMES.key, FIELD) is None
    )


def test_another_token_gets_a_404_and_the_owner_still_reports(
    decided, post_outcome, token, redis_client
) -> None:
    other = ApiToken.issue("other gateway", "score")[1]
    body = {"cached_tokens": 16, "prompt_tokens": 48}
    status, answer = post_outcome(decided, body, other)
    assert status == 404, answer
    assert _nothing_recorded(redis_client)
    assert post_outcome(decided, body, token)[0] == 201


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"cached_tokens": 2**31 - 1, "prompt_tokens": 2**31 - 1}, "prompt_tokens"),
        (
            {"cached_tokens": 0, "prompt_tokens": 48 + outcomes.PROMPT_SLACK_TOKENS + 1},
            "prompt_tokens",
        ),
        ({"cached_tokens": 49, "prompt_tokens": 60}, "cached_tokens"),
        ({"cached_tokens": 47, "prompt_tokens": 46}, "cached_tokens"),
    ],
    ids=["billions", "beyond the slack", "above the decision", "above the prompt"],
)
def test_counts_that_cannot_be_the_decisions_are_a_422_recording_nothing(
    decided, post_outcome, token, redis_client, body, field
) -> None:
    status, answer = post_outcome(decided, body, token)
    assert status == 422, answer
    assert answer["field"] == field
    assert _nothing_recorded(redis_client)


def test_the_slack_allows_a_chat_template_and_bos_difference(
    decided, post_outcome, token, redis_client
) -> None:
    body = {"cached_tokens": 48, "prompt_tokens": 48 + outcomes.PROMPT_SLACK_TOKENS}
    assert post_outcome(decided, body, token)[0] == 201
    assert redis_client.hget(families.HIT_TOKENS_DELIVERED.key, FIELD) == "48"


def test_decisions_from_before_requesters_were_recorded_take_any_scoring_token(
    engines, post_outcome, redis_client
) -> None:
    legacy = service.score(MODEL, token_ids=request_tokens(3), requester=requesters.UNRECORDED)
    assert b'"requester"' not in decisions.encode(legacy)  # as logged before
    anyone = ApiToken.issue("any gateway", "score")[1]
    assert (
        post_outcome(legacy.decision_id, {"cached_tokens": 0, "prompt_tokens": 48}, anyone)[0]
        == 201
    )


def test_an_in_process_caller_reports_its_own_decisions_and_no_token_can(
    engines, post_outcome, token, redis_client
) -> None:
    picked = service.score(MODEL, token_ids=request_tokens(3), requester=requesters.ENDPOINT_PICKER)
    body = {"cached_tokens": 0, "prompt_tokens": 48}
    assert post_outcome(picked.decision_id, body, token)[0] == 404

    async def report(rule: outcomes.ReportRule) -> str:
        async with async_index_client() as client:
            outcome = outcomes.parse(body)
            return (await outcomes.report_async(client, picked.decision_id, outcome, rule, 16))[0]

    assert asyncio.run(report(outcomes.requested_by(requesters.api_token(1)))) == "unknown"
    assert asyncio.run(report(outcomes.requested_by(requesters.ENDPOINT_PICKER))) == "recorded"


def test_the_fast_path_binds_and_checks_outcomes_as_django_does(
    asgi_server, transactional_db, redis_client
) -> None:
    Engine.objects.create(pod=PODS[0], model=MODEL, events_endpoint="tcp://127.0.0.1:5557")
    owner = ApiToken.issue("gateway", "score")[1]
    other = ApiToken.issue("other gateway", "score")[1]
    hold(redis_client, PODS[0], request_tokens(3), ["GPU"] * 2)
    status, decision = http_json(
        f"{asgi_server}/api/v1/score", {"model": MODEL, "token_ids": request_tokens(3)}, owner
    )
    assert status == 200, decision
    url = f"{asgi_server}/api/v1/decisions/{decision['decision_id']}/outcome"
    good = {"cached_tokens": 32, "prompt_tokens": 48}
    assert http_json(url, good, other)[0] == 404
    huge = {"cached_tokens": 2**31 - 1, "prompt_tokens": 2**31 - 1}
    status, answer = http_json(url, huge, owner)
    assert (status, answer["field"]) == (422, "prompt_tokens")
    assert _nothing_recorded(redis_client)
    assert http_json(url, good, owner)[0] == 201
    assert redis_client.hget(families.HIT_TOKENS_DELIVERED.key, FIELD) == "32"
