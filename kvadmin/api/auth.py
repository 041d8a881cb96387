"""Bearer-token authentication for /api/ views (no session, no CSRF: machine clients)."""

from collections.abc import Callable
from datetime import timedelta
from functools import wraps

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from kvadmin.api.models import ApiToken, digest

# Recording every use would turn each API call into a database write.
_LAST_USED_RESOLUTION = timedelta(minutes=1)


def authenticate(request: HttpRequest) -> ApiToken | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    row = ApiToken.objects.active().filter(digest=digest(token.strip())).first()
    if row is not None:
        now = timezone.now()
        if row.last_used_at is None or now - row.last_used_at > _LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
    return row


def api_token_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @login_not_required
    @csrf_exempt
    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if authenticate(request) is None:
            response = JsonResponse(
                {"error": "a valid API token is required (Authorization: Bearer <token>)"},
                status=401,
            )
            response["WWW-Authenticate"] = 'Bearer realm="kvadmin"'
            return response
        return view(request, *args, **kwargs)

    return wrapped
