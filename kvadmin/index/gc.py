"""Garbage collection of the index: ownership no store has refreshed for `max_age` seconds
goes, across the whole index in every run, and pods no longer registered are purged.

Engines announce removals, but a removal can be lost for good (a dead engine, batches lost
beyond the replay buffer with purging off, a pod renamed). kthena's sidecar collects such
leftovers by scanning 100 matrix keys an hour; here every run covers every pod:

1. Pods in `kvadmin:pods` that the engine registry no longer lists are purged, the status of
   their streams with them (the pods hash is read before the registry, so a pod registered
   meanwhile is never mistaken for removed).
2. For each remaining pod: retired engine blocks a dead worker left undrained are released;
   then every rank's engine blocks are scanned a few buckets a step and each medium whose residency
   (the pod's last store of the block in that medium) is older than the cutoff is dropped
   exactly as a removal event drops it (`lua/expire-6.lua`: refcounts, residency, engine
   blocks, mapping keys, the matrix value's best medium); finally residency entries older
   than the cutoff that no engine block holds are released (`lua/sweep-6.lua`, normally nothing).
3. The report (last run, running totals) goes to Redis for the dashboard and /metrics.

Every step is one script call bounded by the applier's `chunk_size` entries, so other
clients (the router's reads, ingestion) interleave. One run at a time, by a Redis lock.
"""

import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import redis

from kvadmin.index.inventory import PodInventory, read_inventory
from kvadmin.index.replies import from_hash, texts
from kvadmin.index.writer import Applier, ExpireStep
from scoring import keys

LOCK_SECONDS = 120
"""Renewed after every step: a run holding it longer than this has died."""

STEP_BLOCKS = 250
"""Engine blocks per step in the worker: about 3 ms of Redis time each."""

TOTALLED = ("ownerships", "blocks", "orphans", "pods_purged", "purged_blocks")


class AnotherRunIsActive(Exception):
    """Another process got there first."""


@dataclass(slots=True)
class GcReport:
    started_at: float
    finished_at: float = 0.0
    cutoff: int = 0
    pods: int = 0
    """Pods collected."""
    scanned: int = 0
    """Engine blocks looked at."""
    ownerships: int = 0
    """(pod, block, medium) residency entries removed as stale."""
    blocks: int = 0
    """Matrix fields (a pod owning a block, as the router sees it) removed."""
    orphans: int = 0
    """Stale residency entries no engine block held (counted in `ownerships` too)."""
    compacted: int = 0
    """Engine-block values of an index written before their short form, rewritten in it."""
    pods_purged: int = 0
    purged_blocks: int = 0
    """Matrix fields removed by purging unregistered pods."""
    steps: int = 0
    largest_step: int = 0
    """The most engine blocks one step looked at (the bound on how long a script runs)."""
    longest_step_ms: float = 0.0

    @property
    def seconds(self) -> float:
        return max(0.0, self.finished_at - self.started_at)


def collect_garbage(
    applier: Applier,
    max_age: float,
    registered: Callable[[], set[str]],
    now: float | None = None,
    interval: float | None = None,
) -> GcReport | None:
    """One complete run; raises AnotherRunIsActive when another one holds the lock. With an
    `interval`, only if a run is due (None otherwise), decided once the lock is held: two
    workers handed the task at once must not both find it due and run one after the other.

    `registered` lists the engine registry's pods. `applier` writes what changes: the
    ingest writers' media order and value format (the worker's task passes
    `kvadmin.weights.active.active_applier`), its `chunk_size` engine blocks per step
    (`STEP_BLOCKS` in the worker)."""
    client = applier.client
    lock = client.lock(keys.GC_LOCK_KEY, timeout=LOCK_SECONDS, blocking=False, thread_local=False)
    if not lock.acquire(token=uuid.uuid4().hex):
        raise AnotherRunIsActive()
    try:
        if interval is not None and not due(client, interval, now):
            return None
        began = time.monotonic()
        report = GcReport(started_at=time.time() if now is None else now)
        report.cutoff = int(report.started_at - max_age)
        _Run(client, applier, report, lock.reacquire).run(registered)
        report.finished_at = report.started_at + (time.monotonic() - began)
        _store(client, report)
        return report
    finally:
        lock.release()


