"""Pushed events: engines that cannot expose a ZMQ socket POST their msgpack batches.

The API validates a batch and appends it to a per-pod Redis list with a per-pod seq (one
atomic script); a Celery task drains the list in order under a per-pod lock, so batches of
one pod are applied in the order they were accepted, exactly once (the applier refuses seqs
at or below the last applied one). Each data-parallel rank's pushes form their own stream.
"""

import redis

from kvadmin.ingest.streams import StreamId
from scoring import keys

DRAIN_CHUNK = 100
LOCK_SECONDS = 60

_ENQUEUE = """
local seq = redis.call('INCR', KEYS[1])
redis.call('RPUSH', KEYS[2], seq .. '|' .. ARGV[1])
return seq
"""


queue_key = keys.push_queue_key
seq_key = keys.push_seq_key
lock_key = keys.push_lock_key


def push_stream(pod: str, rank: int | None) -> StreamId:
    """Pushed batches of rank r live beside the ZMQ streams, as rank -(r + 1)."""
    return StreamId(pod, -((rank or 0) + 1))


def enqueue(client: redis.Redis, pod: str, payload: bytes) -> int:
    """Append a validated batch; returns its seq among the pod's pushed batches."""
    script = client.register_script(_ENQUEUE)
    return int(script(keys=[seq_key(pod), queue_key(pod)], args=[payload]))


def pending(client: redis.Redis, pod: str, limit: int = DRAIN_CHUNK) -> list[tuple[int, bytes]]:
    entries = client.lrange(queue_key(pod), 0, limit - 1)
    return [(int(seq), payload) for seq, _, payload in (e.partition(b"|") for e in entries)]


def done(client: redis.Redis, pod: str, count: int) -> None:
    client.ltrim(queue_key(pod), count, -1)
