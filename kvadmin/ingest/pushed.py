"""Pushed events: engines that cannot expose a ZMQ socket POST their msgpack batches.

The API validates a batch and appends it to a per-pod Redis list with a per-pod seq (one
atomic script); a Celery task drains the list in order under a per-pod lock, so batches of
one pod are applied in the order they were accepted, exactly once (the applier refuses seqs
at or below the last applied one). Each data-parallel rank's pushes form their own stream,
in a key space of their own ("push:{rank}", see `scoring.keys.stream_name`): nothing pushed
can reach the state of a ZMQ stream. The API accepts ranks in [0, dp_size) only, and the task
checks again (the engine may have changed since, and older builds queued unchecked ranks).

Resync: the enqueue script marks the push stream as having state (its status field
`first_seq`); a push that finds no mark was the first since that stream had no state at all (a
new engine, or Redis lost its data), and the API tells the engine to resend its whole cache.

Each entry names the registration that accepted it (the engine's primary key): batches still
queued when their engine is removed must not reach an engine registered again under the same
pod name.
"""

from typing import NamedTuple

import redis

from kvadmin.index.streams import StreamId
from scoring import keys
from scoring.scripts import package_script

DRAIN_CHUNK = 100


_ENQUEUE = package_script(__file__, "push_enqueue")
_DONE = package_script(__file__, "push_done")


def rank_error(rank: int | None, dp_size: int) -> str | None:
    """Why a batch naming `rank` is refused for an engine of `dp_size` ranks; None if it isn't."""
    if rank is None or 0 <= rank < dp_size:
        return None
    return f"batch rank {rank} is outside the engine's data-parallel ranks [0, {dp_size})"


class Enqueued(NamedTuple):
    seq: int
    resync: bool
    """The push stream had no state before this batch: the engine should resend its cache."""


class Pushed(NamedTuple):
    seq: int
    engine_id: int | None
    """The engine registration that accepted it; None in entries queued by older builds."""
    payload: bytes


def enqueue(client: redis.Redis, stream: StreamId, engine_id: int, payload: bytes) -> Enqueued:
    """Append a batch validated for the engine `engine_id`, for the push `stream` it names;
    returns its seq among the pod's pushed batches. An entry is "{seq}:{engine id}|{payload}"."""
    pod = stream.pod
    status = keys.stream_status_key(pod, stream.name)
    seq, fresh = _ENQUEUE(
        client, [keys.push_seq_key(pod), keys.push_queue_key(pod), status], [engine_id, payload]
    )
    return Enqueued(int(seq), bool(int(fresh)))


def pending(client: redis.Redis, pod: str, limit: int = DRAIN_CHUNK) -> list[Pushed]:
    entries = []
    for entry in client.lrange(keys.push_queue_key(pod), 0, limit - 1):
        head, _, payload = entry.partition(b"|")
        seq, _, engine_id = head.partition(b":")
        entries.append(Pushed(int(seq), int(engine_id) if engine_id else None, payload))
    return entries


def done(client: redis.Redis, pod: str, through_seq: int) -> None:
    """Take the entries up to `through_seq` off the queue. By seq, not by count: a holder
    whose lock lapsed mid-chunk must not trim entries that the next holder has not read."""
    _DONE(client, [keys.push_queue_key(pod)], [through_seq])
