from celery import shared_task
from django.template.loader import render_to_string

from kvadmin.live.groups import publish_html
from kvadmin.redis_clients import index_client
from kvadmin.residency.pods import pods_overview
from kvadmin.residency.samples import record_samples


@shared_task(ignore_result=True)
def sample_pods() -> int:
    """Celery beat, every few seconds: record each pod's blocks per medium for its chart and
    push the refreshed pods table to every browser on /pods/. Returns how many pods."""
    overview = pods_overview()
    record_samples(index_client(), overview.pods, overview.now)
    html = render_to_string("residency/pods.html#pods_table", {"overview": overview, "oob": True})
    publish_html("pods", html)
    return len(overview.pods)
