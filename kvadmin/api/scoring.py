"""POST /api/v1/score and GET /api/v1/decisions: thin views over `routing.service.score` and
`routing.decisions.recent` (with `routing.outcomes` beside each decision). Every bad input is a
4xx with the field at fault, never a 500."""

from typing import Any

import msgspec
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET, require_POST

from kvadmin.api.auth import api_token_required
from kvadmin.api.scopes import Scope
from kvadmin.redis_clients import index_client
from kvadmin.routing import decisions, outcomes, service
from kvadmin.untrusted_json import InvalidJson, decode_json

MAX_DECISIONS = 1000


def json_answer(payload: Any, status: int = 200) -> HttpResponse:
    body = msgspec.json.encode(payload)
    return HttpResponse(body, status=status, content_type="application/json")


def error_answer(status: int, message: str, field: str | None = None) -> HttpResponse:
    body: dict[str, Any] = {"error": message}
    if field:
        body["field"] = field
    return json_answer(body, status)


@api_token_required(Scope.SCORE)
@require_POST
def score(request: HttpRequest) -> HttpResponse:
    """Score the candidate pods for one request and record the decision."""
    try:
        body = decode_json(request.body)
    except RequestDataTooBig:
        return error_answer(413, "the request body is too large")
    except InvalidJson as error:
        return error_answer(400, f"the body is not valid JSON: {error}")
    if not isinstance(body, dict):
        return error_answer(400, "the body must be a JSON object")
    try:
        decision = service.score(
            body.get("model"),
            token_ids=body.get("token_ids"),
            prompt=body.get("prompt"),
            messages=body.get("messages"),
            pods=body.get("pods"),
            request_id=body.get("request_id"),
            policy=body.get("policy"),
        )
    except service.ScoreError as error:
        return error_answer(error.status, error.message, error.field)
    return json_answer(outcomes.decision_answer(decision))


@api_token_required(Scope.DECISIONS_READ)
@require_GET
def recent_decisions(request: HttpRequest) -> HttpResponse:
    """The newest recorded decisions, newest first, optionally of one model or pod."""
    raw_limit = request.GET.get("limit", "50")
    try:
        limit = int(raw_limit)
    except ValueError:
        limit = 0
    if not 1 <= limit <= MAX_DECISIONS:
        return error_answer(400, f"`limit` must be an integer from 1 to {MAX_DECISIONS}", "limit")
    found = decisions.recent(
        limit, model=request.GET.get("model") or None, pod=request.GET.get("pod") or None
    )
    reported = outcomes.outcomes_of(index_client(), [decision.id for decision in found])
    return json_answer(
        {"decisions": [outcomes.decision_answer(d, reported.get(d.id)) for d in found]}
    )
