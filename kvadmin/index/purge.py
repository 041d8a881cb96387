"""Index maintenance entry points for the Django side (engine removal, purge buttons).

A purge deletes a pod's entries and writes no matrix value, so its writer orders no media:
unlike every other writer (`kvadmin.weights.active.active_applier`), it needs no tier weights,
which the engine registry, below them in the import rule, could not ask for.

A pod is purged in every index group (`kvadmin.index.groups`): besides its model's group, one
it was moved from may still hold it.
"""

import logging

from kvadmin.index.groups import IndexGroup, group_of, index_groups
from kvadmin.index.pod_lock import LOCK_SECONDS, DrainLock
from kvadmin.index.streams import StreamId, push_streams
from kvadmin.index.writer import Applier
from kvadmin.redis_clients import index_client
from scoring import keys

log = logging.getLogger(__name__)


def purge_pod(pod: str) -> int:
    """Remove every index entry of the pod; returns how many block ownerships went."""
    return sum(Applier(group.client()).purge_pod(pod) for group in index_groups())


def forget_pod(pod: str, dp_size: int) -> int:
    """Remove every index entry of a pod whose engine left the registry, and the status of
    its streams, pushed ones included; returns how many block ownerships went.

    A task applying a chunk of the pod's pushed batches finishes it first (later chunks see
    the engine gone and drop theirs): otherwise that chunk could land after the purge.
    """
    names = [stream.name for stream in _streams(pod, dp_size)]
    lock = DrainLock(index_client(), pod)  # beside the push queue, on REDIS_URL
    held = lock.acquire(wait=LOCK_SECONDS)
    if not held:  # a stalled holder: its chunk may land later; GC purges unregistered pods
        log.warning("%s: forgetting the pod while pushed batches may still be applied", pod)
    try:
        return sum(Applier(group.client()).forget_pod(pod, names) for group in index_groups())
    finally:
        if held:
            lock.release()


class StillRead(RuntimeError):
    """A live worker still reads some of a moved model's streams into a group it left."""


def drain_elsewhere(model: str, pods: dict[str, int]) -> dict[IndexGroup, int]:
    """Forget `model`'s pods in every index group but the model's own: the registered ones
    (`pods`: pod -> data-parallel size) and those a group holds for the model. Returns the
    block ownerships removed per group. Raises StillRead, removing nothing, while a live
    lease there says a worker configured before the move still reads one of them (it would
    write them again)."""
    home = group_of(model)
    found: dict[IndexGroup, dict[str, int]] = {}
    for group in index_groups():
        if group == home:
            continue
        client = group.client()
        held = {pod for pod, of in client.hgetall(keys.POD_MODELS_KEY).items() if of == model}
        found[group] = {pod: pods.get(pod, 1) for pod in held | pods.keys()}
        leases = [
            keys.stream_lease_key(pod, stream.name)
            for pod, dp_size in found[group].items()
            for stream in _streams(pod, dp_size)
            if not stream.pushed
        ]
        if leases and client.exists(*leases):
            raise StillRead(
                f"a worker still reads {model}'s streams into index group {group.shown}: "
                "restart every worker with the new KVADMIN_INDEX_GROUPS, then run this again"
            )
    removed = {}
    for group, held in found.items():
        applier = Applier(group.client())
        removed[group] = sum(
            applier.forget_pod(pod, [stream.name for stream in _streams(pod, dp_size)])
            for pod, dp_size in held.items()
        )
    return removed


def _streams(pod: str, dp_size: int) -> list[StreamId]:
    return [StreamId(pod, rank) for rank in range(dp_size)] + push_streams(pod, dp_size)
