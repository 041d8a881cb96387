"""A discrete-event simulation of a fleet of engine pods serving a timed trace under one router.

Each pod prefills one request at a time from a FIFO queue. A prefill takes

    S = T0 + t_tok * (1 + decode_slowdown * running) * (uncached + sum over hits of reload)

where reload is the fraction of a block's prefill that loading it back from a lower tier costs
(`RELOAD`), and `running` the requests decoding on the pod when the prefill starts. Then the
request decodes for `output_tokens * TPOT` seconds, holding its KV blocks. The time to first
token is arrival to end of prefill.

The router sees the pods through what kvadmin and the other routers would see in production:
- the index (`DelayedIndex`): what the pods' KV events said, each change arriving
  `index_delay_s` after it happened (allocation and eviction when a prefill starts, stores when it
  ends);
- scrapes of each pod's metrics (`PodReport`) every `scrape_interval_s`;
- and, for the oracle and the load-aware baselines that a gateway runs next to the engines, the
  pods' true state (`SimPod`).
"""

import heapq
import itertools
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from bench.sim.cache import Hit, TieredCache
from bench.sim.workloads import BLOCK, TraceRequest
from scoring.ttft import TtftParameters

TPOT_S = 0.012
"""Seconds per generated token while decoding."""
RELOAD = {"GPU": 0.0, "CPU": 0.2, "CPU_PINNED": 0.15, "DISK": 0.5}
"""True reload cost per hit token, as a fraction of computing it."""
MAX_ROUTED_BLOCKS = 128
COUNTERS = ("prefill_seconds_sum", "prefill_seconds_count", "prompt_tokens_total",
            "prefix_cache_hits_total", "lower_hits_total")  # fmt: skip
"""The router hashes at most kthena's max_blocks of a prompt."""


@dataclass(frozen=True, slots=True)
class PodSpec:
    name: str
    kind: str
    """The engine, "vllm" or "sglang": which write policies it runs (kvadmin/fleet/offload.py)."""
    media: tuple[str, ...]
    capacities: tuple[int, ...]
    write_policy: str | None = None
    """None: the engine's default (write_through)."""
    truth: TtftParameters | None = None
    """The pod's own true timing (None: the simulation's): pods of one fleet on different GPUs."""


@dataclass(slots=True)
class Job:
    request: TraceRequest
    index: int
    arrival: float
    pod: int = -1
    start: float = 0.0
    finish: float = 0.0
    backlog_s: float = 0.0
    """The true prefill time estimated when it was queued (the oracle's view of the backlog)."""
    hit: Hit | None = None
    computed_tokens: int = 0


@dataclass(frozen=True, slots=True)
class PodReport:
    """A metrics scrape: vllm:num_requests_waiting / running, kv cache usage."""

    waiting: int
    prefilling: int
    running: int
    kv_usage: float
    counters: dict[str, float] = field(default_factory=dict)
    """The engine's prefill counters, as vLLM's /metrics has them (kvadmin.load.exposition):
    prefill time (sum, count), prompt tokens, GPU prefix-cache hits, lower-tier hits."""


class SimPod:
    def __init__(self, spec: PodSpec) -> None:
        self.spec = spec
        self.cache = TieredCache(spec.kind, spec.capacities, BLOCK, spec.write_policy)
        self.queue: deque[Job] = deque()
        self.current: Job | None = None
        self.decoding = 0
        self.kv_blocks = 0
        self.pending: dict[int, int] = {}
        """Blocks of queued requests (how many hold each): in GPU by the time a request queued
        now starts."""
        self.served = 0
        self.counters = dict.fromkeys(COUNTERS, 0.0)

    @property
    def outstanding(self) -> int:
        return len(self.queue) + (self.current is not None) + self.decoding

    def report(self) -> PodReport:
        return PodReport(
            len(self.queue),
            int(self.current is not None),
            self.decoding + (self.current is not None),
            min(self.kv_blocks / self.spec.capacities[0], 1.0),
            dict(self.counters, running=float(self.decoding + (self.current is not None))),
        )

    def prefilled(self, job: "Job") -> None:
        """Count a finished prefill as the engine's counters do."""
        assert job.hit is not None
        counters, tiers = self.counters, job.hit.tokens_by_tier
        counters["prefill_seconds_sum"] += job.finish - job.start
        counters["prefill_seconds_count"] += 1
        counters["prompt_tokens_total"] += job.request.prompt_tokens
        counters["prefix_cache_hits_total"] += tiers[0] if tiers else 0
        counters["lower_hits_total"] += sum(tiers[1:])

    def backlog_s(self, now: float) -> float:
        """True time until a request queued now would start (queued prefills as estimated when
        they were queued)."""
        busy = max(self.current.finish - now, 0.0) if self.current else 0.0
        return busy + sum(job.backlog_s for job in self.queue)


