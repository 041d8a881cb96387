from celery import shared_task

from kvadmin.engines import probes
from kvadmin.redis_clients import index_client


@shared_task(name="kvadmin.engines.probe_engines", ignore_result=True)
def probe_engines() -> int:
    """Celery beat, every few seconds: probe each enabled engine's replay socket and /health,
    so pages and /readyz show evidence of life instead of socket state. Returns how many."""
    return probes.probe_engines(index_client())
