"""Bearer-token authentication for /api/ views (no session, no CSRF: machine clients).

No token, or an unknown or revoked one, is 401; a valid token without the scope the endpoint
needs is 403 naming that scope (kvadmin.api.scopes).
"""

from collections.abc import Callable
from datetime import timedelta
from functools import wraps

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from kvadmin.api.models import ApiToken, digest
from kvadmin.api.scopes import Scope

# Recording every use would turn each API call into a database write.
_LAST_USED_RESOLUTION = timedelta(minutes=1)


def authenticate(request: HttpRequest) -> ApiToken | None:
    token = bearer(request.headers.get("Authorization", ""))
    if token is None:
        return None
    row = ApiToken.objects.active().filter(digest=digest(token)).first()
    if row is not None:
        now = timezone.now()
        if row.last_used_at is None or now - row.last_used_at > _LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
    return row


UNAUTHORIZED = {"error": "a valid API token is required (Authorization: Bearer <token>)"}
WWW_AUTHENTICATE = 'Bearer realm="kvadmin"'


def bearer(authorization: str) -> str | None:
    """The token of an `Authorization: Bearer <token>` header value, None without one."""
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def unauthorized() -> JsonResponse:
    response = JsonResponse(UNAUTHORIZED, status=401)
    response["WWW-Authenticate"] = WWW_AUTHENTICATE
    return response


def scope_refusal(name: str, scopes: str, scope: Scope, pod: str | None = None) -> dict[str, str]:
    """The 403 body for token `name` (holding `scopes`) lacking `scope` (for `pod`)."""
    missing = f"{scope}={pod}" if scope is Scope.EVENTS_PUSH and pod is not None else str(scope)
    where = f" for pod {pod!r}" if scope is Scope.EVENTS_PUSH and pod is not None else ""
    return {
        "error": f"token {name!r} lacks the scope {scope.value!r}{where} "
        f"(it has: {scopes or 'none'})",
        "missing_scope": missing,
    }


def out_of_scope(token: ApiToken, scope: Scope, pod: str | None = None) -> JsonResponse:
    return JsonResponse(scope_refusal(token.name, token.scopes, scope, pod), status=403)


def token_refusal(
    request: HttpRequest, scope: Scope, pod: str | None = None
) -> JsonResponse | None:
    """None when the request's token holds `scope` (for `pod`); otherwise the 401 or 403."""
    token = authenticate(request)
    if token is None:
        return unauthorized()
    if not token.grants.allows(scope, pod):
        return out_of_scope(token, scope, pod)
    return None


def api_token_required(
    scope: Scope, *, session: bool = False
) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """The view needs a token holding `scope`; for events:push, for the view's `pod`. With
    `session`, a logged-in operator's session will do too (what the pages show anyway)."""

    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @login_not_required
        @csrf_exempt
        @wraps(view)
        def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            pod = kwargs.get("pod") if scope is Scope.EVENTS_PUSH else None
            if session and request.user.is_authenticated:
                return view(request, *args, **kwargs)
            if (refusal := token_refusal(request, scope, pod)) is not None:
                return refusal
            return view(request, *args, **kwargs)

        wrapped.required_scope = scope  # type: ignore[attr-defined]  # read by the OpenAPI doc
        return wrapped

    return decorator
