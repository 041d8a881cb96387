"""What the dashboard shows, read from Redis (and the engine registry) in a few round trips.

Rates need two points in time. The beat task (`tasks.publish_tiles`, every ~2 s) appends a
sample of the fleet's running totals to a short Redis list; a rate is the difference between
now and the oldest sample of the last RATE_WINDOW seconds. The sample list lives in Redis, not
in a process, so any worker can take the next sample and any web replica can render the page.
A stream is "degraded" while its fault counters grew within the last FAULT_WINDOW seconds.
"""

import json
import time
from dataclasses import dataclass, field

import redis
from django.urls import NoReverseMatch, reverse

from kvadmin.conf import knob
from kvadmin.engines.evidence import SEVERITY, EngineHealth, EngineState
from kvadmin.engines.health import engine_healths, facts_of
from kvadmin.index import gc
from kvadmin.metrics import families
from kvadmin.metrics.families import BUCKET_SEPARATOR, label_values
from kvadmin.metrics.fleet import FleetState, Health, read_groups_fleet, registered_engines
from kvadmin.metrics.history import HitChart, ratios
from kvadmin.metrics.recorder import hits_key, outcome_minute_key
from scoring import keys
from scoring.weights import TierWeights

SAMPLES_KEPT = 90
RATE_WINDOW = 10.0
FAULT_WINDOW = 60.0
CHART_MINUTES = 60
DETAIL_PAGES = {"pods": "/pods/", "blocks": "/blocks/", "feed": "/feed/", "weights": "/weights/"}
ENGINE_ROWS = 12
"""Engines listed on the tile, worst health first; the rest are counted."""

_SEVERITY = {
    Health.DISCONNECTED: 0,
    Health.DEGRADED: 1,
    Health.LAGGING: 2,
    Health.OK: 3,
}
_MEDIUM_ORDER = TierWeights()


@dataclass(frozen=True, slots=True)
class EngineStatus:
    pod: str
    model: str
    kind: str
    enabled: bool
    health: str
    """The worst of its streams' health; "disabled" for a disabled engine."""
    streams: list[tuple[int, str]]
    """(rank, health) per consumed stream."""
    blocks: int
    evidence: EngineHealth
    """The engine's own state, from evidence of life (engines.evidence), not socket state."""

    @property
    def state(self) -> str:
        return self.evidence.state.value


@dataclass(frozen=True, slots=True)
class DeliveredHits:
    """The last hour's outcomes (`routing.outcomes`) in cached tokens, fleet-wide or for one
    model and pod: what the best candidate offered, what the chosen pod was predicted to hit,
    what its engine reported."""

    model: str
    pod: str
    outcomes: int
    prompt: int
    available: int
    achieved: int
    delivered: int
    ttft_ms: float = 0.0
    """Sum of the reported times to first token, over the `timed` outcomes that had one."""
    predicted_ttft_ms: float = 0.0
    """Sum of their chosen pods' predicted times to first token."""
    timed: int = 0

    @property
    def mean_ttft_ms(self) -> float | None:
        return self.ttft_ms / self.timed if self.timed else None

    @property
    def mean_predicted_ttft_ms(self) -> float | None:
        return self.predicted_ttft_ms / self.timed if self.timed else None

    @property
    def routing_loss(self) -> int:
        return self.available - self.achieved

    @property
    def index_staleness(self) -> int:
        """achieved - delivered. Negative when engines hit more than predicted: a score looks
        at the first MAX_BLOCKS blocks only (kthena's rule), so the longer prompts' further
        hits are never predicted, and blocks stored but not yet ingested are not either."""
        return self.achieved - self.delivered

    @property
    def index_staleness_abs(self) -> int:
        return abs(self.index_staleness)


@dataclass(slots=True)
class Tiles:
    taken_at: float
    engines: list[EngineStatus]
    more_engines: int
    health_counts: dict[str, int]
    state_counts: dict[str, int]
    """Enabled engines per evidence state (engines.evidence.EngineState)."""
    healthy_engines: int
    enabled_engines: int
    media: list[tuple[str, int, float]]
    """(medium, blocks, percent of the largest) across the fleet, largest first."""
    total_blocks: int
    streams: int
    connected: int
    workers: int
    events_per_s: float | None
    blocks_per_s: float | None
    decisions_per_s: float | None
    decisions_hour: int
    hit_ratio_hour: float | None
    hit_ratio_by_medium: list[tuple[str, float]]
    chart: HitChart
    gc_last: gc.GcReport | None
    gc_totals: dict[str, int]
    delivered: DeliveredHits
    delivered_by_pod: list[DeliveredHits]
    gc_age: float | None = None
    gc_next_in: float | None = None
    links: dict[str, str] = field(default_factory=dict)

    @property
    def max_blocks(self) -> int:
        """Blocks a score looks at, at most (what a negative index staleness is about)."""
        return knob("MAX_BLOCKS")

    @property
    def block_size(self) -> int:
        return knob("BLOCK_SIZE")

    @property
    def scored_tokens(self) -> int:
        return self.max_blocks * self.block_size


