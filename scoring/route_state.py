"""The routing state the `ttft` policy needs beside the index, as read and as priced.

Per candidate pod, kvadmin keeps in its own keys (scoring.keys):
- a virtual queue (`queue_key`): when the prefills kvadmin routed to the pod are predicted to be
  done (`busy_until_ms`), and a moving mean of their predicted prefill (`prefill_ms`);
- the requests in flight (`in_flight_key`): predicted prefill end per routed request;
- speculative entries (`speculative_key`, per model: block -> a group of (pod, expiry) entries):
  blocks just routed to a pod, not yet stored;
- and reads the engines' own load (`load_key`), written by the /metrics scraper.

Both index readers (scoring.index) read these in the walk's round trip and give the same
`RouteState`; route_record.lua advances them with the decision log entry. This module turns
what was read into the policy's inputs (`PodLoad`, speculative blocks). Pure: no Redis.

Speculative entries are read up to each pod's reach (`speculative_positions`): an entry past the
first block the pod neither holds in its matched run nor has an entry for cannot extend its
match (scoring.policy.matched_runs), so the readers stop there, and a decision costs Redis the
blocks some candidate reaches rather than every block of every candidate.

Predicted wait (the resync rule): the virtual queue's wait, `max(0, busy_until - now)`. Every
scrape restarts the queue from the engine's own (queue_resync.lua, run by the scraper with the
load it writes): `busy_until = now + waiting * mean predicted prefill`, so requests kvadmin did
not route (other routers, retries) and prefills slower or faster than predicted stop drifting
it, and what kvadmin routes after the scrape adds to it. When the engine's load is fresh
(scraped at most `fresh_s` ago), its queue is also a floor: `max(queue wait, waiting * mean -
the scrape's age)` (a queue key that expired meanwhile, or a scrape the resync missed); the
engine's `running` prices the decode slowdown. When the load is stale or absent, the virtual
queue alone counts, the requests in flight stand for `running`, and the pod's load is flagged
stale.

The wait so blended is then corrected by what the pod delivered: the queue hash keeps the log of
a per-pod factor (`wait_log`), which outcome_record.lua moves with every outcome whose predicted
wait was a real part of its predicted TTFT (`corrected_wait_log`, the rule both follow): toward
the wait the pod actually imposed (delivered TTFT minus the predicted prefill) over the
predicted wait, as the factor now would have predicted it (an outcome comes a queue's length of
outcomes after its decision: stepped against the decision's own wait, the factor swung). Queues
under-predict more as load grows (each prefill predicted a little short adds to every later one's
wait, and engines serve what kvadmin did not route), so a constant factor of the wait, learned
per pod, holds where a constant offset would not. The step is a bounded share of the log ratio
(one outlier moves the factor by at most WAIT_STEP_BOUND * WAIT_LEARNING), and the factor stays
within WAIT_FACTOR_BOUNDS whatever outcomes say.

The outcomes the wait rule leaves out, whose delivered time is about the prefill, correct the
pod's prefill estimates (`PrefillFit`, `corrected_prefill_fit`): a line through what the pod
took against what the parameters predicted, delivered = offset + factor * predicted. A factor
alone learns a fixed latency (the gateway's, the network's: about 20 ms of every delivered TTFT
through Envoy) as a multiplier, pricing cache misses up to 1.9x what they cost and cheap hits
short; the offset takes it apart. The factor stays within PREFILL_FACTOR_BOUNDS, the offset
within PREFILL_OFFSET_BOUNDS; both are learned against the weights version they were priced
with: a later version restarts them, and a reader pricing with another version ignores them.
"""

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import msgspec

from scoring.keys import in_flight_key, load_key, queue_key
from scoring.policy import PodLoad
from scoring.scripts import script

