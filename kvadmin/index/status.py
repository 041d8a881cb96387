"""Per-stream status in Redis (`kvadmin:stream:{pod}|{stream}`), for the UI, metrics and the
next owner of the stream, and `StreamStatus`, the one typed view every page and metric reads.

Its writers: the apply script writes `last_seq`, `last_batch_ts`, `last_digest` and the apply
counters atomically with each batch (lua/apply-6.lua); the push queue marks `first_seq`
(`kvadmin.ingest.pushed`); everything else is written here: the reader's connection state and
fault counters, and after each applied run when and how late it was applied (`applied`).
"""

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import redis
from redis.client import Pipeline

from kvadmin.index.replies import texts
from kvadmin.index.streams import StreamId
from scoring import keys
from scoring.keys import stream_lease_key, stream_status_key
from scoring.values import parse_seconds


@dataclass(frozen=True, slots=True)
class StreamStatus:
    """A stream's status hash and its lease, as text."""

    id: StreamId
    status: Mapping[str, str]
    owner: str | None
    """The worker holding the stream's lease; None when no live worker does."""

    @property
    def connected(self) -> bool:
        """A worker holds the lease and its socket is connected. The flag alone is not enough:
        a worker that dies leaves it set, and its lease expires."""
        return self.status.get("connected") == "1" and bool(self.owner)

    @property
    def pod(self) -> str:
        return self.id.pod

    @property
    def rank(self) -> int:
        return self.id.rank

    @property
    def pushed(self) -> bool:
        return self.id.pushed

    @property
    def label(self) -> str:
        return self.id.label

    def counter(self, name: str) -> int:
        try:
            return int(self.status.get(name) or 0)
        except ValueError:
            return 0

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
    def lag_seconds(self) -> float | None:
        """How far behind its engine the last applied run was (see `applied`)."""
        return _float(self.status.get("lag_seconds"))

    @property
    def applied_at(self) -> float | None:
        """When the last run was applied (unix seconds)."""
        return _float(self.status.get("last_event_at"))

    @property
    def unknown_tags(self) -> list[tuple[str, int]]:
        """(tag, events) of the event tags the stream sent that kvadmin skipped as unknown
        (the first few distinct ones, see lua/apply-6.lua), by tag."""
        prefix = keys.UNKNOWN_TAG_FIELD_PREFIX
        return sorted(
            (name.removeprefix(prefix), self.counter(name))
            for name in self.status
            if name.startswith(prefix)
        )


def queue_read(pipe: Pipeline, stream: StreamId) -> None:
    """Queue the two replies `from_replies` reads: the status hash and the lease holder."""
    pipe.hgetall(_key(stream))
    pipe.get(stream_lease_key(stream.pod, stream.name))


def from_replies(stream: StreamId, status: Any, owner: Any) -> StreamStatus:
    return StreamStatus(stream, texts(status), texts(owner))


def read_statuses(client: redis.Redis, streams: Iterable[StreamId]) -> list[StreamStatus]:
    """The streams' statuses in one pipelined round trip."""
    streams = list(streams)
    if not streams:
        return []
    pipe = client.pipeline(transaction=False)
    for stream in streams:
        queue_read(pipe, stream)
    replies = pipe.execute()
    return [from_replies(s, *replies[2 * i : 2 * i + 2]) for i, s in enumerate(streams)]


def _key(stream: StreamId) -> str:
    return stream_status_key(stream.pod, stream.name)


def last_seq(client: redis.Redis, stream: StreamId) -> int:
    value = client.hget(_key(stream), "last_seq")
    return int(value) if value is not None else -1


def last_batch_ts(client: redis.Redis, stream: StreamId) -> float | None:
    """The engine's publish time of the last applied batch that carried one."""
    value = client.hget(_key(stream), "last_batch_ts")
    return float(value) if value is not None else None


def reset_last_seq(client: redis.Redis, stream: StreamId) -> None:
    client.hset(_key(stream), "last_seq", -1)


def last_digest(client: redis.Redis, stream: StreamId) -> str | None:
    """A digest of the last applied payload, written with `last_seq` by the apply script:
    after a takeover, the engine's replay of that seq must carry the same payload, or the
    publisher restarted meanwhile."""
    return client.hget(_key(stream), "last_digest")


def connected(client: redis.Redis, stream: StreamId, owner: str) -> None:
    client.hset(
        _key(stream), mapping={"owner": owner, "connected": 1, "connected_at": int(time.time())}
    )


def started(client: redis.Redis, stream: StreamId) -> None:
    """The publisher starts a new run: ownership written at or before `started_at` belongs to an
    earlier run, and scoring drops it (compatibility.md 2.4 step 1). The second before now: entries
    of the new run are written from now on (same-second writes count as before the start), and the
    caller purges the earlier run's entries itself."""
    client.hset(_key(stream), "started_at", int(time.time()) - 1)


def disconnected(client: redis.Redis, stream: StreamId) -> None:
    client.hset(_key(stream), mapping={"connected": 0, "owner": ""})


def count(client: redis.Redis, stream: StreamId, counter: str, amount: int = 1) -> None:
    client.hincrby(_key(stream), counter, amount)


def applied(pipe: Pipeline, stream: StreamId, published: float, now: float) -> None:
    """A run of the stream's batches was applied at `now`: when (`last_event_at`, unix seconds)
    and how far behind its engine (`lag_seconds`, from the last batch's publish time
    `published`, 0 when it had none)."""
    fields: dict[str, str | int] = {"last_event_at": int(now)}
    if published > 0:
        fields["lag_seconds"] = f"{max(0.0, now - published):.3f}"
    pipe.hset(_key(stream), mapping=fields)


def _float(value: str | None) -> float | None:
    return float(value) if value else None
