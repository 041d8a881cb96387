"""A pod's drain lock: pushed batches of a pod are applied, and a pod is forgotten, by one
holder at a time."""

import secrets
import time

import redis

from scoring import keys

LOCK_SECONDS = 60

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


class DrainLock:
    """A pod's drain lock: only its holder applies the pod's pushed batches or forgets the pod.

    Taken with a token of its own and renewed before each chunk, so a holder whose lock lapsed
    (a stalled worker) neither releases nor outlives the next holder's.
    """

    def __init__(self, client: redis.Redis, pod: str) -> None:
        self.client = client
        self.key = keys.push_lock_key(pod)
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
