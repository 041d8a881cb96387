"""The lean path of the scoring API: POST /api/v1/score and POST /api/v1/decisions/<id>/outcome
answered in front of Django, in the same ASGI application (kvadmin/asgi.py), so deployment
is unchanged; every other request goes on to Django.

What a gateway's call costs here, and what it no longer costs (measured in bench/api.py):
- no middleware stack, session, CSRF or ORM query, and no hop into Django's sync thread: the
  token and the engine registry come from a per-process copy (kvadmin/api/process_cache.py),
  the body is decoded by msgspec into the declared request (kvadmin/api/contract.py), and
  Redis is reached through one redis.asyncio client per process, in the same round trips
  as before (`routing.service.score_async`: one read, one pipelined recording);
- backpressure: at most API_MAX_IN_FLIGHT requests per process are in flight; beyond that
  the answer is 503 with Retry-After at once, so under overload a gateway learns to route on
  its own instead of waiting in an unbounded queue;
- bounded bodies: a declared or received body beyond the endpoint's limit is refused without
  reading (or keeping) the rest, and a body that has not arrived whole within
  API_BODY_TIMEOUT_SECONDS is answered 408 (connection closed);
- the bearer token is checked from the headers before any body byte is read (401 at once),
  and a body is read before the request takes an in-flight slot: slow or stalled senders
  never hold the slots that valid requests need;
- a Redis outage is the same 503 as the Django views' (kvadmin/unavailable.py), logged once
  per process when it starts and once when an answer shows it over, not once per request.

Nothing is skipped that the Django views did: scopes, the decision log, the metrics, the
last-used time of tokens (once a minute per token and process). Nor what Django's own checks
do before any view: a request to a host not in ALLOWED_HOSTS, or over plain HTTP under
SECURE_SSL_REDIRECT, goes on to Django, which refuses (400) or redirects it. Answers carry the
security headers Django's middleware gives its own (kvadmin/api/security_headers.py).

Every HTTP request, on either path, naming Host, Authorization, Content-Length,
X-Forwarded-Host or X-Forwarded-Proto more than once is answered 400 here: which copy counts
would otherwise depend on who reads it (Django joins them, a proxy may take the first).
"""

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio
from django.conf import settings
from django.http.request import split_domain_port, validate_host

from kvadmin.api import outcomes, scoring
from kvadmin.api.answers import Answer, authorized, error_answer, json_answer, outage_answer
from kvadmin.api.scopes import Scope
from kvadmin.api.security_headers import security_headers
from kvadmin.conf import knob
from kvadmin.log_once import OncePerKind
from kvadmin.redis_clients import REDIS_OUTAGES, async_index_client

log = logging.getLogger(__name__)

ASGIApp = Callable[..., Awaitable[None]]
SCORE_PATH = "/api/v1/score"
OUTCOME_PATH = re.compile(r"/api/v1/decisions/([^/]+)/outcome")
BUSY_RETRY_AFTER_SECONDS = 1
_HEADERS = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]
SINGLE_HEADERS = frozenset(
    {b"host", b"authorization", b"content-length", b"x-forwarded-host", b"x-forwarded-proto"}
)
"""Headers a request may name at most once."""


class TooLarge(Exception):
    def __init__(self, size: int | None) -> None:
        self.size = size