QUEUE_RESYNC: Final = script("queue_resync")
"""Restarts a pod's virtual queue from its engine's waiting requests (the resync rule)."""
MAX_LOAD_COUNT: Final = 1_000_000
"""More running or waiting requests than any engine holds: the scrape is not believed."""
WAIT_FACTOR_BOUNDS: Final = (0.5, 4.0)
"""The delivered correction never more than halves a wait, nor more than quadruples it."""
WAIT_LEARNING: Final = 0.05
"""The share of an outcome's log ratio a step takes: about the last 20 outcomes count."""
WAIT_STEP_BOUND: Final = math.log(2.0)
"""An outcome's log ratio is taken at most this far (a hung request, a clock jump)."""
WAIT_MIN_SHARE: Final = 0.2
"""An outcome teaches the wait only when the predicted wait was at least this share of its
predicted TTFT; below it, the delivered time is about the prefill, and teaches the prefill."""
PREFILL_FACTOR_BOUNDS: Final = (0.5, 3.0)
"""The delivered correction never more than halves a prefill estimate, nor more than triples
it (about the range of GPUs one model's pods run on: calibration fits the rest)."""
PREFILL_OFFSET_BOUNDS: Final = (-0.02, 0.25)
"""Seconds the delivered prefill correction adds to every prefill estimate, at most: a latency
outside the pod's work (a gateway, a network hop), or a T0 calibration has not caught up with.
A corrected estimate is never below half its factor's (`PrefillEstimate.corrected`)."""
PREFILL_OFFSET_MIN_OUTCOMES: Final = 10
"""Outcomes a pod's correction takes in before it fits an offset (the factor alone before)."""
PREFILL_OFFSET_RIDGE: Final = 0.02
"""How strongly the fit prefers no offset: it holds the offset near 0 while the predictions it
learned from barely differ (a line through points of one size has no intercept to find)."""


@dataclass(frozen=True, slots=True)
class StateRequest:
    """What to read beside the walk: the state of `pods` for `model`'s blocks."""

    model: str
    pods: Sequence[str]
    in_flight_window_ms: int
    """A routed request counts as in flight until this long after its predicted prefill end
    (its decode)."""
    now_ms: int | None = None
    """Unix ms to read at; None: Redis' clock, the one the queue is advanced with."""


class RawPodState(msgspec.Struct, frozen=True):
    """One pod's state exactly as Redis holds it (untrusted text where the scraper wrote it).

    This and the load types below are frozen msgspec Structs rather than frozen dataclasses:
    a decision builds several per candidate, and a frozen dataclass sets each field through
    `object.__setattr__` (its __init__ 1.7 us against 0.2 us; `decide` lost a fifth of its
    CPU)."""

    busy_until_ms: str | None = None
    prefill_ms: str | None = None
    wait_log: str | None = None
    """The log of the pod's delivered wait correction (`corrected_wait_log`)."""
    prefill_log: str | None = None
    """The log of the factor of the pod's delivered prefill correction (`PrefillFit`)."""
    prefill_offset: str | None = None
    """The offset of the same, in seconds."""
    prefill_version: str | None = None
    """The weights version `prefill_log` and `prefill_offset` were learned against."""
    in_flight: int = 0
    running: str | None = None
    waiting: str | None = None
    kv_usage: str | None = None
    scraped_at: str | None = None
    speculative: tuple[int, ...] = ()
    """0-based positions of the request's blocks with an unexpired speculative entry for the
    pod, up to its reach (`speculative_positions`)."""


@dataclass(frozen=True, slots=True)
class RouteState:
    now_ms: int
    pods: Mapping[str, RawPodState]


class ScrapedLoad(msgspec.Struct, frozen=True):
    running: int
    waiting: int
    kv_usage: float
    scraped_at: float


class LoadReading(msgspec.Struct, frozen=True):
    """A pod's load as priced, and what it came from (for the decision's explanation)."""

    load: PodLoad
    queue_wait_s: float
    """The virtual queue's own wait."""
    engine_waiting: int | None
    """The engine's waiting requests when its load was fresh, else None."""
    load_age_s: float | None
    """How old the scrape was (None: no usable scrape)."""
    recent_work_s: float = 0.0
    """What kvadmin routed to the pod lately: its requests in flight times the mean predicted
    prefill (`RouteRequest.recent_work`, which breaks the policy's ties)."""
    wait_factor: float = 1.0
    """The delivered correction the wait was multiplied by."""
    prefill_factor: float = 1.0
    """The delivered correction the pod's prefill estimates are multiplied by."""
    prefill_offset: float = 0.0
    """The seconds the delivered correction adds to them."""


def state_keys(pod: str) -> list[str]:
    """The three keys of one pod, in the order prefix_walk.lua reads them (the model's
    speculative hash follows the last pod's)."""
    return [queue_key(pod), in_flight_key(pod), load_key(pod)]


def speculative_entries(group: str | None) -> dict[str, float]:
    """One group of `speculative_groups_key` (route_record.lua writes it): pod -> expiry in
    unix ms; {} for none."""
    if group is None:
        return {}
    items = json.loads(group)
    return {pod: float(expiry) for pod, expiry in zip(items[::2], items[1::2], strict=True)}


