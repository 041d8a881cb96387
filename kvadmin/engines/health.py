"""Reading the evidence of each engine's health (`evidence`) from Redis in one round trip:
its probe HASH, its load's scrape time and last scrape failure. Its streams' statuses (with
their lease holders) come from the caller, who has read them already for its page."""

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import redis

from kvadmin.conf import knob
from kvadmin.engines.evidence import (
    EngineHealth,
    StreamFacts,
    Thresholds,
    engine_health,
    number,
)
from kvadmin.index.status import StreamStatus
from scoring import keys, load_hash


@dataclass(frozen=True, slots=True)
class EngineFacts:
    pod: str
    enabled: bool
    dp_size: int
    streams: Sequence[StreamStatus]
    """Its streams, as the caller read them."""


class Registered(Protocol):
    pod: str
    enabled: bool
    dp_size: int


def facts_of(engines: Iterable[Registered], streams: Iterable[StreamStatus]) -> list[EngineFacts]:
    """Each engine with its streams, from a fleet-wide read."""
    by_pod: dict[str, list[StreamStatus]] = {}
    for stream in streams:
        by_pod.setdefault(stream.pod, []).append(stream)
    return [EngineFacts(e.pod, e.enabled, e.dp_size, by_pod.get(e.pod, [])) for e in engines]


def thresholds() -> Thresholds:
    return Thresholds(
        stale_after=knob("HEALTH_STALE_SECONDS"),
        events_window=knob("HEALTH_EVENTS_SECONDS"),
        lag=knob("STREAM_LAG_SECONDS"),
    )


def engine_healths(
    client: redis.Redis, engines: Sequence[EngineFacts], now: float | None = None
) -> dict[str, EngineHealth]:
    """Each engine's health by pod."""
    now = time.time() if now is None else now
    if not engines:
        return {}
    pipe = client.pipeline(transaction=False)
    for engine in engines:
        pipe.hgetall(keys.engine_probe_key(engine.pod))
        load_hash.queue_read(pipe, engine.pod)
        pipe.hmget(keys.load_error_key(engine.pod), ["at", "reason", "message"])
    replies = iter(pipe.execute())
    limits = thresholds()
    healths = {}
    for engine in engines:
        probe, load, error = next(replies), load_hash.from_reply(next(replies)), next(replies)
        failed_at, reason, message = error
        facts = [
            StreamFacts(s.label, _consumed(engine, s), s.status, leased=bool(s.owner))
            for s in engine.streams
        ]
        healths[engine.pod] = engine_health(
            engine.pod,
            enabled=engine.enabled,
            probe=probe,
            streams=facts,
            scraped_at=load.scraped_at,
            scrape_failed_at=number(failed_at),
            scrape_failure=f"{reason}: {message}" if reason else "",
            thresholds=limits,
            now=now,
        )
    return healths


def _consumed(engine: EngineFacts, stream: StreamStatus) -> bool:
    """A ZMQ rank of an enabled engine: some worker should hold its lease and read it."""
    return engine.enabled and not stream.pushed and stream.rank < engine.dp_size