class DelayedIndex:
    """The router's index: per pod, block id -> bit mask of tiers, as the pods' events said."""

    def __init__(self, pods: int, delay_s: float) -> None:
        self.delay_s = delay_s
        self.held: list[dict[int, int]] = [{} for _ in range(pods)]
        self._pending: list[tuple[float, int, int, list]] = []
        self._order = itertools.count()

    def publish(self, at: float, pod: int, changes: list) -> None:
        if changes:
            heapq.heappush(self._pending, (at + self.delay_s, next(self._order), pod, changes))

    def catch_up(self, now: float) -> None:
        pending = self._pending
        while pending and pending[0][0] <= now:
            _at, _n, pod, changes = heapq.heappop(pending)
            held = self.held[pod]
            for block, tier, stored in changes:
                mask = held.get(block, 0)
                mask = mask | (1 << tier) if stored else mask & ~(1 << tier)
                if mask:
                    held[block] = mask
                else:
                    held.pop(block, None)


def runs_of(held: dict[int, int], blocks: Sequence[int], media: Sequence[str]) -> tuple:
    """The pod's consecutive run of `blocks` as runs of its best medium (the index walk)."""
    runs: list[tuple[str, int]] = []
    for block in blocks:
        mask = held.get(block)
        if not mask:
            break
        medium = media[(mask & -mask).bit_length() - 1]
        if runs and runs[-1][0] == medium:
            runs[-1] = (medium, runs[-1][1] + 1)
        else:
            runs.append((medium, 1))
    return tuple(runs)


class Router(Protocol):
    name: str

    def choose(self, sim: "Simulation", job: Job, now: float) -> int: ...

    def scraped(self, sim: "Simulation", now: float, reports: list[PodReport]) -> None: ...


@dataclass(slots=True)
class Outcome:
    ttft_s: list[float] = field(default_factory=list)
    hit_tokens: Counter[str] = field(default_factory=Counter)
    prompt_tokens: int = 0
    computed_tokens: int = 0
    requests_per_pod: list[int] = field(default_factory=list)
    """Every request routed to each pod, warm-up included."""
    busy_s_per_pod: list[float] = field(default_factory=list)
    """Seconds each pod spent prefilling the measured requests (after warm-up)."""
    ttft_by_index: dict[int, float] = field(default_factory=dict)
    """Every request's TTFT by its index in the trace, warm-up included (recovery curves)."""
    prediction_errors: list[float] = field(default_factory=list)
    """abs(predicted - delivered) / delivered of the measured requests, for routers that
    predict (kvadmin's ttft)."""
    calibration_steps: int = 0


