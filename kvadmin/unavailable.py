"""Redis is down or stalled: every page and endpoint answers 503 at once, never a 500 or a hang.

Request-path Redis clients fail within REDIS_TIMEOUT_SECONDS (kvadmin/redis_clients.py); this
middleware is the one place that turns their failure into an answer, so views need no
try/except of their own. Pages keep the site's navigation and say what is wrong in plain words;
the API (paths under /api/) and /metrics answer JSON `{"error", "retry_after"}`. Both carry
Retry-After. An outage is logged when it starts and when it ends, not once per 503 (hundreds a
second under load).
"""

import logging

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.response import TemplateResponse
from django.utils.deprecation import MiddlewareMixin

from kvadmin.log_once import OncePerKind
from kvadmin.redis_clients import REDIS_OUTAGES

log = logging.getLogger(__name__)
_outage = OncePerKind(log)

RETRY_AFTER_SECONDS = 5
MACHINE_PATHS = ("/api/", "/metrics")
OUTAGE_ANSWER = {
    "error": "Redis is unavailable: kvadmin cannot read or record its state; retry later",
    "retry_after": RETRY_AFTER_SECONDS,
}
"""What machine clients get on an outage (the API's lean path answers the same)."""


def outage_response(request: HttpRequest) -> HttpResponse:
    response: HttpResponse
    if request.path.startswith(MACHINE_PATHS):
        response = JsonResponse(OUTAGE_ANSWER, status=503)
    else:
        response = TemplateResponse(
            request, "unavailable.html", {"retry_after": RETRY_AFTER_SECONDS}, status=503
        ).render()
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


class RedisOutageMiddleware(MiddlewareMixin):
    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, REDIS_OUTAGES):
            return None
        _outage.failed(
            "redis",
            "%s %s: Redis unavailable (%s): 503 until it is back",
            request.method,
            request.path,
            exception,
        )
        response = outage_response(request)
        response._has_been_logged = True  # type: ignore[attr-defined]  # Django's: logged once
        return response

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if response.status_code < 500:
            _outage.recovered("redis", "%s %s: Redis is back", request.method, request.path)
        return response
