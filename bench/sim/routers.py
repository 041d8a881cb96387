"""The routers the simulation compares, each fed only what it would know in production.

- random, round-robin: no state.
- least-loaded: fewest outstanding requests (queued, prefilling, decoding), as a gateway counts
  its own in-flight requests; random tie.
- kthena: the highest kthena score (compatibility.md 2.4) over the delayed index; random tie, as
kthena's
  plugin alone picks (Go map order).
- llm-d: llm-d's default mix, 2 x prefix score (matched fraction of the prompt's blocks, from
  the delayed index) + (1 - KV cache usage) + queue score ((max - q) / (max - min) over waiting
  queues, 1 when all are equal); the metrics are the pods' true current ones (llm-d scrapes every
  50 ms: this flatters it slightly).
- kvadmin ttft: `scoring.policy.choose_pod`, the function `/api/v1/score` uses, fed the delayed
  index, kvadmin's own speculative entries (blocks it routed, until `speculative_ttl_s` after
  their request's predicted prefill end), and the pods' loads priced by the product's own
  `scoring.route_state.load_reading` from the state the product keeps: the virtual queue
  (advanced as route_record.lua does, restarted from the engine's waiting requests at every
  scrape as queue_resync.lua does), the requests in flight, the last scrape, and the delivered
  wait correction each outcome moves (outcome_record.lua's rule). With `resync` off the scrapes
  never reach it: the virtual queue alone, every load stale.
- oracle: the same function fed the truth: every pod's true cache, the blocks its queued
  requests will have placed, its true backlog and its running count. It minimises the same
  estimated TTFT plus work penalty, with perfect information, and breaks ties the same way
  (least recent work, from its own routing record).
"""

import random
from collections.abc import Iterator, Set

from bench.sim.calibration import Calibration
from bench.sim.fleet import MAX_ROUTED_BLOCKS, Job, PodReport, Simulation, runs_of
from scoring.policy import PodLoad, RouteRequest, choose_pod
from scoring.route_record import MEAN_WEIGHT
from scoring.route_state import (
    PrefillFit,
    RawPodState,
    corrected_prefill_fit,
    corrected_wait_log,
    load_reading,
    resynced_busy_until,
    uncorrected_prefill,
)
from scoring.score import PrefixWalk, score_walk
from scoring.ttft import TtftParameters, estimate_prefill
from scoring.weights import TierWeights

IN_FLIGHT_S = 2.0
"""kvadmin's ROUTING_IN_FLIGHT_SECONDS default."""


class RandomRouter:
    name = "random"

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def choose(self, sim: Simulation, job: Job, now: float) -> int:
        return self.rng.randrange(len(sim.pods))

    def scraped(self, sim: Simulation, now: float, reports: list[PodReport]) -> None:
        pass


class RoundRobinRouter(RandomRouter):
    name = "round-robin"

    def __init__(self, seed: int) -> None:
        self.next = seed

    def choose(self, sim: Simulation, job: Job, now: float) -> int:
        self.next += 1
        return self.next % len(sim.pods)


class LeastLoadedRouter(RandomRouter):
    name = "least-loaded"

    def choose(self, sim: Simulation, job: Job, now: float) -> int:
        loads = [pod.outstanding for pod in sim.pods]
        return _random_best([-load for load in loads], self.rng)


class KthenaRouter(RandomRouter):
    name = "kthena"

    def __init__(self, seed: int, weights: TierWeights) -> None:
        super().__init__(seed)
        self.weights = weights

    def choose(self, sim: Simulation, job: Job, now: float) -> int:
        blocks = job.request.blocks[:MAX_ROUTED_BLOCKS]
        runs = {
            i: run
            for i, pod in enumerate(sim.pods)
            if (run := runs_of(sim.index.held[i], blocks, pod.spec.media))
        }
        scores = score_walk(PrefixWalk(runs), len(blocks), self.weights).scores  # type: ignore[arg-type]
        return _random_best([scores.get(i, 0) for i in range(len(sim.pods))], self.rng)


class LlmdRouter(RandomRouter):
    name = "llm-d"

    def choose(self, sim: Simulation, job: Job, now: float) -> int:
        blocks = job.request.blocks[:MAX_ROUTED_BLOCKS]
        reports = [pod.report() for pod in sim.pods]
        waiting = [report.waiting for report in reports]
        low, high = min(waiting), max(waiting)
        totals = []
        for i, pod in enumerate(sim.pods):
            matched = sum(n for _m, n in runs_of(sim.index.held[i], blocks, pod.spec.media))
            queue = 1.0 if high == low else (high - waiting[i]) / (high - low)
            totals.append(2 * matched / len(blocks) + (1 - reports[i].kv_usage) + queue)
        return _random_best(totals, self.rng)


