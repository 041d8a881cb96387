"""Per-stream status in Redis, for the UI, metrics and the next owner of the stream.

The applier writes `last_seq` and the apply counters atomically with each batch; the reader
writes connection state and the fault counters below.
"""

import time

import redis
from redis.client import Pipeline

from kvadmin.index.streams import StreamId
from scoring.keys import stream_status_key


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


def applied_digest(client: redis.Redis | Pipeline, stream: StreamId, digest: str) -> None:
    """A digest of the last applied payload: after a takeover, the engine's replay of that
    seq must carry the same payload, or the publisher restarted meanwhile."""
    client.hset(_key(stream), "last_digest", digest)


def last_digest(client: redis.Redis, stream: StreamId) -> str | None:
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


def read(client: redis.Redis, stream: StreamId) -> dict[str, str]:
    return client.hgetall(_key(stream))
