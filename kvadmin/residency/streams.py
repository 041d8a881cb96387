"""A pod's streams, their statuses (`kvadmin.index.status.StreamStatus`) and its start time.

A pod's streams: ZMQ and pushed ranks 0..dp_size-1 of its registered engine (pushed ones in
their own key space, see `kvadmin.index.streams.push_stream`) and any stream in the pod's ranks
SET. Only streams whose status hash exists are shown, except the registered ZMQ ranks, which
show as never connected.
"""

from collections.abc import Iterable, Mapping
from typing import NamedTuple

import redis

from kvadmin.engines.evidence import EngineHealth, EngineState
from kvadmin.index.status import StreamStatus, read_statuses
from kvadmin.index.streams import StreamId
from scoring.values import pod_start


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
    """The pod's last (re)start as scoring judges freshness by it (compatibility.md 2.4 step 1):
    the earliest start of its data-parallel ranks' ZMQ streams, unknown while one has none
    (`scoring.values.pod_start`; a rank restarting alone is not a start of the pod)."""
    return pod_start(s.started_at for s in streams if not s.pushed)


class StreamLink(NamedTuple):
    """How a page shows a stream's link to its engine: a CSS class, a dot and words."""

    css: str
    dot: str
    words: str


def stream_link(stream: StreamStatus, health: EngineHealth | None) -> StreamLink:
    """A stream's link as the engine's evidence has it. A ZMQ subscriber stays connected to a
    dead publisher, so an open socket is no proof: beside an engine whose probes failed
    (unreachable) the stream says so, never "connected" in green."""
    if stream.pushed and not stream.connected:
        return StreamLink("muted", "\u25cb", "pushed over HTTP")
    if not stream.connected:
        return StreamLink("bad", "\u25cb", "disconnected")
    if health is not None and health.state is EngineState.UNREACHABLE:
        return StreamLink("bad", "\u25cb", "socket open, engine unreachable")
    return StreamLink("ok", "\u25cf", "connected")
