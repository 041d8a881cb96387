"""Pushed events: engines that cannot expose a ZMQ socket POST their msgpack batches.

The API validates a batch and appends it to a per-pod Redis list with a per-pod seq (one
atomic script); a Celery task drains the list in order under a per-pod lock, so batches of
one pod are applied in the order they were accepted, exactly once (the applier refuses seqs
at or below the last applied one). Each data-parallel rank's pushes form their own stream.

Each entry names the registration that accepted it (the engine's primary key): batches still
queued when their engine is removed must not reach an engine registered again under the same
pod name.
"""

import secrets
import time
from typing import NamedTuple

import redis

from kvadmin.ingest.streams import StreamId
from scoring import keys

DRAIN_CHUNK = 100
LOCK_SECONDS = 60

_ENQUEUE = """
local seq = redis.call('INCR', KEYS[1])
redis.call('RPUSH', KEYS[2], seq .. ':' .. ARGV[1] .. '|' .. ARGV[2])
return seq
"""

_DONE = """
while true do
  local head = redis.call('LINDEX', KEYS[1], 0)
  if not head or tonumber(string.match(head, '^%d+')) > tonumber(ARGV[1]) then
    return
  end
  redis.call('LPOP', KEYS[1])
end
"""

# KEYS: the lock; ARGV: the holder's token, then "renew" and the seconds, or "release".
_HOLDER = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if ARGV[2] == 'renew' then
  return redis.call('EXPIRE', KEYS[1], ARGV[3])
end
return redis.call('DEL', KEYS[1])
"""

queue_key = keys.push_queue_key
seq_key = keys.push_seq_key
lock_key = keys.push_lock_key


def push_stream(pod: str, rank: int | None) -> StreamId:
    """Pushed batches of rank r live beside the ZMQ streams, as rank -(r + 1)."""
    return StreamId(pod, -((rank or 0) + 1))


class Pushed(NamedTuple):
    seq: int
    engine_id: int | None
    """The engine registration that accepted it; None in entries queued by older builds."""
    payload: bytes


def enqueue(client: redis.Redis, pod: str, engine_id: int, payload: bytes) -> int:
    """Append a batch validated for the engine `engine_id`; returns its seq among the pod's
    pushed batches. An entry is "{seq}:{engine id}|{payload}"."""
    script = client.register_script(_ENQUEUE)
    return int(script(keys=[seq_key(pod), queue_key(pod)], args=[engine_id, payload]))


def pending(client: redis.Redis, pod: str, limit: int = DRAIN_CHUNK) -> list[Pushed]:
    entries = []
    for entry in client.lrange(queue_key(pod), 0, limit - 1):
        head, _, payload = entry.partition(b"|")
        seq, _, engine_id = head.partition(b":")
        entries.append(Pushed(int(seq), int(engine_id) if engine_id else None, payload))
    return entries


def done(client: redis.Redis, pod: str, through_seq: int) -> None:
    """Take the entries up to `through_seq` off the queue. By seq, not by count: a holder
    whose lock lapsed mid-chunk must not trim entries that the next holder has not read."""
    client.register_script(_DONE)(keys=[queue_key(pod)], args=[through_seq])


class DrainLock:
    """A pod's drain lock: only its holder applies the pod's pushed batches or forgets the pod.

    Taken with a token of its own and renewed before each chunk, so a holder whose lock lapsed
    (a stalled worker) neither releases nor outlives the next holder's.
    """

    def __init__(self, client: redis.Redis, pod: str) -> None:
        self.client = client
        self.key = lock_key(pod)
        self.token = secrets.token_hex(16)
        self.script = client.register_script(_HOLDER)

    def acquire(self, wait: float = 0.0) -> bool:
        """Take the lock, waiting up to `wait` seconds for its holder; False if still held."""
        deadline = time.monotonic() + wait
        while not self.client.set(self.key, self.token, nx=True, ex=LOCK_SECONDS):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def renew(self) -> bool:
        """Keep the lock for another LOCK_SECONDS; False when it lapsed to someone else."""
        return bool(self.script(keys=[self.key], args=[self.token, "renew", LOCK_SECONDS]))

    def release(self) -> None:
        self.script(keys=[self.key], args=[self.token, "release"])
