"""An engine's health from evidence, not from socket state.

A ZMQ SUB socket stays "connected" after its publisher dies (ZMQ reconnects silently and reports
nothing), so a stream's connected flag says nothing about whether anyone publishes. What does:

- the replay socket answering a probe within its timeout (`kvadmin.ingest.probes`);
- the engine's HTTP `/health` answering 200 (vLLM and SGLang serve it);
- its `/metrics` scrape (the load scraper's last success or failure);
- events arriving (the newest applied batch of its streams).

Each piece of evidence has the time it was observed. The states, in this order:

1. stale: no piece of evidence is younger than `stale_after` seconds (the probes stopped, and
   nothing arrives): nobody knows, so nobody may claim it is fine;
2. unreachable: the latest replay or /health probe failed (or, for an engine with neither, the
   latest scrape failed): a dead or partitioned engine;
3. lagging: a consumed stream is read by no worker, or its batches are applied late;
4. ok: events arrived within `events_window` seconds;
5. idle: reachable, but it had nothing to publish lately.

Pure: the reader (`health.engine_healths`) brings the evidence.
"""

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


class EngineState(enum.StrEnum):
    OK = "ok"
    IDLE = "idle"
    LAGGING = "lagging"
    UNREACHABLE = "unreachable"
    STALE = "stale"
    DISABLED = "disabled"


HEALTHY = frozenset({EngineState.OK, EngineState.IDLE, EngineState.LAGGING})
"""States in which the index follows the engine, if perhaps late: its scores can be trusted."""

SEVERITY = {
    EngineState.UNREACHABLE: 0,
    EngineState.STALE: 1,
    EngineState.LAGGING: 2,
    EngineState.IDLE: 3,
    EngineState.OK: 4,
    EngineState.DISABLED: 5,
}
"""Worst first, for lists that put what needs attention on top."""

REPLAY, HTTP, SCRAPE, EVENTS = "replay socket", "HTTP /health", "metrics scrape", "events"


@dataclass(frozen=True, slots=True)
class Evidence:
    name: str
    ok: bool | None
    """None: this kind of evidence is not available for the engine (not configured, or never
    observed)."""
    at: float | None
    """When it was observed (unix seconds)."""
    detail: str

    def age(self, now: float) -> float | None:
        return None if self.at is None else max(0.0, now - self.at)


@dataclass(frozen=True, slots=True)
class StreamFacts:
    """What the state needs of one stream: its label, whether a worker should read it (a ZMQ
    rank of an enabled engine), and its status hash (`kvadmin:stream:{pod}|{stream}`)."""

    label: str
    consumed: bool
    status: Mapping[str, str]
    leased: bool = True


@dataclass(frozen=True, slots=True)
class EngineHealth:
    pod: str
    state: EngineState
    reason: str
    evidence: tuple[Evidence, ...]
    taken_at: float

    @property
    def healthy(self) -> bool:
        return self.state in HEALTHY

    def as_dict(self) -> dict[str, object]:
        """For /readyz and the API: the state, why, and each piece of evidence with its age."""
        return {
            "state": self.state.value,
            "reason": self.reason,
            "evidence": [
                {
                    "name": e.name,
                    "ok": e.ok,
                    "age_seconds": None if e.at is None else round(e.age(self.taken_at) or 0, 1),
                    "detail": e.detail,
                }
                for e in self.evidence
            ],
        }


@dataclass(frozen=True, slots=True)
class Thresholds:
    stale_after: float
    """No evidence younger than this: stale."""
    events_window: float
    """Events younger than this: ok (otherwise idle)."""
    lag: float
    """A batch applied more than this after it was published is late (STREAM_LAG_SECONDS)."""


def _probe(name: str, probe: Mapping[str, str], prefix: str, unavailable: str) -> Evidence:
    at = number(probe.get(f"{prefix}_at"))
    if at is None:
        return Evidence(name, None, None, unavailable)
    if probe.get(f"{prefix}_ok") == "1":
        return Evidence(name, True, at, f"answered in {probe.get(f'{prefix}_ms', '?')} ms")
    return Evidence(name, False, at, probe.get(f"{prefix}_error") or "failed")


def _scrape(scraped_at: float | None, failed_at: float | None, failure: str) -> Evidence:
    if scraped_at is None and failed_at is None:
        return Evidence(SCRAPE, None, None, "no load scraped (no HTTP base URL, or not yet)")
    if failed_at is not None and (scraped_at is None or failed_at > scraped_at):
        return Evidence(SCRAPE, False, failed_at, failure or "failed")
    return Evidence(SCRAPE, True, scraped_at, "read the engine's load")


def _events(streams: Sequence[StreamFacts]) -> Evidence:
    applied = [number(s.status.get("last_event_at")) for s in streams]
    newest = max((t for t in applied if t is not None), default=None)
    if newest is None:
        return Evidence(EVENTS, None, None, "no batch applied yet")
    batches = sum(number(s.status.get("batches")) or 0 for s in streams)
    return Evidence(EVENTS, True, newest, f"{batches:.0f} batches applied in all")


def engine_health(
    pod: str,
    *,
    enabled: bool,
    probe: Mapping[str, str],
    streams: Sequence[StreamFacts],
    scraped_at: float | None,
    scrape_failed_at: float | None,
    scrape_failure: str,
    thresholds: Thresholds,
    now: float,
) -> EngineHealth:
    """The engine's state and the evidence it rests on (see the module's rules)."""
    replay = _probe(REPLAY, probe, "replay", "no replay endpoint registered")
    http = _probe(HTTP, probe, "http", "no HTTP base URL registered")
    scrape = _scrape(scraped_at, scrape_failed_at, scrape_failure)
    events = _events(streams)
    evidence = (replay, http, scrape, events)

    def health(state: EngineState, reason: str) -> EngineHealth:
        return EngineHealth(pod, state, reason, evidence, now)

    if not enabled:
        return health(EngineState.DISABLED, "disabled in the registry: not read")
    fresh = [e for e in evidence if e.at is not None and now - e.at <= thresholds.stale_after]
    if not fresh:
        return health(EngineState.STALE, f"no evidence in the last {thresholds.stale_after:g} s")
    decisive = [e for e in (replay, http) if e.ok is not None] or [scrape]
    failed = [e for e in decisive if e.ok is False and e in fresh]
    if failed:
        return health(EngineState.UNREACHABLE, "; ".join(f"{e.name}: {e.detail}" for e in failed))
    for stream in streams:
        if stream.consumed and (stream.status.get("connected") != "1" or not stream.leased):
            return health(EngineState.LAGGING, f"{stream.label}: no worker reads it")
        lag = number(stream.status.get("lag_seconds"))
        applied = number(stream.status.get("last_event_at"))
        if (
            lag is not None
            and applied is not None
            and lag > thresholds.lag
            and now - applied <= 2 * thresholds.lag
        ):
            return health(EngineState.LAGGING, f"{stream.label}: batches applied {lag:.1f} s late")
    if events.at is not None and now - events.at <= thresholds.events_window:
        return health(EngineState.OK, "publishing")
    return health(
        EngineState.IDLE, f"reachable, no events in the last {thresholds.events_window:g} s"
    )


def number(text: str | bytes | None) -> float | None:
    """A Redis field as a float; None when absent or not a number."""
    try:
        return float(text) if text else None
    except ValueError:
        return None
