"""A pod's streams, their statuses (`kvadmin.index.status.StreamStatus`) and its start time.

A pod's streams: ZMQ and pushed ranks 0..dp_size-1 of its registered engine (pushed ones in
their own key space, see `kvadmin.index.streams.push_stream`) and any stream in the pod's ranks
SET. Only streams whose status hash exists are shown, except the registered ZMQ ranks, which
show as never connected.
"""

from collections.abc import Iterable, Mapping

import redis

from kvadmin.index.status import StreamStatus, read_statuses
from kvadmin.index.streams import StreamId


def pod_streams(pod: str, dp_size: int | None, indexed: Iterable[str]) -> list[StreamId]:
    """The registered engine's ZMQ and pushed ranks and every stream the index names (the
    pod's ranks SET), ZMQ streams first, each by rank. Names of no current stream (left by
    older builds until their next purge) are not shown."""
    ranks = range(dp_size or 0)
    ids = {StreamId(pod, rank, pushed) for rank in ranks for pushed in (False, True)}
    ids |= {s for name in indexed if (s := StreamId.from_name(pod, name)) is not None}
    return sorted(ids, key=lambda s: (s.pushed, s.rank))


def read_streams(
    client: redis.Redis, streams: Mapping[str, list[StreamId]]
) -> dict[str, list[StreamStatus]]:
    """Each pod's stream statuses, in one pipelined round trip."""
    wanted = [stream for pod_streams in streams.values() for stream in pod_streams]
    health: dict[str, list[StreamStatus]] = {pod: [] for pod in streams}
    for read in read_statuses(client, wanted):
        if read.status or not read.pushed:
            health[read.pod].append(read)
    return health


def pod_started_at(streams: Iterable[StreamStatus]) -> int | None:
    """The pod's last (re)start as kthena's freshness rule needs it (compatibility.md 2.4 step 1):
    the latest `started_at` of its streams (a restarted rank starts a new run of the pod's cache),
    None when no stream recorded one."""
    return max((s.started_at for s in streams if s.started_at is not None), default=None)
