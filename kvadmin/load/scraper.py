"""The load scraper: every period, each enabled engine's /metrics, fetched and parsed in
parallel within one deadline, written to its load HASH (`keys.load_key`).

Why a worker thread and not a beat task: a 1 s beat task waits in the broker queue behind
whatever the worker is doing (a GC run, a burst of pushed batches), so the load would go stale
exactly when the fleet is busy; a thread of its own keeps the period.

One scraper per engine across workers: at each tick a worker claims each engine for the period
(`SET NX PX` of `keys.load_lock_key`, all in one round trip) and scrapes the ones it got; a
dead worker's engines are claimed by another the next period.

The prefill counters also go, one sample per `sample_every` seconds, to a capped list per engine
(`keys.load_fit_samples_key`): the load HASH holds only the latest values, and fitting the TTFT
parameters needs their differences over time (kvadmin.weights.fit). A short script appends a
sample only when the newest one is old enough, in the same transaction as the load.

One engine never delays another: the fetches run in a thread pool and the round waits for them
at most the scrape timeout; fetches still running then are aborted (their sockets shut down)
and counted as timeouts. A failed scrape leaves the last good load in place (its
`scraped_at` ages: readers see it is stale) and records why in `keys.load_error_key`.
"""

import concurrent.futures as cf
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import redis

from kvadmin.load.exposition import Load, Unreadable, parse_load
from kvadmin.load.fetch import EngineFetch, FetchFailed
from kvadmin.loop_guard import LoopGuard
from kvadmin.metrics import families as f
from kvadmin.metrics import recorder
from scoring import keys
from scoring.route_state import QUEUE_RESYNC
from scoring.scripts import package_script

log = logging.getLogger(__name__)

FAILURES = ("timeout", "error", "http", "too_large", "unparsable", "missing", "bad_value")
"""Every reason a scrape fails for (`FetchFailed` and `Unreadable` reasons)."""
ERROR_TTL_SECONDS = 86400
MAX_MESSAGE = 200

_SAMPLE = package_script(__file__, "fit_sample")


@dataclass(frozen=True, slots=True)
class Target:
    pod: str
    kind: str
    base_url: str


@dataclass(frozen=True, slots=True)
class Outcome:
    pod: str
    load: Load | None
    seconds: float
    reason: str = "ok"
    message: str = ""


@dataclass(frozen=True, slots=True)
class ScrapeSettings:
    period: float = 1.0
    timeout: float = 0.5
    max_bytes: int = 1024 * 1024
    threads: int = 16
    ttl: float = 60.0
    sample_every: float = 10.0
    """Seconds between two kept samples of the prefill counters."""
    samples: int = 360
    """Samples kept per engine."""