class Simulation:
    def __init__(
        self,
        specs: Sequence[PodSpec],
        truth: TtftParameters,
        index_delay_s: float = 0.05,
        scrape_interval_s: float = 1.0,
    ) -> None:
        self.pods = [SimPod(spec) for spec in specs]
        self.truth = truth
        self.index = DelayedIndex(len(specs), index_delay_s)
        self.scrape_interval_s = scrape_interval_s

    def service_s(self, pod: SimPod, hit: Hit, prompt_tokens: int, running: int) -> float:
        truth = pod.spec.truth or self.truth
        media = pod.spec.media
        reload = sum(RELOAD[media[t]] * tokens for t, tokens in enumerate(hit.tokens_by_tier))
        work = prompt_tokens - hit.cached_tokens + reload
        slowdown = 1.0 + truth.decode_slowdown * running
        return truth.first_token_s + truth.token_seconds("sim") * slowdown * work

    def run(
        self, trace: Sequence[TraceRequest], arrivals: Sequence[float], router: Router, warmup: int
    ) -> Outcome:
        outcome = Outcome(busy_s_per_pod=[0.0] * len(self.pods))
        events: list[tuple[float, int, int, object]] = []
        order = itertools.count()
        ARRIVE, PREFILLED, DECODED, SCRAPE = 0, 1, 2, 3
        for i, at in enumerate(arrivals):
            events.append((at, next(order), ARRIVE, Job(trace[i], i, at)))
        heapq.heapify(events)
        heapq.heappush(events, (self.scrape_interval_s, next(order), SCRAPE, None))
        remaining = len(arrivals)
        while remaining:
            now, _n, kind, payload = heapq.heappop(events)
            self.index.catch_up(now)
            if kind == ARRIVE:
                job = payload
                assert isinstance(job, Job)
                job.pod = router.choose(self, job, now)
                pod = self.pods[job.pod]
                pod.served += 1
                job.backlog_s = self._estimate(pod, job.request)
                for block in job.request.blocks:
                    pod.pending[block] = pod.pending.get(block, 0) + 1
                pod.queue.append(job)
                if pod.current is None:
                    self._start(pod, job.pod, now, events, order)
            elif kind == PREFILLED:
                pod = self.pods[payload]  # type: ignore[index]
                job = pod.current
                assert job is not None
                pod.current = None
                pod.decoding += 1
                assert job.hit is not None
                self.index.publish(now, payload, [c for c in job.hit.changes if c[2]])  # type: ignore[arg-type]
                remaining -= 1
                pod.prefilled(job)
                outcome.ttft_by_index[job.index] = now - job.arrival
                if hasattr(router, "delivered"):  # routers that learn from outcomes
                    router.delivered(job.index, now - job.arrival)
                if job.index >= warmup:
                    self._record(outcome, pod, job, now)
                decode_s = job.request.output_tokens * TPOT_S
                heapq.heappush(events, (now + decode_s, next(order), DECODED, (payload, job)))
                if pod.queue:
                    self._start(pod, payload, now, events, order)  # type: ignore[arg-type]
            elif kind == DECODED:
                index, job = payload  # type: ignore[misc]
                pod = self.pods[index]
                pod.decoding -= 1
                pod.kv_blocks -= len(job.request.blocks)
            else:
                router.scraped(self, now, [pod.report() for pod in self.pods])
                heapq.heappush(events, (now + self.scrape_interval_s, next(order), SCRAPE, None))
        outcome.requests_per_pod = [pod.served for pod in self.pods]
        return outcome

    def _estimate(self, pod: SimPod, request: TraceRequest) -> float:
        hit = pod.cache.lookup(request.blocks, request.prompt_tokens)
        return self.service_s(pod, hit, request.prompt_tokens, pod.decoding)

    def _start(self, pod: SimPod, index: int, now: float, events: list, order) -> None:
        job = pod.queue.popleft()
        for block in job.request.blocks:
            held = pod.pending[block] - 1
            if held:
                pod.pending[block] = held
            else:
                del pod.pending[block]
        hit = pod.cache.serve(job.request.blocks, job.request.prompt_tokens)
        job.hit, job.start = hit, now
        job.finish = now + self.service_s(pod, hit, job.request.prompt_tokens, pod.decoding)
        job.computed_tokens = job.request.prompt_tokens - hit.cached_tokens
        pod.current = job
        pod.kv_blocks += len(job.request.blocks)
        self.index.publish(now, index, [c for c in hit.changes if not c[2]])
        heapq.heappush(events, (job.finish, next(order), 1, index))

    @staticmethod
    def _record(outcome: Outcome, pod: SimPod, job: Job, now: float) -> None:
        outcome.ttft_s.append(now - job.arrival)
        outcome.busy_s_per_pod[job.pod] += job.finish - job.start
        outcome.prompt_tokens += job.request.prompt_tokens
        outcome.computed_tokens += job.computed_tokens
        assert job.hit is not None
        for tier, tokens in enumerate(job.hit.tokens_by_tier):
            outcome.hit_tokens[pod.spec.media[tier]] += tokens
