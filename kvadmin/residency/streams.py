"""Stream health and pod start times, read from the stream status hashes
(`kvadmin:stream:{pod}|{rank}`) that the ingest loop and the applier keep.

A pod's streams: ZMQ ranks 0..dp_size-1 of its registered engine, pushed ranks (stored as
-(r + 1), see `kvadmin.ingest.pushed`) and any rank in the pod's ranks SET. Only streams whose
status hash exists are shown, except the registered ZMQ ranks, which show as never connected.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import redis

from scoring import keys
from scoring.values import parse_seconds


@dataclass(frozen=True, slots=True)
class StreamHealth:
    pod: str
    rank: int
    status: Mapping[str, str]

    @property
    def label(self) -> str:
        return f"rank {self.rank}" if self.rank >= 0 else f"pushed rank {-self.rank - 1}"

    @property
    def connected(self) -> bool:
        return self.status.get("connected") == "1"

    @property
    def pushed(self) -> bool:
        return self.rank < 0

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


def stream_ranks(dp_size: int | None, indexed_ranks: Iterable[str | int]) -> list[int]:
    """ZMQ ranks of the registered engine, then every rank the index names, in order."""
    ranks = set(range(dp_size or 0)) | {int(rank) for rank in indexed_ranks}
    return sorted(ranks, key=lambda rank: (rank < 0, abs(rank)))


def read_streams(
    client: redis.Redis, ranks: Mapping[str, list[int]]
) -> dict[str, list[StreamHealth]]:
    """Each pod's stream status hashes, one pipelined HGETALL each."""
    pipe = client.pipeline(transaction=False)
    wanted = [(pod, rank) for pod, pod_ranks in ranks.items() for rank in pod_ranks]
    for pod, rank in wanted:
        pipe.hgetall(keys.stream_status_key(pod, rank))
    streams: dict[str, list[StreamHealth]] = {pod: [] for pod in ranks}
    for (pod, rank), status in zip(wanted, pipe.execute() if wanted else [], strict=True):
        if status or rank >= 0:
            streams[pod].append(StreamHealth(pod, rank, status))
    return streams


def pod_started_at(streams: Iterable[StreamHealth]) -> int | None:
    """The pod's last (re)start as kthena's freshness rule needs it (SPEC 2.4 step 1): the
    latest `started_at` of its streams (a restarted rank starts a new run of the pod's
    cache), None when no stream recorded one."""
    return max((s.started_at for s in streams if s.started_at is not None), default=None)
