"""The endpoint picker as a gRPC service: Envoy's ext_proc `ExternalProcessor`, one stream
per request (`exchange.Exchange`), and what the streams of one process share: the Redis
client, the registry and weights caches, the degraded choice's memory, the outage window,
and the work that outlives an exchange (a late decision, the recordings).
"""

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Coroutine, Sequence
from typing import Any, TypeVar

import grpc
import redis
import redis.asyncio
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc
from envoy.service.ext_proc.v3.external_processor_pb2 import ProcessingRequest, ProcessingResponse

from kvadmin.api import process_cache
from kvadmin.api.scoring import current_weights
from kvadmin.conf import knob
from kvadmin.gateway import choice, counters
from kvadmin.gateway.exchange import Exchange
from kvadmin.gateway.inference_request import InferenceRequest
from kvadmin.log_once import OncePerKind
from kvadmin.redis_clients import REDIS_OUTAGES, async_index_client
from kvadmin.routing import outcomes, service
from kvadmin.routing.decisions import Decision
from kvadmin.routing.pipeline import RecordPlan

log = logging.getLogger(__name__)
T = TypeVar("T")
DECISION_COST_SECONDS = 0.005
"""About what one decision of a long prompt costs the process's one core (its ~10K
characters' tokenizing, with the GIL held): decisions beyond deadline / cost in flight at
once could not all be done within the deadline anyway."""
IMPLAUSIBLE_WAIT_SECONDS = 5.0
"""A request's body that waited this long would have timed out at any gateway (an ext_proc
message timeout is well under a second): its start (Envoy's `request.time`) is on a clock
running behind this host's, and the request budget ignores it."""


def _count_late(_: asyncio.Task) -> None:
    counters.late_decisions.inc()


def max_decisions_in_flight() -> int:
    """PICKER_MAX_DECISIONS_IN_FLIGHT, or when 0, one per DECISION_COST_SECONDS of the
    deadline (at least 1)."""
    if bound := knob("PICKER_MAX_DECISIONS_IN_FLIGHT"):
        return bound
    return max(1, round(knob("PICKER_DECISION_DEADLINE_SECONDS") / DECISION_COST_SECONDS))


def budgeted_deadline(now: float, started: float) -> float | None:
    """The decision's deadline at `now` for a request that `started` then (see `decide`):
    PICKER_DECISION_DEADLINE_SECONDS from now, never past PICKER_REQUEST_BUDGET_SECONDS
    from the start; None when the budget is spent already. A start IMPLAUSIBLE_WAIT_SECONDS
    or more ago is on a clock running behind this host's: the budget is not applied."""
    deadline = now + knob("PICKER_DECISION_DEADLINE_SECONDS")
    budget = knob("PICKER_REQUEST_BUDGET_SECONDS")
    if not budget or now - started >= IMPLAUSIBLE_WAIT_SECONDS:
        return deadline
    if now >= started + budget:
        return None
    return min(deadline, started + budget)


DEGRADED_QUIET_SECONDS = 60.0
"""A reason of degraded choices is logged when it starts again after this long without one:
an overload degrades many answers a second, each counted (kvadmin_picker_degraded_total)."""


