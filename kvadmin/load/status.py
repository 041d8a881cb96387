"""One pod's load as the pod page shows it: the last scrape, how old it is, and the failures."""

import time
from dataclasses import dataclass, field

import redis

from kvadmin.load.scraper import FAILURES
from kvadmin.metrics import families
from kvadmin.metrics.families import label_field
from scoring import keys, load_hash


@dataclass(frozen=True, slots=True)
class LoadStatus:
    scraped_at: float | None
    age_seconds: float | None
    stale: bool
    """No load, or older than LOAD_STALE_SECONDS: the policy cannot trust it."""
    running: int | None = None
    waiting: int | None = None
    kv_usage: float | None = None
    scrapes: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    """Failed scrapes by reason, only those that happened."""
    last_error_reason: str = ""
    last_error_message: str = ""
    last_error_at: int | None = None

    @property
    def failed(self) -> int:
        return sum(self.failures.values())

    @property
    def kv_usage_percent(self) -> float | None:
        return None if self.kv_usage is None else self.kv_usage * 100


def load_status(
    client: redis.Redis, pod: str, stale_seconds: float, now: float | None = None
) -> LoadStatus:
    """One round trip: the load HASH, the last error and the pod's scrape counters."""
    now = time.time() if now is None else now
    results = ("ok", *FAILURES)
    pipe = client.pipeline(transaction=False)
    load_hash.queue_read(pipe, pod)
    pipe.hgetall(keys.load_error_key(pod))
    pipe.hmget(families.LOAD_SCRAPES.key, [label_field((pod, r)) for r in results])
    reply, error, counts = pipe.execute()
    load = load_hash.from_reply(reply)
    counted = {r: int(c or 0) for r, c in zip(results, counts, strict=True)}
    failures = {r: n for r, n in counted.items() if r != "ok" and n}
    at = _number(error.get("at"))
    common = {
        "scrapes": sum(counted.values()),
        "failures": failures,
        "last_error_reason": error.get("reason", ""),
        "last_error_message": error.get("message", ""),
        "last_error_at": None if at is None else int(at),
    }
    if load.scraped_at is None:
        return LoadStatus(None, None, True, **common)
    return LoadStatus(
        load.scraped_at,
        load.age_seconds(now),
        load.stale(now, stale_seconds),
        running=load.running,
        waiting=load.waiting,
        kv_usage=load.kv_usage,
        **common,
    )


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None
