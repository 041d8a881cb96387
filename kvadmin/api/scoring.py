"""POST /api/v1/score and GET /api/v1/decisions: thin views over `routing.service.score` and
`routing.decisions.recent` (with `routing.outcomes` beside each decision). Every bad input is a
4xx with the field at fault, never a 500.

Scoring is `score_answer`, async: the ASGI fast path (kvadmin/api/fast_path.py) calls it
directly under uvicorn; the Django view `score` serves the same answer where no fast path
runs in front of Django (`manage.py runserver`, WSGI, Django's test client).
"""

import asyncio

import redis.asyncio
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from kvadmin.api import contract, process_cache
from kvadmin.api.answers import Answer, authorized, error_answer, json_answer
from kvadmin.api.auth import api_token_required
from kvadmin.api.scopes import Scope
from kvadmin.redis_clients import async_index_client, index_client
from kvadmin.routing import decisions, outcomes, requesters, service
from kvadmin.routing.request import EngineRow
from kvadmin.weights.active import ActiveWeights, active_weights, cached_weights

MAX_DECISIONS = 1000
TOO_LARGE = "the request body is too large"


async def score_answer(client: redis.asyncio.Redis, authorization: str, raw: bytes) -> Answer:
    """Score the candidate pods for one request and record the decision."""
    known = await authorized(client, authorization, Scope.SCORE)
    if isinstance(known, Answer):
        return known
    try:
        request = contract.decode_score_request(raw)
    except contract.InvalidBody as error:
        return error_answer(400, error.message, error.field)
    engines = (await process_cache.snapshot(client)).engines.get(request.model, [])
    if not _serve(engines, request.pods):  # registered a moment ago?
        engines = (await process_cache.snapshot(client, True)).engines.get(request.model, [])
    active = await current_weights()
    try:
        decision = await service.score_async(
            client, engines, active, request, requester=requesters.api_token(known.pk)
        )
    except service.ScoreError as error:
        return error_answer(error.status, error.message, error.field)
    return json_answer(outcomes.decision_answer(decision))


async def current_weights() -> ActiveWeights:
    """The active weights: from memory while checked within WEIGHTS_REFRESH_SECONDS, else
    checked first (in a thread: it may wait for Redis or the database), so no request is
    scored with a copy older than the refresh period, on an idle process too. Concurrent
    callers share one check; it answers within the request path's Redis timeout, keeping the
    copy it had when Redis does not answer."""
    active, fresh = cached_weights()
    if fresh:
        return active  # type: ignore[return-value]
    return await _weights_check.run(lambda: asyncio.to_thread(active_weights))


_weights_check: process_cache.SharedCheck[ActiveWeights] = process_cache.SharedCheck()


def _serve(engines: list[EngineRow], pods: list[str] | None) -> bool:
    """The engines include an enabled one, or every requested pod."""
    if pods is None:
        return any(enabled for *_, enabled in engines)
    return set(pods) <= {row[0] for row in engines}


def django_response(answer: Answer) -> HttpResponse:
    return HttpResponse(
        answer.body, status=answer.status, content_type="application/json", headers=answer.headers
    )


@login_not_required
@csrf_exempt
@require_POST
async def score(request: HttpRequest) -> HttpResponse:
    try:
        raw = request.body
    except RequestDataTooBig:
        return django_response(error_answer(413, TOO_LARGE))
    async with async_index_client() as client:
        answer = await score_answer(client, request.headers.get("Authorization", ""), raw)
    return django_response(answer)


score.required_scope = Scope.SCORE  # type: ignore[attr-defined]  # read by the OpenAPI doc


@api_token_required(Scope.DECISIONS_READ, session=True)
@require_GET
def recent_decisions(request: HttpRequest) -> HttpResponse:
    """The newest recorded decisions, newest first, optionally of one model or pod."""
    raw_limit = request.GET.get("limit", "50")
    try:
        limit = int(raw_limit)
    except ValueError:
        limit = 0
    if not 1 <= limit <= MAX_DECISIONS:
        return django_response(
            error_answer(400, f"`limit` must be an integer from 1 to {MAX_DECISIONS}", "limit")
        )
    found = decisions.recent(
        limit, model=request.GET.get("model") or None, pod=request.GET.get("pod") or None
    )
    reported = outcomes.outcomes_of(index_client(), [decision.decision_id for decision in found])
    return django_response(
        json_answer(
            {"decisions": [outcomes.decision_answer(d, reported.get(d.decision_id)) for d in found]}
        )
    )