def speculative_positions(
    entries: Sequence[Mapping[str, float]], runs: Mapping[str, int], pod: str, now_ms: int
) -> tuple[int, ...]:
    """The 0-based positions whose `entries` (per block of the request, pod -> expiry) hold
    an unexpired entry for `pod`, up to its reach: the first block past its matched run (`runs`:
    blocks matched per pod) without one. prefix_walk.lua applies the same rule."""
    run, positions = runs.get(pod, 0), []
    for position, block_entries in enumerate(entries):
        if block_entries.get(pod, -math.inf) > now_ms:
            positions.append(position)
        elif position >= run:
            break
    return tuple(positions)


def scraped_load(raw: RawPodState) -> ScrapedLoad | None:
    """The scraper's fields, None when any is missing or not a sane number."""
    running, waiting = _count(raw.running), _count(raw.waiting)
    usage, at = _number(raw.kv_usage), _number(raw.scraped_at)
    if running is None or waiting is None or usage is None or at is None:
        return None
    return ScrapedLoad(running, waiting, min(max(usage, 0.0), 1.0), at)


def load_reading(
    raw: RawPodState, now_ms: int, fresh_s: float, fallback_prefill_s: float, version: int
) -> LoadReading:
    """The pod's `PodLoad` under the resync rule of the module docstring, priced with the
    weights `version` in effect. The mean predicted prefill is the queue's moving mean, or
    `fallback_prefill_s` before the pod has one."""
    busy_until = _number(raw.busy_until_ms)
    queue_wait = max(0.0, (busy_until - now_ms) / 1000) if busy_until is not None else 0.0
    prefill, offset = 1.0, 0.0  # a pod that learned nothing against `version` (most)
    if raw.prefill_version is not None and _number(raw.prefill_version) == version:
        prefill = delivered_factor(raw.prefill_log, PREFILL_FACTOR_BOUNDS)
        offset = _bounded(_number(raw.prefill_offset), PREFILL_OFFSET_BOUNDS)
    mean_ms = _number(raw.prefill_ms)
    mean = mean_ms / 1000 if mean_ms is not None and mean_ms >= 0 else fallback_prefill_s * prefill
    recent = max(raw.in_flight, 0) * mean
    factor = delivered_factor(raw.wait_log, WAIT_FACTOR_BOUNDS)
    scraped = scraped_load(raw)
    age = now_ms / 1000 - scraped.scraped_at if scraped is not None else None
    if scraped is None or age is None or not -fresh_s <= age <= fresh_s:
        wait = queue_wait * factor
        load = PodLoad(wait, raw.in_flight, True, _queued(wait, mean), prefill, offset)
        return LoadReading(load, queue_wait, None, age, recent, factor, prefill, offset)
    wait = max(queue_wait, scraped.waiting * mean - max(age, 0.0)) * factor
    queued = max(scraped.waiting, _queued(wait, mean))
    load = PodLoad(wait, scraped.running, False, queued, prefill, offset)
    return LoadReading(load, queue_wait, scraped.waiting, age, recent, factor, prefill, offset)


def delivered_factor(log: str | None, bounds: tuple[float, float]) -> float:
    """The delivered correction a queue hash's `wait_log` or `prefill_log` stands for (1
    without one), within its `bounds`."""
    value = _number(log)
    low, high = bounds
    return 1.0 if value is None else min(max(math.exp(min(value, 10.0)), low), high)


def corrected_wait_log(
    wait_log: float,
    predicted_wait_s: float,
    predicted_prefill_s: float,
    delivered_s: float,
    decided_log: float,
) -> float:
    """The pod's `wait_log` after one outcome: the decision predicted `predicted_wait_s`
    (corrected already, by the factor whose log was `decided_log`) and `predicted_prefill_s`,
    the pod delivered its first token after `delivered_s`. outcome_record.lua applies the same
    rule; this is its reference.

    The step is taken against the wait as the factor holds it now (`predicted_wait_s` times
    exp(wait_log - decided_log)), not as the decision priced it: the log so moves a share of the
    way to the log ratio of the imposed wait to the uncorrected one, a moving mean of what
    outcomes measured. Taken against the decision's own wait, the factor integrated each
    outcome's residual, and an outcome arrives as many outcomes after its decision as requests
    were queued ahead of it on the pod: once queues held more than about 1 / (WAIT_LEARNING *
    2/pi) = 30 requests, the integrator's loop gain passed its stability limit and the factor
    swung between its bounds (issue 33, the sustained hard case at 0.8 load: factors at 0.5 and
    4x on pods whose true ratio was 1-1.5, warm pods priced seconds busier than they were,
    prefixes spread; a larger learning share lowered the limit and made it worse). A wait the
    pod did not impose at all (delivered no later than the prefill alone) counts as the factor's
    lower bound."""
    predicted = predicted_wait_s + predicted_prefill_s
    if not predicted_wait_s > 0 or predicted_wait_s < WAIT_MIN_SHARE * predicted:
        return wait_log
    imposed = delivered_s - predicted_prefill_s
    now = predicted_wait_s * math.exp(wait_log - decided_log)
    return _stepped(wait_log, imposed, now, WAIT_FACTOR_BOUNDS)