def due(client: redis.Redis, interval: float, now: float | None = None) -> bool:
    """Whether `interval` seconds passed since the last run started (or none ran yet)."""
    started = client.hget(keys.GC_LAST_RUN_KEY, "started_at")
    now = time.time() if now is None else now
    return started is None or now - float(started) >= interval


def last_run(client: redis.Redis) -> GcReport | None:
    stored = texts(client.hgetall(keys.GC_LAST_RUN_KEY))
    return from_hash(GcReport, stored) if stored else None


def totals(client: redis.Redis) -> dict[str, int]:
    stored = texts(client.hgetall(keys.GC_TOTALS_KEY))
    return {name: int(stored.get(name, 0)) for name in ("runs", *TOTALLED)}


class _Run:
    def __init__(
        self, client: redis.Redis, applier: Applier, report: GcReport, renew: Callable[[], Any]
    ) -> None:
        self.client = client
        self.applier = applier
        self.report = report
        self.renew = renew

    def run(self, registered: Callable[[], set[str]]) -> None:
        inventory = read_inventory(self.client)
        known = registered()
        for pod, held in inventory.items():
            if pod in known:
                self.collect_pod(held)
            else:
                self.purge_pod(pod)

    def purge_pod(self, pod: str) -> None:
        self.report.purged_blocks += self.timed(self.applier.forget_pod, pod)
        self.report.pods_purged += 1

    def collect_pod(self, held: PodInventory) -> None:
        """Streams and media as the run found them: those added since hold only new entries,
        and media that go meanwhile have nothing left to sweep."""
        pod, cutoff = held.pod, self.report.cutoff
        self.report.pods += 1
        self.timed(self.applier.drain_pod, pod)
        self.timed(self.applier.forget_legacy_streams, pod)  # the names of no current stream
        for stream in sorted(stream.name for stream in held.streams):
            cursor = "0"
            while True:
                step = self.timed(self.applier.expire_step, pod, stream, cursor, cutoff)
                self.count(step)
                cursor = step.progress
                if cursor == "0":
                    break
        for medium in held.media:
            while True:
                step = self.timed(self.applier.sweep_step, pod, medium, cutoff)
                if step.progress == "-1":
                    self.timed(self.applier.drain_pod, pod)
                    continue
                self.count(step)
                self.report.orphans += step.ownerships
                if step.progress == "0":
                    break

    def count(self, step: ExpireStep) -> None:
        self.report.scanned += step.scanned
        self.report.largest_step = max(self.report.largest_step, step.scanned)
        self.report.ownerships += step.ownerships
        self.report.blocks += step.fields
        self.report.compacted += step.compacted

    def timed[T](self, step: Callable[..., T], *args: Any) -> T:
        """Run one bounded step, keep the longest step time, and renew the lock."""
        started = time.perf_counter()
        result = step(*args)
        elapsed_ms = (time.perf_counter() - started) * 1000
        self.report.steps += 1
        self.report.longest_step_ms = max(self.report.longest_step_ms, elapsed_ms)
        self.renew()
        return result


def _store(client: redis.Redis, report: GcReport) -> None:
    pipe = client.pipeline(transaction=False)
    pipe.delete(keys.GC_LAST_RUN_KEY)
    pipe.hset(keys.GC_LAST_RUN_KEY, mapping={k: repr(v) for k, v in asdict(report).items()})
    pipe.hincrby(keys.GC_TOTALS_KEY, "runs", 1)
    for name in TOTALLED:
        pipe.hincrby(keys.GC_TOTALS_KEY, name, getattr(report, name))
    pipe.execute()
