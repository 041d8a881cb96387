"""Answers of the API's lean endpoints (POST /api/v1/score and
POST /api/v1/decisions/<id>/outcome), independent of the server that sends them: the ASGI fast
path (kvadmin/api/fast_path.py) sends them as they are, the Django views
(kvadmin/api/scoring.py, outcomes.py) wrap them in an HttpResponse.

Token checks here read the per-process copy of the tokens (kvadmin/api/process_cache.py), not
the database; the answers are those of `kvadmin.api.auth` for the Django views.
"""

from dataclasses import dataclass, field
from typing import Any

import msgspec
import redis.asyncio

from kvadmin.api import process_cache
from kvadmin.api.auth import UNAUTHORIZED, WWW_AUTHENTICATE, bearer, scope_refusal
from kvadmin.api.models import digest
from kvadmin.api.process_cache import KnownToken
from kvadmin.api.scopes import Scope
from kvadmin.unavailable import OUTAGE_ANSWER, RETRY_AFTER_SECONDS

_encoder = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


def json_answer(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> Answer:
    return Answer(status, _encoder.encode(payload), headers or {})


def error_answer(status: int, message: str, field: str | None = None) -> Answer:
    body: dict[str, Any] = {"error": message}
    if field:
        body["field"] = field
    return json_answer(body, status)


def outage_answer() -> Answer:
    return json_answer(OUTAGE_ANSWER, 503, {"Retry-After": str(RETRY_AFTER_SECONDS)})


async def authorized(
    client: redis.asyncio.Redis, authorization: str, scope: Scope
) -> KnownToken | Answer:
    """The active token the `Authorization` header value names, when it holds `scope`;
    otherwise the 401 or the 403."""
    token = bearer(authorization)
    known = None
    if token is not None:
        hashed = digest(token)
        known = (await process_cache.snapshot(client)).tokens.get(hashed)
        if known is None:  # created a moment ago?
            known = (await process_cache.snapshot(client, recheck=True)).tokens.get(hashed)
    if known is None:
        return json_answer(UNAUTHORIZED, 401, {"WWW-Authenticate": WWW_AUTHENTICATE})
    if not known.grants.allows(scope):
        return json_answer(scope_refusal(known.name, known.scopes, scope), 403)
    await process_cache.note_use(known)
    return known