class PrefillFit(msgspec.Struct, frozen=True):
    """A pod's delivered prefill correction and what it was fitted from: the prefill the pod took
    (delivered less the predicted wait) against the one the parameters predicted (`predicted`,
    before any correction), as exponentially weighted means (each outcome weighs
    WAIT_LEARNING: about the last twenty count). The queue hash keeps the correction in
    `prefill_log` and `prefill_offset` (what the walk reads), the means in `prefill_fit`.

    The means start as the correction in effect would have them (the prior: took = predicted,
    no spread), so a pod's first outcomes move the factor a twentieth of the way each, as a
    ratio's step would, and the offset appears only as predictions of different sizes come in
    (PREFILL_OFFSET_MIN_OUTCOMES of them at least)."""

    log: float = 0.0
    """The log of the factor."""
    offset_s: float = 0.0
    version: int | None = None
    """The weights version the correction was learned against (None: never)."""
    outcomes: int = 0
    means: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    """E[predicted], E[took], E[predicted^2], E[predicted * took]."""

    @property
    def factor(self) -> float:
        return math.exp(self.log)

    def stored(self) -> str:
        """`prefill_fit` as the queue hash keeps it: the outcomes, then the means."""
        return " ".join([str(self.outcomes), *(f"{mean:.17g}" for mean in self.means)])

    @classmethod
    def read(cls, log: str | None, offset: str | None, version: str | None, fit: str | None):
        """The fit the queue hash's fields stand for (a part that does not parse: none)."""
        learned, parts = _number(version), (fit or "").split()
        numbers = [_number(part) for part in parts]
        if learned is None or len(parts) != 5 or None in numbers:
            return cls()
        means = tuple(numbers[1:])
        return cls(_number(log) or 0.0, _number(offset) or 0.0, int(learned), int(numbers[0]),
                   means)  # type: ignore[arg-type]  # fmt: skip


def uncorrected_prefill(prefill_s: float, factor: float, offset_s: float) -> float:
    """The prefill the parameters predicted, before the delivered correction (`factor`,
    `offset_s`) the estimate `prefill_s` includes: what an outcome's fit regresses on."""
    return (prefill_s - offset_s) / max(factor, PREFILL_FACTOR_BOUNDS[0])


def corrected_prefill_fit(
    held: PrefillFit,
    version: int,
    predicted_wait_s: float,
    predicted_prefill_s: float,
    uncorrected_prefill_s: float,
    delivered_s: float,
) -> PrefillFit:
    """The pod's `PrefillFit` after one outcome of a decision priced with weights `version`
    that predicted `predicted_wait_s` and `predicted_prefill_s` (the correction in effect
    included; `uncorrected_prefill_s` without it), delivered after `delivered_s`.
    outcome_record.lua applies the same rule; this is its reference.

    1. The outcomes the wait rule teaches are left out (their delivered time is about the
       wait), and so are those of an earlier version than the fit's.
    2. A later version starts the fit again from no correction: calibration has just moved
       the parameters, most likely by what the correction had learned. Without the restart, a
       factor learned while calibration had no fit yet went on multiplying the fitted
       parameters: predictions 15-20% long for a while.
    3. What the pod took is taken within [0.5, 2] times the prediction (a hung request, a
       clock jump: one outlier moves the means a bounded step).
    4. The means move by WAIT_LEARNING towards the outcome's.
    5. The line: least squares of took on predicted, with a ridge on the offset (none at all
       before PREFILL_OFFSET_MIN_OUTCOMES), the factor then bounded, the offset fitted to the
       bounded factor and bounded.

    Calibration fits the parameters from the same evidence, but a step at a time every few
    seconds, per model or per pod once enough windows have come; this correction follows a pod
    within about twenty outcomes, so that its queue (a sum of its predicted prefills) does not
    fall behind a pod slower than its parameters meanwhile."""
    predicted = predicted_wait_s + predicted_prefill_s
    x = uncorrected_prefill_s
    if not (predicted_prefill_s > 0 and x > 0) or (
        predicted_wait_s > 0 and predicted_wait_s >= WAIT_MIN_SHARE * predicted
    ):
        return held
    if held.version is not None and held.version > version:
        return held
    if held.version != version or not held.outcomes:
        held = PrefillFit(version=version, means=(x, x, x * x, x * x))
    took = delivered_s - max(predicted_wait_s, 0.0)
    low = PREFILL_FACTOR_BOUNDS[0] * predicted_prefill_s
    y = min(max(took, low), predicted_prefill_s * math.exp(WAIT_STEP_BOUND))
    mx, my, mxx, mxy = (
        mean + WAIT_LEARNING * (value - mean)
        for mean, value in zip(held.means, (x, y, x * x, x * y), strict=True)
    )
    outcomes = min(held.outcomes + 1, MAX_LOAD_COUNT)
    log, offset = _line(outcomes, mx, my, mxx, mxy)
    return PrefillFit(log, offset, version, outcomes, (mx, my, mxx, mxy))


