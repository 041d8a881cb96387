"""Index maintenance entry points for the Django side (engine removal, purge buttons)."""

from kvadmin.ingest.apply import Applier
from kvadmin.redis_clients import index_client


def purge_pod(pod: str) -> int:
    """Remove every index entry of the pod; returns how many block ownerships went."""
    return Applier(index_client()).purge_pod(pod)
