from celery import shared_task
from django.template.loader import render_to_string

from kvadmin.dashboard.tiles import dashboard_tiles
from kvadmin.live.groups import publish_html
from kvadmin.redis_clients import index_client


@shared_task(name="kvadmin.dashboard.publish_tiles", ignore_result=True)
def publish_tiles() -> None:
    """Celery beat, every ~2 s: sample the fleet's totals (for rates) and push every tile to
    the browsers on the dashboard. Each tile is one element with an id: htmx swaps it."""
    tiles = dashboard_tiles(index_client(), record_sample=True)
    publish_html("dashboard", render_to_string("dashboard/frame.html", {"tiles": tiles}))
