"""Stream health and pod start times, read from the stream status hashes
(`kvadmin:stream:{pod}|{stream}`) that the ingest loop and the applier keep.

A pod's streams: ZMQ and pushed ranks 0..dp_size-1 of its registered engine (pushed ones in
their own key space, see `kvadmin.ingest.pushed`) and any stream in the pod's ranks SET. Only
streams whose status hash exists are shown, except the registered ZMQ ranks, which show as
never connected.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import redis

from kvadmin.index.streams import StreamId
from scoring import keys
from scoring.values import parse_seconds


@dataclass(frozen=True, slots=True)
class StreamHealth:
    id: StreamId
    status: Mapping[str, str]

    @property
    def pod(self) -> str:
        return self.id.pod

    @property
    def rank(self) -> int:
        return self.id.rank

    @property
    def label(self) -> str:
        return stream_label(self.id)

    @property
    def connected(self) -> bool:
        return self.status.get("connected") == "1"

    @property
    def pushed(self) -> bool:
        return self.id.pushed

    def counter(self, name: str) -> int:
        return int(self.status.get(name) or 0)

    def seconds(self, name: str) -> int | None:
        """A unix-seconds field (connected_at, started_at, last_event_at), None if absent."""
        return parse_seconds(self.status.get(name, ""))

    @property
    def gaps(self) -> int:
        return self.counter("gaps")

    @property
    def replays(self) -> int:
        return self.counter("replays")

    @property
    def batches_lost(self) -> int:
        return self.counter("batches_lost")

    @property
    def restarts(self) -> int:
        return self.counter("restarts")

    @property
    def purges(self) -> int:
        return self.counter("purges")

    @property
    def batches(self) -> int:
        return self.counter("batches")

    @property
    def last_seq(self) -> int | None:
        value = self.status.get("last_seq")
        return int(value) if value not in (None, "") else None

    @property
    def started_at(self) -> int | None:
        return self.seconds("started_at")

    @property
    def connected_at(self) -> int | None:
        return self.seconds("connected_at")

    @property
    def unknown_tags(self) -> list[tuple[str, int]]:
        """(tag, events) of the event tags the stream sent that kvadmin skipped as unknown
        (the first few distinct ones, see `kvadmin.index.writer`), by tag."""
        prefix = keys.UNKNOWN_TAG_FIELD_PREFIX
        return sorted(
            (name.removeprefix(prefix), self.counter(name))
            for name in self.status
            if name.startswith(prefix)
        )


def stream_label(stream: StreamId) -> str:
    return f"pushed rank {stream.rank}" if stream.pushed else f"rank {stream.rank}"


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
) -> dict[str, list[StreamHealth]]:
    """Each pod's stream status hashes, one pipelined HGETALL each."""
    pipe = client.pipeline(transaction=False)
    wanted = [stream for pod_streams in streams.values() for stream in pod_streams]
    for stream in wanted:
        pipe.hgetall(keys.stream_status_key(stream.pod, stream.name))
    health: dict[str, list[StreamHealth]] = {pod: [] for pod in streams}
    for stream, status in zip(wanted, pipe.execute() if wanted else [], strict=True):
        if status or not stream.pushed:
            health[stream.pod].append(StreamHealth(stream, status))
    return health


def pod_started_at(streams: Iterable[StreamHealth]) -> int | None:
    """The pod's last (re)start as kthena's freshness rule needs it (compatibility.md 2.4 step 1):
    the latest `started_at` of its streams (a restarted rank starts a new run of the pod's cache),
    None when no stream recorded one."""
    return max((s.started_at for s in streams if s.started_at is not None), default=None)
