"""Reading the evidence of each engine's health (`evidence`) from Redis in one round trip:
its probe HASH, its load's scrape time and last scrape failure, and its streams' leases. The
stream status hashes come from the caller, who has read them already for its page."""

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import redis

from kvadmin.conf import knob
from kvadmin.engines.evidence import (
    EngineHealth,
    StreamFacts,
    Thresholds,
    engine_health,
    number,
)
from kvadmin.index.streams import StreamId
from kvadmin.residency.streams import stream_label
from scoring import keys


@dataclass(frozen=True, slots=True)
class EngineFacts:
    pod: str
    enabled: bool
    dp_size: int
    streams: Sequence[tuple[StreamId, Mapping[str, str]]]
    """Its streams with their status hashes, as the caller read them."""


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
    consumed = {e.pod: [s for s, _ in e.streams if _consumed(e, s)] for e in engines}
    for engine in engines:
        pipe.hgetall(keys.engine_probe_key(engine.pod))
        pipe.hget(keys.load_key(engine.pod), "scraped_at")
        pipe.hmget(keys.load_error_key(engine.pod), ["at", "reason", "message"])
        for stream in consumed[engine.pod]:
            pipe.exists(keys.stream_lease_key(stream.pod, stream.name))
    replies = iter(pipe.execute())
    limits = thresholds()
    healths = {}
    for engine in engines:
        probe, scraped_at, error = next(replies), next(replies), next(replies)
        failed_at, reason, message = error
        leased = {stream: bool(next(replies)) for stream in consumed[engine.pod]}
        facts = [
            StreamFacts(
                stream_label(stream), stream in leased, status, leased=leased.get(stream, True)
            )
            for stream, status in engine.streams
        ]
        healths[engine.pod] = engine_health(
            engine.pod,
            enabled=engine.enabled,
            probe=probe,
            streams=facts,
            scraped_at=number(scraped_at),
            scrape_failed_at=number(failed_at),
            scrape_failure=f"{reason}: {message}" if reason else "",
            thresholds=limits,
            now=now,
        )
    return healths


def _consumed(engine: EngineFacts, stream: StreamId) -> bool:
    """A ZMQ rank of an enabled engine: some worker should hold its lease and read it."""
    return engine.enabled and not stream.pushed and stream.rank < engine.dp_size
