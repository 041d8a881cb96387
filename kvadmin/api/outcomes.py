"""POST /api/v1/decisions/<id>/outcome: the gateway that asked for a decision reports what the
engine's response said (`routing.outcomes`). Thin: validate, find the decision, record once."""

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_POST

from kvadmin.api.auth import api_token_required
from kvadmin.api.scopes import Scope
from kvadmin.api.scoring import error_answer, json_answer
from kvadmin.conf import knob
from kvadmin.redis_clients import index_client
from kvadmin.routing import outcomes
from kvadmin.untrusted_json import InvalidJson, decode_json

_UNKNOWN = "no decision {!r} in the decision log (unknown, or it left the log)"


@api_token_required(Scope.SCORE)
@require_POST
def decision_outcome(request: HttpRequest, decision_id: str) -> HttpResponse:
    """Record the outcome of one decision: 201 once, 409 for every repeat."""
    if not outcomes.DECISION_ID.fullmatch(decision_id):
        return error_answer(404, _UNKNOWN.format(decision_id[:100]))
    limit = outcomes.MAX_BODY_BYTES
    try:
        declared = int(request.headers.get("Content-Length") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        return error_answer(400, f"the body is {declared} bytes; an outcome is at most {limit}")
    try:
        raw = request.body
    except RequestDataTooBig:
        return error_answer(400, f"the body is larger than {limit} bytes")
    if len(raw) > limit:
        return error_answer(400, f"the body is {len(raw)} bytes; an outcome is at most {limit}")
    try:
        outcome = outcomes.parse(decode_json(raw))
    except InvalidJson as error:
        return error_answer(400, f"the body is not valid JSON: {error}")
    except outcomes.InvalidOutcome as error:
        return error_answer(400, error.message, error.field)
    client = index_client()
    decision = outcomes.find(decision_id, client)
    if decision is None:
        return error_answer(404, _UNKNOWN.format(decision_id))
    block_size = knob("BLOCK_SIZE")
    result = outcomes.record(client, decision, outcome, block_size)
    if result == "unknown":
        return error_answer(404, _UNKNOWN.format(decision_id))
    if result == "repeated":
        return error_answer(409, f"decision {decision_id!r} already has an outcome")
    return json_answer(
        {"decision_id": decision_id, **outcomes.to_api(decision, outcome, block_size)}, 201
    )
