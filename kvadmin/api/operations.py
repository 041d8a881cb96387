"""Operations endpoints: Prometheus metrics and Kubernetes probes. No session login: probes
and scrapers are machines (metrics need a token or an allowed address)."""

import redis
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from kvadmin.api.auth import authenticate, out_of_scope
from kvadmin.api.metrics_access import is_staff_or_token, may_read_metrics
from kvadmin.api.scopes import Scope
from kvadmin.metrics.collector import IndexCollector
from kvadmin.metrics.health import degraded, readiness
from kvadmin.routing.tokenizer_guard import GuardCollector


def build_registry(client: redis.Redis | None = None) -> CollectorRegistry:
    """What /metrics exposes: the index, ingest and scoring figures, and routing's tokenizer
    guards."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(IndexCollector(client))
    registry.register(GuardCollector(client))
    return registry


REGISTRY = build_registry()


@login_not_required
@require_safe
@never_cache
def metrics(request: HttpRequest) -> HttpResponse:
    if not may_read_metrics(request):
        if (token := authenticate(request)) is not None:
            return out_of_scope(token, Scope.METRICS)
        response = HttpResponse(
            "metrics need an API token (Authorization: Bearer <token>), a staff login or an "
            "address in KVADMIN_METRICS_ALLOW\n",
            status=401,
            content_type="text/plain",
        )
        response["WWW-Authenticate"] = 'Bearer realm="kvadmin"'
        return response
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)


@login_not_required
@require_safe
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: the process answers HTTP. Depends on nothing else, on purpose: a Redis outage
    must not make Kubernetes restart every web pod."""
    return JsonResponse({"status": "ok"})


@login_not_required
@require_safe
@never_cache
def readyz(request: HttpRequest) -> JsonResponse:
    """Anyone (a kubelet) sees each check's ok; its details (addresses, errors, counts) need an
    API token or a staff session. Status "degraded": ready, but some engine is not healthy."""
    ready, checks = readiness()
    state = ("degraded" if degraded(checks) else "ready") if ready else "not ready"
    if not is_staff_or_token(request):
        checks = {name: {"ok": check["ok"]} for name, check in checks.items()}
    return JsonResponse(
        {"status": state, "checks": checks},
        status=200 if ready else 503,
    )
