from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from kvadmin.dashboard.tiles import dashboard_tiles
from kvadmin.index.serving import index_serving
from kvadmin.redis_clients import index_client


@require_safe
def home(request: HttpRequest) -> HttpResponse:
    """The fleet at a glance; the tiles then update live over the "dashboard" websocket."""
    client = index_client()
    tiles = dashboard_tiles(client)
    context = {"tiles": tiles, "serving": index_serving(client)}
    return render(request, "dashboard/home.html", context)
