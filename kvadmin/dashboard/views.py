from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from kvadmin.dashboard.tiles import dashboard_tiles
from kvadmin.redis_clients import index_client


@require_safe
def home(request: HttpRequest) -> HttpResponse:
    """The fleet at a glance; the tiles then update live over the "dashboard" websocket."""
    tiles = dashboard_tiles(index_client())
    return render(request, "dashboard/home.html", {"tiles": tiles})
