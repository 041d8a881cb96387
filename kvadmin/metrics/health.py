"""Readiness: can this web process do its job right now? For Kubernetes' readinessProbe.

1. Redis (REDIS_URL, and every index group's primary) answers a PING within a second.
2. The database answers a query.
3. When engines are registered (enabled), at least one ingest worker is alive (its heartbeat is
   younger than a lease) and holds some stream's lease: otherwise the index silently goes
   stale and scores mislead the router.
4. When engines are registered (enabled), at least one of them is healthy from evidence
   (`kvadmin.engines.evidence`: its replay socket or /health answers, events arrive): a fleet
   whose every engine is dead or unobserved gives scores that mislead. Engines that are not
   healthy are listed; with some of them the status is "degraded", still ready.

Each check reports how long it took. The Redis client is made from settings at call time,
with one-second timeouts and no retries, so a probe answers quickly when Redis is away.
"""

import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import redis
from django.conf import settings
from django.db import connection
from redis.backoff import NoBackoff
from redis.retry import Retry

from kvadmin import redis_urls
from kvadmin.conf import knob
from kvadmin.engines.health import engine_healths, facts_of
from kvadmin.index.groups import IndexGroup, group_of, index_groups
from kvadmin.metrics.fleet import read_groups_fleet, registered_engines
from scoring.keys import WORKERS_KEY, stream_lease_key, stream_name

PROBE_TIMEOUT_SECONDS = 1.0


@dataclass(slots=True)
class Check:
    ok: bool
    ms: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "ms": round(self.ms, 2), **self.details}


@lru_cache(maxsize=8)
def _probe_client(url: str) -> redis.Redis:
    return redis_urls.client(
        url,
        decode_responses=True,
        socket_timeout=PROBE_TIMEOUT_SECONDS,
        socket_connect_timeout=PROBE_TIMEOUT_SECONDS,
        retry=Retry(NoBackoff(), 0),
    )


def readiness() -> tuple[bool, dict[str, dict[str, Any]]]:
    client = _probe_client(settings.INDEX_REDIS_URL)
    checks = {"redis": _timed(_redis, client), "database": _timed(_database)}
    if checks["redis"].ok and checks["database"].ok:
        checks["ingest"] = _timed(_ingest)
        checks["engines"] = _timed(_engines, client)
    else:
        for name in ("ingest", "engines"):
            checks[name] = Check(False, details={"error": "needs Redis and the database"})
    ready = all(check.ok for check in checks.values())
    return ready, {name: check.as_dict() for name, check in checks.items()}


def degraded(checks: dict[str, dict[str, Any]]) -> bool:
    """Ready, but some enabled engine is not healthy (see `_engines`)."""
    return bool(checks.get("engines", {}).get("unhealthy"))


def _timed(probe: Any, *args: Any) -> Check:
    started = time.perf_counter()
    try:
        check = probe(*args)
    except Exception as error:  # a probe reports every failure instead of raising
        check = Check(False, details={"error": f"{type(error).__name__}: {error}"})
    check.ms = (time.perf_counter() - started) * 1000
    return check


def _redis(client: redis.Redis) -> Check:
    """REDIS_URL and every index group's primary answer."""
    client.ping()
    groups = index_groups()
    if len(groups) == 1 and groups[0].is_app_redis:
        return Check(True)
    down = {}
    for group in groups:
        try:
            _probe_client(group.url).ping()
        except redis.RedisError as error:
            down[group.pattern] = f"{type(error).__name__}: {error}"
    details = {"groups": len(groups)} | ({"error": f"index groups down: {down}"} if down else {})
    return Check(not down, details=details)


def _database() -> Check:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return Check(True)


def _ingest() -> Check:
    """Per index group with enabled engines: a live worker (the fewest of any group counts)
    and the leases of its streams."""
    from kvadmin.engines.models import Engine

    enabled = Engine.objects.filter(enabled=True).values_list("pod", "model", "dp_size")
    by_group: dict[IndexGroup, list[str]] = {}
    for pod, model, dp_size in enabled:
        leases = [stream_lease_key(pod, stream_name(rank)) for rank in range(dp_size)]
        by_group.setdefault(group_of(model), []).extend(leases)
    if not by_group:
        return Check(True, details={"streams": 0})
    streams = held = 0
    workers: int | None = None
    for group, leases in by_group.items():  # each group's streams have their own leases
        pipe = _probe_client(group.url).pipeline(transaction=False)
        pipe.zcount(WORKERS_KEY, time.time() - knob("LEASE_SECONDS"), "+inf")
        for key in leases:
            pipe.exists(key)
        alive, *leased = pipe.execute()
        streams, held = streams + len(leases), held + sum(leased)
        workers = alive if workers is None else min(workers, alive)
    details = {"streams": streams, "leased": held, "workers": workers}
    if not workers:
        details["error"] = "no live ingest worker"
    elif not held:
        details["error"] = "no worker holds a stream lease"
    return Check(bool(workers and held), details=details)


UNHEALTHY_LISTED = 20


def _engines(client: redis.Redis) -> Check:
    engines = [e for e in registered_engines() if e.enabled]
    if not engines:
        return Check(True, details={"engines": 0})
    fleet = read_groups_fleet(engines, knob("LEASE_SECONDS"))
    facts = facts_of(engines, fleet.streams)
    healths = engine_healths(client, facts, fleet.taken_at)
    states: dict[str, int] = {}
    for health in healths.values():
        states[health.state.value] = states.get(health.state.value, 0) + 1
    unhealthy = sorted((h for h in healths.values() if not h.healthy), key=lambda h: h.pod)
    details: dict[str, Any] = {"engines": len(engines), "states": states}
    if unhealthy:
        details["unhealthy"] = {
            h.pod: {"state": h.state.value, "reason": h.reason}
            for h in unhealthy[:UNHEALTHY_LISTED]
        }
    healthy = len(engines) - len(unhealthy)
    if not healthy:
        details["error"] = "no engine is healthy: every one is unreachable or unobserved"
    return Check(bool(healthy), details=details)
