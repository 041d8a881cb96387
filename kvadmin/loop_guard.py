"""What every long-lived loop does with a failure: survive it, count it, log it once per kind,
and back off before the next round.

The ingest loop, the load scraper, the engine probes, the value-format rewrite and the live
feed's tail each hold one `LoopGuard`. A round that raised anything is handed to `failed`, which
names its kind (`failure_kind`), counts it, logs it when that kind starts failing (a bug with
its traceback, an outage in one line) and returns how long to wait: 0.5 s doubling to 10 s
while rounds keep failing. A kind is logged again only after it has not failed for
QUIET_SECONDS: a loop's rounds between two failures often succeed with nothing to do (no
stream claimed yet), and must not make a lasting fault log every few seconds. `succeeded`
resets the backoff and writes the counts gathered meanwhile to `kvadmin_loop_failures_total`
(Redis was often the failure, so they are written once it answers again).
"""

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable

import redis
from django.db import DatabaseError

from kvadmin.metrics import recorder
from kvadmin.redis_clients import REDIS_OUTAGES

FIRST_BACKOFF_SECONDS = 0.5
MAX_BACKOFF_SECONDS = 10.0
QUIET_SECONDS = 300.0
"""A kind of failure not seen for this long is logged again when it returns."""

OUTAGE_KINDS = ("redis_unavailable", "redis_error", "database")
"""The kinds that are the world's fault, logged as warnings without a traceback. Any other
kind is the exception's class name: a bug, logged with its traceback."""


def failure_kind(error: BaseException) -> str:
    """A bounded name for what went wrong: Redis unreachable, stalled, loading (LOADING) or
    held by a script (BUSY); Redis refusing a command (MOVED, WRONGTYPE, OOM ...); the
    database; otherwise the exception's class."""
    if isinstance(error, REDIS_OUTAGES):  # BusyLoadingError is a ConnectionError
        return "redis_unavailable"
    if isinstance(error, redis.RedisError):
        return "redis_error"
    if isinstance(error, DatabaseError):
        return "database"
    return type(error).__name__


class LoopGuard:
    """One loop's failures (thread-safe). `clock` is monotonic seconds."""

    def __init__(
        self,
        loop: str,
        logger: logging.Logger,
        first_backoff: float = FIRST_BACKOFF_SECONDS,
        max_backoff: float = MAX_BACKOFF_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.loop = loop
        self.logger = logger
        self.first_backoff = first_backoff
        self.max_backoff = max_backoff
        self.clock = clock
        self.counts: Counter[str] = Counter()
        """Failures per kind since the process started."""
        self._unrecorded: Counter[str] = Counter()
        self._last_failed: dict[str, float] = {}
        self._backoff = first_backoff
        self._resume_at = 0.0
        self._lock = threading.Lock()

    def failed(self, error: BaseException) -> float:
        """Count and (once per kind) log a failed round; returns the seconds to wait."""
        kind = failure_kind(error)
        with self._lock:
            now = self.clock()
            self.counts[kind] += 1
            self._unrecorded[kind] += 1
            delay = self._backoff
            self._backoff = min(self._backoff * 2, self.max_backoff)
            self._resume_at = now + delay
            last = self._last_failed.get(kind)
            self._last_failed[kind] = now
        if last is None or now - last >= QUIET_SECONDS:
            if kind in OUTAGE_KINDS:
                self.logger.warning(
                    "%s: %s (%s: %s); retrying with backoff",
                    self.loop,
                    kind.replace("_", " "),
                    type(error).__name__,
                    error,
                )
            else:
                self.logger.error(
                    "%s: unexpected failure; retrying with backoff", self.loop, exc_info=error
                )
        return delay

    def due(self) -> bool:
        """Whether the backoff of the last failure has passed (for rounds run by a timer,
        such as beat tasks, which skip the rounds that fall within it)."""
        return self.clock() >= self._resume_at

    def succeeded(self, client: redis.Redis | None = None) -> None:
        """A round went well; with `client`, the counts not yet written go to Redis."""
        if not self._unrecorded and self._backoff == self.first_backoff:
            return  # the common case, every round: nothing to do
        with self._lock:
            self._backoff = self.first_backoff
            self._resume_at = 0.0
            pending = dict(self._unrecorded) if client is not None else {}
            if client is not None:
                self._unrecorded.clear()
        if pending:
            recorder.record_loop_failures(client, self.loop, pending)


def guarded_run[T](guard: LoopGuard, run: Callable[[], T], client: redis.Redis, otherwise: T) -> T:
    """One round of a loop run by a timer (a beat task): skipped (`otherwise`) within the
    backoff of the last failure; a failure is counted and logged by `guard`, never raised."""
    if not guard.due():
        return otherwise
    try:
        result = run()
    except Exception as error:
        guard.failed(error)
        return otherwise
    guard.succeeded(client)
    return result