class _Speculative(Set[int]):
    """A pod's speculative blocks still alive at `now` (block -> expiry)."""

    def __init__(self, expiries: dict[int, float], now: float) -> None:
        self.expiries, self.now = expiries, now

    def __contains__(self, block: object) -> bool:
        return self.expiries.get(block, 0.0) > self.now  # type: ignore[call-overload]

    def __iter__(self) -> Iterator[int]:
        return (block for block, expiry in self.expiries.items() if expiry > self.now)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __bool__(self) -> bool:
        return bool(self.expiries)


class RecentWork:
    """A router's requests in flight per pod, as kvadmin's in-flight ZSET counts them (predicted
    prefill end after now - `IN_FLIGHT_S`), times the moving mean of their predicted prefill
    (the queue's `prefill_ms`): `scoring.route_state`'s recent work, which breaks ties."""

    def __init__(self, pods: int) -> None:
        self.ends: list[list[float]] = [[] for _ in range(pods)]
        self.mean: list[float] = [0.0] * pods

    def of(self, now: float) -> list[float]:
        return [count * mean for count, mean in zip(self.counts(now), self.mean, strict=True)]

    def counts(self, now: float) -> list[int]:
        self.ends = [[end for end in ends if end > now - IN_FLIGHT_S] for ends in self.ends]
        return [len(ends) for ends in self.ends]

    def routed(self, pod: int, end: float, prefill_s: float) -> None:
        self.ends[pod].append(end)
        mean = self.mean[pod]
        self.mean[pod] = prefill_s if not mean else mean + MEAN_WEIGHT * (prefill_s - mean)


class TtftRouter:
    """kvadmin's `ttft` as the product runs it: the state route_record.lua keeps per pod (the
    virtual queue's `busy_until` and moving mean predicted prefill, the requests in flight,
    the delivered wait correction outcome_record.lua keeps), the scraper's last load, and the
    product's own pricing of them (`scoring.route_state.load_reading`)."""

    name = "kvadmin ttft"

    def __init__(
        self,
        weights: TierWeights,
        parameters: TtftParameters,
        pods: int,
        speculative_ttl_s: float = 1.0,
        resync: bool = True,
        calibration: Calibration | None = None,
        stale_s: float = 3.0,
    ) -> None:
        self.weights, self.parameters = weights, parameters
        self.calibration = calibration
        self.predicted: dict[int, float] = {}
        """Per request index, the chosen pod's predicted TTFT (wait + prefill)."""
        self.decided: dict[int, tuple[int, float, float, float, int, float]] = {}
        """Per request index in flight: (pod, predicted wait, predicted prefill, the same before
        the prefill correction, weights version, the wait factor's log the wait included), its
        outcome's input to the corrections."""
        self.ttl, self.resync, self.stale_s = speculative_ttl_s, resync, stale_s
        self.speculative: list[dict[int, float]] = [{} for _ in range(pods)]
        self.busy_until = [0.0] * pods
        self.wait_log = [0.0] * pods
        self.prefill_fits = [PrefillFit()] * pods
        """Each pod's delivered prefill correction (outcome_record.lua's `prefill_fit`)."""
        self.scrapes: list[PodReport | None] = [None] * pods
        self.scraped_at: float | None = None
        self.recent = RecentWork(pods)
        self.stale_decisions = 0

    def choose(self, sim: Simulation, job: Job, now: float) -> int:
        blocks = job.request.blocks[:MAX_ROUTED_BLOCKS]
        names = [pod.spec.name for pod in sim.pods]
        runs = {}
        for i, pod in enumerate(sim.pods):
            if run := runs_of(sim.index.held[i], blocks, pod.spec.media):
                runs[names[i]] = run
        cold = estimate_prefill(
            "sim", job.request.prompt_tokens, (), 16, 0, self.weights, self.parameters
        ).seconds
        in_flight = self.recent.counts(now)
        now_ms = round(now * 1000)
        readings = {
            name: load_reading(
                self._raw(i, in_flight[i], now), now_ms, self.stale_s, cold, self.version
            )
            for i, name in enumerate(names)
        }
        speculative = {names[i]: _Speculative(self.speculative[i], now) for i in range(len(names))}
        request = RouteRequest(
            "sim",
            blocks,
            job.request.prompt_tokens,
            16,
            names,
            runs,
            {},
            speculative,
            {name: reading.load for name, reading in readings.items()},
            {name: reading.recent_work_s for name, reading in readings.items()},
        )
        choice = choose_pod(request, self.weights, "ttft", self.parameters)
        self.stale_decisions += bool(choice.stale_pods)
        chosen = names.index(choice.chosen)  # type: ignore[arg-type]
        cost = next(c for c in choice.candidates if c.pod == choice.chosen)
        self.predicted[job.index] = cost.wait_s + cost.prefill_s
        load = request.loads[choice.chosen]  # type: ignore[index]
        uncorrected = uncorrected_prefill(cost.prefill_s, load.prefill_factor, load.prefill_offset)
        self.decided[job.index] = (
            chosen,
            cost.wait_s,
            cost.prefill_s,
            uncorrected,
            self.version,
            self.wait_log[chosen],
        )
        # route_record.lua's advance: the prefill starts when the queue is predicted done.
        done = max(self.busy_until[chosen], now) + cost.prefill_s
        self.busy_until[chosen] = done
        self.recent.routed(chosen, done, cost.prefill_s)
        expiry = done + self.ttl  # after the predicted prefill end, as kvadmin keeps it
        entries = self.speculative[chosen]
        for block in blocks:
            entries[block] = expiry
        return chosen

    @property
    def version(self) -> int:
        """The parameters' version: each calibration step is one."""
        return self.calibration.steps if self.calibration else 0

    def _raw(self, pod: int, in_flight: int, now: float) -> RawPodState:
        scrape = self.scrapes[pod] if self.resync else None
        return RawPodState(
            busy_until_ms=repr(self.busy_until[pod] * 1000),
            prefill_ms=repr(self.recent.mean[pod] * 1000) if self.recent.mean[pod] else None,
            wait_log=repr(self.wait_log[pod]),
            prefill_log=repr(self.prefill_fits[pod].log),
            prefill_offset=repr(self.prefill_fits[pod].offset_s),
            prefill_version=None
            if self.prefill_fits[pod].version is None
            else str(self.prefill_fits[pod].version),
            in_flight=in_flight,
            running=None if scrape is None else str(scrape.running),
            waiting=None if scrape is None else str(scrape.waiting),
            kv_usage=None if scrape is None else repr(scrape.kv_usage),
            scraped_at=None if self.scraped_at is None else repr(self.scraped_at),
        )

    def delivered(self, index: int, ttft_s: float) -> None:
        """The request's outcome, as the gateway reports it: outcome_record.lua's corrections."""
        pod, wait, prefill, uncorrected, version, decided_log = self.decided.pop(index)
        self.wait_log[pod] = corrected_wait_log(
            self.wait_log[pod], wait, prefill, ttft_s, decided_log
        )
        self.prefill_fits[pod] = corrected_prefill_fit(
            self.prefill_fits[pod], version, wait, prefill, uncorrected, ttft_s
        )

    def scraped(self, sim: Simulation, now: float, reports: list[PodReport]) -> None:
        self.scraped_at = now
        if self.calibration is not None:
            self.calibration.scraped(now, [report.counters for report in reports])
            self.parameters = self.calibration.stepped(now, self.parameters)
        for i, report in enumerate(reports):
            self.scrapes[i] = report
            if self.resync and self.recent.mean[i]:  # queue_resync.lua
                self.busy_until[i] = resynced_busy_until(
                    self.busy_until[i], now, report.waiting, report.running, self.recent.mean[i]
                )
            entries = self.speculative[i]
            for block in [block for block, expiry in entries.items() if expiry <= now]:
                del entries[block]