class FastPath:
    """ASGI middleware: the lean endpoints here, the rest to `app`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.in_flight = 0
        self._client: redis.asyncio.Redis | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._failing = OncePerKind(log)

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if (repeated := _repeated(scope["headers"])) is not None:
            refused = error_answer(400, f"the request names {repeated} more than once")
            return await _send(send, refused, scope.get("scheme") == "https", close=True)
        if scope["method"] != "POST":
            return await self.app(scope, receive, send)
        path = scope["path"]
        if path == SCORE_PATH:
            decision_id = None
        elif matched := OUTCOME_PATH.fullmatch(path):
            decision_id = matched.group(1)
        else:
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        secure = _secure(scope, headers)
        if not _allowed_host(headers) or (settings.SECURE_SSL_REDIRECT and not secure):
            return await self.app(scope, receive, send)  # Django answers 400 or redirects
        answer, read = await self._answer(scope, headers, receive, decision_id)
        await _send(send, answer, secure, close=not read)

    async def _answer(
        self,
        scope: dict[str, Any],
        headers: dict[bytes, bytes],
        receive: Callable,
        decision_id: str | None,
    ) -> tuple[Answer, bool]:
        """The answer, and whether the whole body was read (else the connection closes)."""
        authorization = headers.get(b"authorization", b"").decode("latin-1")
        client = self._redis()
        try:
            if isinstance(known := await authorized(client, authorization, Scope.SCORE), Answer):
                return known, False
            if self._full():
                return _busy(), False
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE if decision_id is None else outcomes.LIMIT
            try:
                async with asyncio.timeout(knob("API_BODY_TIMEOUT_SECONDS")):
                    raw = await _body(receive, headers, limit)
            except TooLarge as refused:
                if decision_id is None:
                    return error_answer(413, scoring.TOO_LARGE), False
                return outcomes.too_large(refused.size), False
            except TimeoutError:
                seconds = knob("API_BODY_TIMEOUT_SECONDS")
                return error_answer(408, f"the body did not arrive within {seconds:g}s"), False
            if self._full():
                return _busy(), True
            self.in_flight += 1
            try:
                if decision_id is None:
                    answer = await scoring.score_answer(client, authorization, raw)
                else:
                    answer = await outcomes.outcome_answer(client, authorization, decision_id, raw)
            finally:
                self.in_flight -= 1
            self._failing.recovered("redis", "POST %s: Redis is back", scope["path"])
            return answer, True
        except REDIS_OUTAGES as error:
            self._failing.failed(
                "redis",
                "POST %s: Redis unavailable (%s): 503 until it is back",
                scope["path"],
                error,
            )
            return outage_answer(), False
        except Exception:
            log.exception("POST %s failed", scope["path"])
            return json_answer({"error": "internal error"}, 500), False

    def _full(self) -> bool:
        return self.in_flight >= knob("API_MAX_IN_FLIGHT")

    def _redis(self) -> redis.asyncio.Redis:
        # Created inside the event loop that uses it: one per process under uvicorn.
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client, self._loop = async_index_client(), loop
        return self._client


def _busy() -> Answer:
    busy = error_answer(503, "kvadmin is at its limit of requests in flight; retry later")
    busy.headers["Retry-After"] = str(BUSY_RETRY_AFTER_SECONDS)
    return busy


def _repeated(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The first of SINGLE_HEADERS the request names twice (ASGI names are lower case)."""
    seen: set[bytes] = set()
    for name, _value in headers:
        if name in SINGLE_HEADERS:
            if name in seen:
                return name.decode("latin-1").title()
            seen.add(name)
    return None


def _allowed_host(headers: dict[bytes, bytes]) -> bool:
    """Django's `HttpRequest.get_host` check: the Host header names one of ALLOWED_HOSTS (with
    DEBUG and none configured, the local names Django then allows)."""
    host = headers.get(b"host", b"").decode("latin-1")
    if settings.USE_X_FORWARDED_HOST and b"x-forwarded-host" in headers:
        host = headers[b"x-forwarded-host"].decode("latin-1")
    domain, _port = split_domain_port(host)
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    return bool(domain) and validate_host(domain, allowed)


def _secure(scope: dict[str, Any], headers: dict[bytes, bytes]) -> bool:
    """Django's `HttpRequest.is_secure`: HTTPS, or the trusted proxy header says so."""
    if settings.SECURE_PROXY_SSL_HEADER:
        name, value = settings.SECURE_PROXY_SSL_HEADER
        header = name.removeprefix("HTTP_").lower().replace("_", "-").encode()
        if header in headers:
            return headers[header].decode("latin-1").split(",")[0].strip() == value
    return scope.get("scheme") == "https"


async def _body(receive: Callable, headers: dict[bytes, bytes], limit: int) -> bytes:
    """The request body; TooLarge beyond `limit` bytes, declared or received."""
    try:
        declared = int(headers.get(b"content-length", b"0"))
    except ValueError:
        declared = 0
    if declared > limit:
        raise TooLarge(declared)
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise TooLarge(None)
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _send(send: Callable, answer: Answer, secure: bool, close: bool = False) -> None:
    """Send `answer` with Django's security headers; with `close`, the connection is closed
    after it (an unread or partly read body must not be taken for the next request)."""
    headers = [
        *_HEADERS,
        *security_headers(secure),
        (b"content-length", b"%d" % len(answer.body)),
        *((name.lower().encode(), value.encode()) for name, value in answer.headers.items()),
        *([(b"connection", b"close")] if close else []),
    ]
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": answer.body})
