"""Index maintenance entry points for the Django side (engine removal, purge buttons)."""

from kvadmin.ingest.apply import Applier
from kvadmin.ingest.pushed import push_stream
from kvadmin.redis_clients import index_client


def purge_pod(pod: str) -> int:
    """Remove every index entry of the pod; returns how many block ownerships went."""
    return Applier(index_client()).purge_pod(pod)


def forget_pod(pod: str, dp_size: int) -> int:
    """Remove every index entry of a pod whose engine left the registry, and the status of
    its streams, pushed ones included; returns how many block ownerships went."""
    ranks = [*range(dp_size), *(push_stream(pod, rank).rank for rank in range(dp_size))]
    return Applier(index_client()).forget_pod(pod, ranks)
