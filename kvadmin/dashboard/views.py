import logging

import redis
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from kvadmin.dashboard.tiles import dashboard_tiles
from kvadmin.redis_clients import index_client

log = logging.getLogger(__name__)


@require_safe
def home(request: HttpRequest) -> HttpResponse:
    """The fleet at a glance; the tiles then update live over the "dashboard" websocket."""
    try:
        tiles = dashboard_tiles(index_client())
    except redis.RedisError as error:
        log.warning("dashboard: Redis unavailable (%s)", error)
        tiles = None
    return render(request, "dashboard/home.html", {"tiles": tiles})
