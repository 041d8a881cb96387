"""POST /api/v1/decisions/<id>/outcome: the gateway that asked for a decision reports what the
engine's response said (`routing.outcomes`). Thin: validate, find the decision, record once.

`outcome_answer` is async and served by the ASGI fast path (kvadmin/api/fast_path.py); the
Django view serves the same answer where no fast path runs (see kvadmin/api/scoring.py).
"""

import redis.asyncio
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from kvadmin.api.answers import Answer, authorized, error_answer, json_answer
from kvadmin.api.scopes import Scope
from kvadmin.api.scoring import django_response
from kvadmin.conf import knob
from kvadmin.redis_clients import async_index_client
from kvadmin.routing import outcomes, requesters
from kvadmin.untrusted_json import InvalidJson, decode_json

_UNKNOWN = "no decision {!r} of this token in the decision log (unknown, or it left the log)"
LIMIT = outcomes.MAX_BODY_BYTES


def oversized(size: int) -> Answer | None:
    """The one size check of an outcome body: the answer to a body of `size` bytes beyond LIMIT,
    None when it fits. The fast path bounds its read at LIMIT and answers `too_large` itself."""
    return too_large(size) if size > LIMIT else None


def too_large(size: int | None) -> Answer:
    """The answer to a body beyond LIMIT (`size`: its length, when known)."""
    if size is None:
        return error_answer(400, f"the body is larger than {LIMIT} bytes")
    return error_answer(400, f"the body is {size} bytes; an outcome is at most {LIMIT}")


async def outcome_answer(
    client: redis.asyncio.Redis, authorization: str, decision_id: str, raw: bytes
) -> Answer:
    """Record the outcome of one decision: 201 once, 409 for every repeat; 404 to a token
    other than the one that asked for the decision, 422 for counts that cannot be its."""
    known = await authorized(client, authorization, Scope.SCORE)
    if isinstance(known, Answer):
        return known
    if not outcomes.DECISION_ID.fullmatch(decision_id):
        return error_answer(404, _UNKNOWN.format(decision_id[:100]))
    if (refused := oversized(len(raw))) is not None:
        return refused
    try:
        outcome = outcomes.parse(decode_json(raw))
    except InvalidJson as error:
        return error_answer(400, f"the body is not valid JSON: {error}")
    except outcomes.InvalidOutcome as error:
        return error_answer(400, error.message, error.field)
    block_size = knob("BLOCK_SIZE")
    may_report = outcomes.requested_by(requesters.api_token(known.pk))
    try:
        result, decision = await outcomes.report_async(
            client, decision_id, outcome, may_report, block_size
        )
    except outcomes.ImplausibleOutcome as error:
        return error_answer(422, error.message, error.field)
    if decision is None or result == "unknown":
        return error_answer(404, _UNKNOWN.format(decision_id))
    if result == "repeated":
        return error_answer(409, f"decision {decision_id!r} already has an outcome")
    predicted, delivered = outcomes.hits_answer(decision, outcome, block_size)
    return json_answer(
        {"decision_id": decision_id, "predicted": predicted, "delivered": delivered}, 201
    )


@login_not_required
@csrf_exempt
@require_POST
async def decision_outcome(request: HttpRequest, decision_id: str) -> HttpResponse:
    try:
        declared = int(request.headers.get("Content-Length") or 0)
    except ValueError:
        declared = 0
    if (refused := oversized(declared)) is not None:
        return django_response(refused)
    try:
        raw = request.body
    except RequestDataTooBig:
        return django_response(too_large(None))
    async with async_index_client() as client:
        authorization = request.headers.get("Authorization", "")
        answer = await outcome_answer(client, authorization, decision_id, raw)
    return django_response(answer)


decision_outcome.required_scope = Scope.SCORE  # type: ignore[attr-defined]  # for the OpenAPI doc
