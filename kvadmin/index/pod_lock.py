"""A pod's drain lock: pushed batches of a pod are applied, and a pod is forgotten, by one
holder at a time."""

import contextlib

import redis
from redis.exceptions import LockNotOwnedError

from scoring import keys

LOCK_SECONDS = 60


class DrainLock:
    """A pod's drain lock: only its holder applies the pod's pushed batches or forgets the pod.

    redis-py's `Lock`, which takes it with a token of its own: renewed before each chunk, so a
    holder whose lock lapsed (a stalled worker) neither releases nor outlives the next holder's.
    """

    def __init__(self, client: redis.Redis, pod: str) -> None:
        self.key = keys.push_lock_key(pod)
        self.lock = client.lock(self.key, timeout=LOCK_SECONDS, sleep=0.05, thread_local=False)

    def acquire(self, wait: float = 0.0) -> bool:
        """Take the lock, waiting up to `wait` seconds for its holder; False if still held."""
        return self.lock.acquire(blocking=wait > 0, blocking_timeout=wait)

    def renew(self) -> bool:
        """Keep the lock for another LOCK_SECONDS; False when it lapsed to someone else."""
        try:
            self.lock.reacquire()
        except LockNotOwnedError:
            return False
        return True

    def release(self) -> None:
        """Let the lock go, unless it lapsed to someone else meanwhile."""
        with contextlib.suppress(LockNotOwnedError):
            self.lock.release()