class EndpointPicker(external_processor_pb2_grpc.ExternalProcessorServicer):
    def __init__(self) -> None:
        self.least_recent = choice.LeastRecent()
        self._client: redis.asyncio.Redis | None = None
        self._outage_until = float("-inf")
        self._background: set[asyncio.Task] = set()
        """Decisions past their deadline, decisions' and outcomes' recordings."""
        self._deciding: set[asyncio.Task] = set()
        """Decisions in flight, late ones included (PICKER_MAX_DECISIONS_IN_FLIGHT)."""
        self._failing = OncePerKind(log)
        self._degraded_at: dict[str, float] = {}

    @property
    def client(self) -> redis.asyncio.Redis:
        if self._client is None:  # created in the server's event loop, which uses it
            self._client = async_index_client()
        return self._client

    async def Process(  # noqa: N802  (the gRPC method's name)
        self, request_iterator: AsyncIterator[ProcessingRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[ProcessingResponse]:
        exchange = Exchange(self)
        try:
            async for message in request_iterator:
                yield await exchange.on(message)
                if exchange.finished:
                    return  # the stream's end: Envoy goes on without the picker
        finally:
            # Here, not after the last answer: gRPC may close the stream (and this generator,
            # at its `yield`) as soon as Envoy has the answer to the end of the response.
            if exchange.decision is not None:
                if exchange.ended:
                    self._record(exchange)
                else:
                    counters.outcomes.labels("unfinished").inc()

    async def registry(self, model: str) -> process_cache.Snapshot:
        """The engines and serving addresses in memory; checked again at once for a model it
        does not know (registered a moment ago?)."""
        snapshot = await process_cache.snapshot(self.client)
        if model not in snapshot.engines:
            with contextlib.suppress(redis.RedisError):
                snapshot = await process_cache.snapshot(self.client, recheck=True)
        return snapshot

    async def decide(
        self,
        rows: Sequence[service.EngineRow],
        request: InferenceRequest,
        pods: list[str],
        request_id: str | None,
        started: float,
    ) -> tuple[tuple[Decision, RecordPlan] | service.ScoreError | None, str | None]:
        """The decision with its recording (not yet written), the client's error (a
        `ScoreError` to answer), or None and why a degraded choice must stand in: Redis out
        (and for PICKER_OUTAGE_SECONDS after), the request's budget spent already
        ("behind"), too many decisions in flight already ("busy"), past the deadline
        ("deadline"), tokenization failed.

        The deadline is PICKER_DECISION_DEADLINE_SECONDS from now, and never later than
        PICKER_REQUEST_BUDGET_SECONDS after the request `started` (a `time.monotonic()`
        instant: Envoy's start of the request, or its headers' arrival here). Under
        overload a body can wait long before its handler runs (200-400 ms at 100 clients of
        220 KB prompts, while the event loop ran 1-5 ms late: the wait is in Envoy's and
        gRPC's queues, where the picker cannot see it); that wait counts against Envoy's
        message timeout as much as the decision does. A request past its budget is
        answered at once, at the price of a degraded choice, rather than let Envoy time it
        out and pass it unrouted; and its cheap answer frees the time the next ones need.
        The start is Envoy's clock: one IMPLAUSIBLE_WAIT_SECONDS or more ago is another
        host's clock running behind, and the budget is not applied (a skew under it but over
        the budget makes every choice "behind": the counter shows it; keep clocks in sync).

        The deadline does not cancel the decision: a redis-py command cancelled in flight
        leaves its reply unread, so the connection is dropped and the next request pays a
        reconnect. A late decision goes on in the background, counted, until its next
        expensive step (the tokenizing, the script call), which it does not start (counted
        too); it is dropped (nothing recorded: the request went to the degraded choice).
        Late decisions count against the bound in flight, so that under overload the work
        nobody waits for cannot crowd out the work of timely ones."""
        if time.monotonic() < self._outage_until:
            return None, "redis"
        deadline = budgeted_deadline(time.monotonic(), started)
        if deadline is None:
            return None, "behind"
        if len(self._deciding) >= max_decisions_in_flight():
            return None, "busy"
        deciding = self._in_background(self._decided(rows, request, pods, request_id, deadline))
        self._deciding.add(deciding)
        deciding.add_done_callback(self._deciding.discard)
        done, _ = await asyncio.wait((deciding,), timeout=deadline - time.monotonic())
        if not done:
            deciding.add_done_callback(_count_late)
            return None, "deadline"
        return deciding.result()

    async def _decided(
        self,
        rows: Sequence[service.EngineRow],
        request: InferenceRequest,
        pods: list[str],
        request_id: str | None,
        deadline: float,
    ) -> tuple[tuple[Decision, RecordPlan] | service.ScoreError | None, str | None]:
        try:
            active = await current_weights()
            decided = await choice.decide(
                self.client, rows, active, request, pods, request_id, deadline
            )
        except service.DeadlinePassed as late:
            counters.late_steps_skipped.labels(late.step).inc()
            return None, "deadline"
        except (*REDIS_OUTAGES, service.IndexUnavailable) as error:
            self._outage_until = time.monotonic() + knob("PICKER_OUTAGE_SECONDS")
            self._failing.failed("redis", "Redis is out (%s): degraded choices", error)
            return None, "redis"
        except service.TokenizationUnavailable:
            return None, "tokenize"
        except service.ScoreError as error:
            return error, None
        self._failing.recovered("redis")
        return decided, None

    def degraded(self, reason: str, pod: str, request_id: str | None) -> None:
        """Count a degraded choice of `pod`; log it if its reason had been quiet for
        DEGRADED_QUIET_SECONDS (the event loop's thread only: no lock)."""
        counters.answers.labels("degraded").inc()
        counters.degraded.labels(reason).inc()
        now = time.monotonic()
        last = self._degraded_at.get(reason, float("-inf"))
        self._degraded_at[reason] = now
        if now - last > DEGRADED_QUIET_SECONDS:
            log.warning(
                "degraded choices (%s) begin: %s for request %s; the next ones are counted "
                "in kvadmin_picker_degraded_total, logged again after %.0f s without one",
                reason,
                pod,
                request_id,
                DEGRADED_QUIET_SECONDS,
            )

    def record_decision(self, recording: RecordPlan) -> asyncio.Task:
        """Write the decision's recording in the background: the gateway has its answer."""
        return self._in_background(service.record_async(self.client, recording))

    def _in_background(self, work: Coroutine[Any, Any, T]) -> "asyncio.Task[T]":
        """`work` as a task kept until it is done: no exchange's end cancels it."""
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task) -> None:
        self._background.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            log.error("the picker's background work failed", exc_info=error)

    def _record(self, exchange: Exchange) -> None:
        """Record the outcome after the last chunk has gone on (a task of its own)."""
        self._in_background(self._recorded(exchange))

    async def _recorded(self, exchange: Exchange) -> None:
        outcome = exchange.outcome()
        if isinstance(outcome, str):
            counters.outcomes.labels(outcome).inc()
            return
        assert exchange.decision is not None and exchange.recording is not None
        await exchange.recording  # the outcome script finds the decision by its logged id
        try:
            result = await outcomes.record_async(
                self.client, exchange.decision, outcome, knob("BLOCK_SIZE")
            )
        except outcomes.ImplausibleOutcome:
            # The pod's usage does not fit the decision (compatibility with the outcome API's
            # 422): counted, nothing recorded.
            counters.outcomes.labels("implausible").inc()
            return
        except redis.RedisError as error:
            self._failing.failed("outcome", "outcomes not recorded: %s", error)
            counters.outcomes.labels("failed").inc()
            return
        self._failing.recovered("outcome")
        counters.outcomes.labels(result).inc()

    async def close(self) -> None:
        if self._background:
            await asyncio.wait(self._background, timeout=5)
        if self._client is not None:
            await self._client.aclose()
