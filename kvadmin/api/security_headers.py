"""The security headers of Django's own answers, for answers made without Django (the lean
scoring path, kvadmin/api/fast_path.py): X-Frame-Options, Content-Security-Policy,
X-Content-Type-Options, Referrer-Policy, Cross-Origin-Opener-Policy and, over HTTPS,
Strict-Transport-Security, as the header middleware in settings.MIDDLEWARE set them.

Not a second list: Django's middleware itself answers a stand-in request once per scheme, and
its headers are kept until a setting changes. None of them depends on the request beyond
its scheme (a JSON answer uses no CSP nonce, so the policy names none; only the middleware's
`process_response` runs: its `process_request`, a redirect to HTTPS, is the fast path's
hand-over to Django).
"""

from functools import cache

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.utils.module_loading import import_string

HEADER_MIDDLEWARE = (
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
)
"""The middleware of settings.MIDDLEWARE that only add response headers (when installed)."""


class _StandIn(HttpRequest):
    def __init__(self, secure: bool) -> None:
        super().__init__()
        self._secure = secure

    def _get_scheme(self) -> str:
        return "https" if self._secure else "http"


@cache
def security_headers(secure: bool) -> tuple[tuple[bytes, bytes], ...]:
    """The headers Django's middleware adds to a JSON answer over HTTPS (`secure`) or HTTP."""
    request = _StandIn(secure)
    response = HttpResponse(content_type="application/json")
    middleware = [
        import_string(path)(lambda _request: response)
        for path in settings.MIDDLEWARE
        if path in HEADER_MIDDLEWARE
    ]
    for each in reversed(middleware):
        response = each.process_response(request, response)
    return tuple(
        (name.lower().encode("latin-1"), value.encode("latin-1"))
        for name, value in response.headers.items()
        if name.lower() != "content-type"
    )


@receiver(setting_changed)
def _forget(**_kwargs: object) -> None:
    security_headers.cache_clear()