class LoadScraper:
    def __init__(
        self,
        client: redis.Redis,
        load_targets: Callable[[], list[Target]],
        registry_version: Callable[[], int],
        worker_id: str,
        settings: ScrapeSettings = ScrapeSettings(),
    ) -> None:
        self.client = client
        self.load_targets = load_targets
        self.registry_version = registry_version
        self.worker_id = worker_id
        self.settings = settings
        self._stop = threading.Event()
        self._pool = cf.ThreadPoolExecutor(settings.threads, thread_name_prefix="kvadmin-load")
        self._targets: list[Target] = []
        self._version: int | None = None
        self.guard = LoopGuard("load_scraper", log)

    def run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            backoff = 0.0
            try:
                self.tick()
                self.guard.succeeded(self.client)
            except Exception as error:  # the loop outlives any one bad round
                backoff = self.guard.failed(error)
            next_at += self.settings.period
            now = time.monotonic()
            if next_at < now:  # a round (or Redis) was slow: skip the missed ticks
                next_at = now + self.settings.period
            next_at = max(next_at, now + backoff)
            self._stop.wait(next_at - now)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def stop(self) -> None:
        self._stop.set()

    def tick(self) -> list[Outcome]:
        """One round: claim, scrape and record this worker's engines for this period."""
        mine = self._claim(self._current_targets())
        outcomes = self.scrape(mine)
        self._record(outcomes, time.time())
        return outcomes

    def scrape(self, targets: Sequence[Target]) -> list[Outcome]:
        """Every target's outcome, within the timeout (plus scheduling slack) in all."""
        timeout = self.settings.timeout
        size = self.settings.max_bytes
        fetches = {t.pod: EngineFetch(t.base_url, timeout, size) for t in targets}
        started = time.monotonic()
        futures = {self._pool.submit(_scrape_one, t, fetches[t.pod], started): t for t in targets}
        done, late = cf.wait(futures, timeout=timeout)
        outcomes = [future.result() for future in done]
        for future in late:
            target = futures[future]
            fetches[target.pod].abort()
            future.cancel()
            seconds = time.monotonic() - started
            message = f"no answer within {timeout:g}s"
            outcomes.append(Outcome(target.pod, None, seconds, "timeout", message))
        return outcomes

    def _current_targets(self) -> list[Target]:
        version = self.registry_version()
        if version != self._version:
            self._targets, self._version = self.load_targets(), version
        return self._targets

    def _claim(self, targets: list[Target]) -> list[Target]:
        if not targets:
            return []
        hold_ms = max(1, int(self.settings.period * 900))  # expires before the next tick
        pipe = self.client.pipeline(transaction=False)
        for target in targets:
            pipe.set(keys.load_lock_key(target.pod), self.worker_id, nx=True, px=hold_ms)
        return [t for t, won in zip(targets, pipe.execute(), strict=True) if won]

    def _record(self, outcomes: list[Outcome], now: float) -> None:
        """All outcomes in one transaction: a load HASH is replaced whole, never half. A fit
        sample the server did not have the script for yet (NOSCRIPT) is kept after it."""
        if not outcomes:
            return
        ttl = max(1, round(self.settings.ttl))
        pipe = self.client.pipeline(transaction=True)
        samples: list[tuple[int, list[str], list[str]]] = []
        for outcome in outcomes:
            recorder.inc(pipe, f.LOAD_SCRAPES, (outcome.pod, outcome.reason))
            if outcome.load is None:
                error_key = keys.load_error_key(outcome.pod)
                pipe.hset(
                    error_key,
                    mapping={
                        "at": f"{now:.3f}",
                        "reason": outcome.reason,
                        "message": outcome.message[:MAX_MESSAGE],
                    },
                )
                pipe.expire(error_key, ERROR_TTL_SECONDS)
                continue
            recorder.observe(pipe, f.LOAD_SCRAPE_DURATION, (outcome.pod,), outcome.seconds)
            load_key = keys.load_key(outcome.pod)
            pipe.delete(load_key)
            pipe.hset(load_key, mapping=load_fields(outcome.load, now, outcome.seconds))
            pipe.expire(load_key, ttl)
            # The routing policy's virtual queue restarts from the engine's own queue.
            QUEUE_RESYNC(
                pipe, [keys.queue_key(outcome.pod)], [outcome.load.waiting, outcome.load.running]
            )
            if outcome.load.counters:
                sample_keys, args = self._sample(outcome.pod, outcome.load, now)
                samples.append((len(pipe), sample_keys, args))
                _SAMPLE.queue(pipe, sample_keys, args)
        replies = pipe.execute(raise_on_error=False)
        for at, sample_keys, args in samples:
            replies[at] = _SAMPLE.finish(self.client, replies[at], sample_keys, args)
        if failed := next((reply for reply in replies if isinstance(reply, Exception)), None):
            raise failed
        for outcome in outcomes:
            if outcome.load is None:
                log.info("load scrape of %s: %s (%s)", outcome.pod, outcome.reason, outcome.message)

    def _sample(self, pod: str, load: Load, now: float) -> tuple[list[str], list[str]]:
        """KEYS and ARGV of fit_sample.lua."""
        every, kept = self.settings.sample_every, max(1, self.settings.samples)
        sample = json.dumps({"running": load.running, **load.counters}, separators=(",", ":"))
        lifetime = max(round(self.settings.ttl), round(every * kept))
        args = [f"{now:.3f}", str(every), sample, str(kept), str(lifetime)]
        return [keys.load_fit_samples_key(pod)], args


def load_fields(load: Load, scraped_at: float, seconds: float) -> dict[str, str]:
    """The load HASH: the LOAD_FIELDS (the contract the routing policy and scoring.load_hash
    read), the scrape's duration, and the engine's counters for fitting the TTFT model."""
    read = (str(load.running), str(load.waiting), repr(load.kv_usage), f"{scraped_at:.3f}")
    fields = dict(zip(keys.LOAD_FIELDS, read, strict=True))
    fields["scrape_seconds"] = f"{seconds:.4f}"
    fields.update({name: repr(value) for name, value in load.counters.items()})
    return fields


def _scrape_one(target: Target, fetch: EngineFetch, started: float) -> Outcome:
    try:
        load = parse_load(target.kind, fetch.run())
    except (FetchFailed, Unreadable) as failure:
        return Outcome(target.pod, None, time.monotonic() - started, failure.reason, str(failure))
    except Exception as error:  # one engine's surprise must not cost the others their round
        message = f"{type(error).__name__}: {error}"
        return Outcome(target.pod, None, time.monotonic() - started, "error", message)
    return Outcome(target.pod, load, time.monotonic() - started)