def _line(outcomes: int, mx: float, my: float, mxx: float, mxy: float) -> tuple[float, float]:
    """(log factor, offset) of step 5 of `corrected_prefill_fit`."""
    if outcomes < PREFILL_OFFSET_MIN_OUTCOMES:
        factor = mxy / mxx
    else:
        ridge = 1.0 + PREFILL_OFFSET_RIDGE
        factor = (ridge * mxy - mx * my) / (ridge * mxx - mx * mx)
    low, high = PREFILL_FACTOR_BOUNDS
    factor = min(max(factor, low), high)
    offset = 0.0
    if outcomes >= PREFILL_OFFSET_MIN_OUTCOMES:
        offset = _bounded((my - factor * mx) / (1.0 + PREFILL_OFFSET_RIDGE), PREFILL_OFFSET_BOUNDS)
    return math.log(factor), offset


def _bounded(value: float | None, bounds: tuple[float, float]) -> float:
    """`value` within `bounds` (0 for none)."""
    return 0.0 if value is None else min(max(value, bounds[0]), bounds[1])


def _stepped(log: float, delivered: float, predicted: float, bounds: tuple[float, float]) -> float:
    """The wait correction's step: `log` moved by WAIT_LEARNING of the log ratio of
    `delivered` to `predicted` (floored at the lower bound, taken at most WAIT_STEP_BOUND),
    kept within `bounds`."""
    low, high = (math.log(bound) for bound in bounds)
    ratio = math.log(max(delivered, predicted * bounds[0]) / predicted)
    step = min(max(ratio, -WAIT_STEP_BOUND), WAIT_STEP_BOUND)
    return min(max(log + WAIT_LEARNING * step, low), high)


def resynced_busy_until(
    busy_until_ms: float, now_ms: float, waiting: int, running: int, mean_ms: float
) -> float:
    """The virtual queue's `busy_until_ms` restarted from a scrape (the resync rule):
    queue_resync.lua applies the same rule; this is its reference.

    The engine's waiting requests are priced at the queue's mean predicted prefill. A prefill
    already running at the scrape is not among them: it is the part of the virtual queue's own
    remaining work beyond the waiting requests', at most one mean prefill, and only while the
    engine runs anything (an engine running nothing is idle, whatever the queue predicted)."""
    waiting_ms = max(waiting, 0) * mean_ms
    running_ms = 0.0
    if running > 0:
        running_ms = min(max(busy_until_ms - now_ms - waiting_ms, 0.0), mean_ms)
    return now_ms + waiting_ms + running_ms


def _queued(wait_s: float, mean_s: float) -> float:
    """Requests ahead on the pod: its wait in mean prefills."""
    return wait_s / mean_s if mean_s > 0 else 0.0


def speculative_blocks(state: RouteState, blocks: Sequence[int]) -> dict[str, frozenset[int]]:
    """Per pod, the request's block hashes with an unexpired speculative entry."""
    n_blocks = len(blocks)
    return {
        pod: frozenset(map(blocks.__getitem__, _within(raw.speculative, n_blocks)))
        for pod, raw in state.pods.items()
        if raw.speculative
    }


def _within(positions: tuple[int, ...], n_blocks: int) -> Sequence[int]:
    """The `positions` from 0 to n_blocks - 1 (in C when all are)."""
    if min(positions) >= 0 and max(positions) < n_blocks:
        return positions
    return [p for p in positions if 0 <= p < n_blocks]


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _count(text: str | None) -> int | None:
    value = _number(text)
    if value is None or not 0 <= value <= MAX_LOAD_COUNT or value != int(value):
        return None
    return int(value)
