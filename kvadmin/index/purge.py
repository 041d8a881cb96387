"""Index maintenance entry points for the Django side (engine removal, purge buttons).

A purge deletes a pod's entries and writes no matrix value, so its writer orders no media:
unlike every other writer (`kvadmin.weights.active.active_applier`), it needs no tier weights,
which the engine registry, below them in the import rule, could not ask for.
"""

import logging

from kvadmin.index.pod_lock import LOCK_SECONDS, DrainLock
from kvadmin.index.streams import StreamId, push_streams
from kvadmin.index.writer import Applier
from kvadmin.redis_clients import index_client

log = logging.getLogger(__name__)


def purge_pod(pod: str) -> int:
    """Remove every index entry of the pod; returns how many block ownerships went."""
    return Applier(index_client()).purge_pod(pod)


def forget_pod(pod: str, dp_size: int) -> int:
    """Remove every index entry of a pod whose engine left the registry, and the status of
    its streams, pushed ones included; returns how many block ownerships went.

    A task applying a chunk of the pod's pushed batches finishes it first (later chunks see
    the engine gone and drop theirs): otherwise that chunk could land after the purge.
    """
    client = index_client()
    streams = [StreamId(pod, rank) for rank in range(dp_size)] + push_streams(pod, dp_size)
    lock = DrainLock(client, pod)
    held = lock.acquire(wait=LOCK_SECONDS)
    if not held:  # a stalled holder: its chunk may land later; GC purges unregistered pods
        log.warning("%s: forgetting the pod while pushed batches may still be applied", pod)
    try:
        return Applier(client).forget_pod(pod, [stream.name for stream in streams])
    finally:
        if held:
            lock.release()