class OracleRouter:
    name = "oracle"

    def __init__(
        self,
        weights: TierWeights,
        parameters: TtftParameters,
        pods: int,
        slowdowns: dict[str, float] | None = None,
    ) -> None:
        self.weights, self.parameters = weights, parameters
        self.recent = RecentWork(pods)
        self.slowdowns = slowdowns or {}
        """Pods whose own decode slowdown differs from the parameters': their running count
        is scaled so that the parameters' slowdown prices it exactly."""

    def choose(self, sim: Simulation, job: Job, now: float) -> int:
        blocks = job.request.blocks
        names = [pod.spec.name for pod in sim.pods]
        runs, pending, loads = {}, {}, {}
        for name, pod in zip(names, sim.pods, strict=True):
            media: list[tuple[str, int]] = []
            for block in blocks:
                tier = pod.cache.best_tier(block)
                if tier is None:
                    break
                medium = pod.spec.media[tier]
                if media and media[-1][0] == medium:
                    media[-1] = (medium, media[-1][1] + 1)
                else:
                    media.append((medium, 1))
            runs[name] = tuple(media)
            pending[name] = pod.pending.keys()
            scale = self.slowdowns.get(name, self.parameters.decode_slowdown)
            running = pod.decoding * scale / self.parameters.decode_slowdown
            loads[name] = PodLoad(pod.backlog_s(now), running, queued=len(pod.queue))  # type: ignore[arg-type]
        recent = dict(zip(names, self.recent.of(now), strict=True))
        request = RouteRequest(
            "sim", blocks, job.request.prompt_tokens, 16, names, runs, {}, pending, loads, recent
        )
        choice = choose_pod(request, self.weights, "ttft", self.parameters)
        chosen = names.index(choice.chosen)  # type: ignore[arg-type]
        cost = next(c for c in choice.candidates if c.pod == choice.chosen)
        self.recent.routed(chosen, now + cost.wait_s + cost.prefill_s, cost.prefill_s)
        return chosen

    def scraped(self, sim: Simulation, now: float, reports: list[PodReport]) -> None:
        pass


def _random_best(values: list, rng: random.Random) -> int:
    best = max(values)
    return rng.choice([i for i, value in enumerate(values) if value == best])
