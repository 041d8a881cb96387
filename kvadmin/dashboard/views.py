import time

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from kvadmin.dashboard.tiles import dashboard_tiles
from kvadmin.index.serving import index_serving
from kvadmin.metrics.history import hit_chart
from kvadmin.metrics.timerange import parse_range
from kvadmin.redis_clients import index_client


@require_safe
def home(request: HttpRequest) -> HttpResponse:
    """The fleet at a glance; the tiles then update live over the "dashboard" websocket. The
    hit-ratio chart covers the chosen time range (the live frames carry the last hour's)."""
    client = index_client()
    tiles = dashboard_tiles(client)
    span = parse_range(request.GET.dict(), time.time())
    media = [medium for medium, _, _ in tiles.media]
    range_chart = None if span.default else hit_chart(client, span, media)
    context = {
        "tiles": tiles,
        "span": span,
        "range_chart": range_chart,
        "serving": index_serving(),
    }
    return render(request, "dashboard/home.html", context)