def dashboard_tiles(client: redis.Redis, record_sample: bool = False) -> Tiles:
    """Everything on the dashboard; with `record_sample`, also remember this moment's totals
    for the next rates (the beat task does, page views do not)."""
    now = time.time()
    fleet = read_groups_fleet(registered_engines(), knob("LEASE_SECONDS"), now)
    pipe = client.pipeline(transaction=False)
    pipe.lrange(keys.DASHBOARD_SAMPLES_KEY, 0, -1)
    pipe.hvals(families.DECISIONS.key)
    minute = int(now // 60)
    minutes = list(range(minute - CHART_MINUTES + 1, minute + 1))
    for m in minutes:
        pipe.hgetall(hits_key(m))
    for m in minutes:
        pipe.hgetall(outcome_minute_key(m))
    samples_raw, decisions_raw, *buckets = pipe.execute()
    per_minute, outcome_minutes = buckets[: len(minutes)], buckets[len(minutes) :]
    samples = [json.loads(raw) for raw in samples_raw]
    current = _sample(fleet, sum(int(v) for v in decisions_raw), now)
    if record_sample:
        pipe.lpush(keys.DASHBOARD_SAMPLES_KEY, json.dumps(current, separators=(",", ":")))
        pipe.ltrim(keys.DASHBOARD_SAMPLES_KEY, 0, SAMPLES_KEPT - 1)
        pipe.execute()

    recent_faults = _fault_growth(current, samples)
    tiles = Tiles(
        taken_at=now,
        **_engines(client, fleet, recent_faults, now),
        **_media(fleet),
        streams=sum(1 for s in fleet.streams if s.consumed),
        connected=sum(1 for s in fleet.streams if s.consumed and s.connected),
        workers=fleet.workers,
        events_per_s=_rate(current, samples, "events"),
        blocks_per_s=_rate(current, samples, "blocks"),
        decisions_per_s=_rate(current, samples, "decisions"),
        **_hits(minutes, per_minute),
        **_delivered(outcome_minutes),
        gc_last=gc.last_run(client),
        gc_totals=gc.totals(client),
    )
    if tiles.gc_last is not None:
        tiles.gc_age = max(0.0, now - tiles.gc_last.finished_at)
        due_at = tiles.gc_last.started_at + knob("GC_INTERVAL_SECONDS")
        tiles.gc_next_in = max(0.0, due_at - now)
    tiles.links = _links()
    return tiles


def _links() -> dict[str, str]:
    """Detail pages by url name, or their planned path while their app does not route them."""
    links = {}
    for name, path in DETAIL_PAGES.items():
        try:
            links[name] = reverse(name)
        except NoReverseMatch:
            links[name] = path
    return links


def _sample(fleet: FleetState, decisions: int, now: float) -> dict:
    return {
        "t": now,
        "events": fleet.totals("events"),
        "blocks": fleet.totals("blocks_stored", "blocks_removed"),
        "decisions": decisions,
        "faults": {str(s.id): s.faults for s in fleet.streams},
    }


def _baseline(samples: list[dict], now: float, window: float) -> dict | None:
    """The oldest sample within `window` seconds (at least half a second old)."""
    found = None
    for sample in samples:
        age = now - sample["t"]
        if 0.5 <= age <= window:
            found = sample
    return found


def _rate(current: dict, samples: list[dict], name: str) -> float | None:
    base = _baseline(samples, current["t"], RATE_WINDOW)
    if base is None:
        return None
    return max(0, current[name] - base[name]) / (current["t"] - base["t"])


def _fault_growth(current: dict, samples: list[dict]) -> dict[str, int]:
    base = _baseline(samples, current["t"], FAULT_WINDOW)
    if base is None:
        return {}
    before = base["faults"]
    return {sid: n - before.get(sid, n) for sid, n in current["faults"].items()}


def _engines(
    client: redis.Redis, fleet: FleetState, recent_faults: dict[str, int], now: float
) -> dict:
    lag = knob("STREAM_LAG_SECONDS")
    facts = facts_of(fleet.engines, fleet.streams)
    evidence = engine_healths(client, facts, now)
    by_pod: dict[str, list[tuple[int, str]]] = {}
    for stream in fleet.streams:
        if stream.consumed:
            health = stream.health(recent_faults.get(str(stream.id), 0), lag, now)
            by_pod.setdefault(stream.id.pod, []).append((stream.id.rank, health.value))
    blocks: dict[str, int] = {}
    for (pod, _), count in fleet.blocks.items():
        blocks[pod] = blocks.get(pod, 0) + count
    engines = []
    for engine in fleet.engines:
        streams = by_pod.get(engine.pod, [])
        health = (
            min((Health(h) for _, h in streams), key=_SEVERITY.__getitem__).value
            if engine.enabled and streams
            else "disabled"
        )
        engines.append(
            EngineStatus(
                engine.pod,
                engine.model,
                engine.kind,
                engine.enabled,
                health,
                streams,
                blocks.get(engine.pod, 0),
                evidence[engine.pod],
            )
        )
    counts = {h.value: 0 for h in Health}
    states = {s.value: 0 for s in EngineState if s is not EngineState.DISABLED}
    for engine in engines:
        if engine.enabled:
            counts[engine.health] += 1
            states[engine.state] += 1
    engines.sort(
        key=lambda e: (
            SEVERITY[e.evidence.state],
            _SEVERITY.get(Health(e.health), 9) if e.enabled else 9,
            e.pod,
        )
    )
    enabled = [e for e in engines if e.enabled]
    return {
        "engines": engines[:ENGINE_ROWS],
        "more_engines": max(0, len(engines) - ENGINE_ROWS),
        "health_counts": counts,
        "state_counts": states,
        "healthy_engines": sum(1 for e in enabled if e.evidence.healthy),
        "enabled_engines": len(enabled),
    }


def _media(fleet: FleetState) -> dict:
    totals = fleet.blocks_by_medium()
    largest = max(totals.values(), default=0) or 1
    media = sorted(totals.items(), key=lambda item: _MEDIUM_ORDER.medium_rank(item[0] or None))
    return {
        "media": [(medium, count, 100 * count / largest) for medium, count in media],
        "total_blocks": sum(totals.values()),
    }


def _hits(minutes: list[int], per_minute: list[dict]) -> dict:
    """The last hour's chart, minute by minute, and its totals: decisions, and the share of
    requested blocks the chosen pods already held, overall and per medium."""
    chart = ratios(minutes, per_minute, step=1)
    blocks_hour = sum(int(row.get("blocks", 0)) for row in per_minute)
    matched = {m: sum(int(row.get(f"m:{m}", 0)) for row in per_minute) for m in chart.media}
    return {
        "decisions_hour": sum(int(row.get("decisions", 0)) for row in per_minute),
        "hit_ratio_hour": sum(matched.values()) / blocks_hour if blocks_hour else None,
        "hit_ratio_by_medium": [(m, n / blocks_hour) for m, n in matched.items() if blocks_hour],
        "chart": chart,
    }


def _delivered(per_minute: list[dict[str, str]]) -> dict:
    """The hour's outcome tallies, fleet-wide and per model and pod (most outcomes first)."""
    by_pod: dict[tuple[str, str], dict[str, float]] = {}
    for row in per_minute:
        for name, amount in row.items():
            labels, _, tally = name.rpartition(BUCKET_SEPARATOR)
            model, pod = [*label_values(labels), "", ""][:2]
            tallies = by_pod.setdefault((model, pod), {})
            tallies[tally] = tallies.get(tally, 0) + float(amount)
    rows = [_delivered_row(model, pod, t) for (model, pod), t in by_pod.items()]
    rows.sort(key=lambda r: (-r.outcomes, r.model, r.pod))
    total = {name: sum(getattr(r, name) for r in rows) for name in _TALLIES + _TIMINGS}
    return {"delivered": DeliveredHits("", "", **total), "delivered_by_pod": rows}


_TALLIES = ("outcomes", "prompt", "available", "achieved", "delivered")
_TIMINGS = ("ttft_ms", "predicted_ttft_ms", "timed")


def _delivered_row(model: str, pod: str, tallies: dict[str, float]) -> DeliveredHits:
    """One pod's tallies; the timed outcomes are counted with each timing (`ttft_ms_n`)."""
    return DeliveredHits(
        model,
        pod,
        **{name: int(tallies.get(name, 0)) for name in _TALLIES},
        ttft_ms=tallies.get("ttft_ms", 0.0),
        predicted_ttft_ms=tallies.get("predicted_ttft_ms", 0.0),
        timed=int(tallies.get("ttft_ms_n", 0)),
    )
