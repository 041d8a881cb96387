"""The endpoint picker as a gRPC service: Envoy's ext_proc `ExternalProcessor`, one stream
per request (`exchange.Exchange`), and what the streams of one process share: the Redis
client, the registry and weights caches, the degraded choice's memory, the outage window.
"""

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Sequence

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

log = logging.getLogger(__name__)


class EndpointPicker(external_processor_pb2_grpc.ExternalProcessorServicer):
    def __init__(self) -> None:
        self.least_recent = choice.LeastRecent()
        self._client: redis.asyncio.Redis | None = None
        self._outage_until = float("-inf")
        self._recording: set[asyncio.Task] = set()
        self._failing = OncePerKind(log)

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
                if exchange.refused:
                    return
                if exchange.ended and exchange.decision is not None:
                    self._record(exchange)
                    return
        finally:
            if exchange.decision is not None and not exchange.ended:
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
    ) -> tuple[Decision | service.ScoreError | None, str | None]:
        """The decision, the client's error (a `ScoreError` to answer), or None and why a
        degraded choice must stand in: past the deadline, Redis out (and for
        PICKER_OUTAGE_SECONDS after), tokenization failed."""
        if time.monotonic() < self._outage_until:
            return None, "redis"
        try:
            async with asyncio.timeout(knob("PICKER_DECISION_DEADLINE_SECONDS")):
                active = await current_weights()
                decision = await choice.decide(self.client, rows, active, request, pods, request_id)
        except TimeoutError:
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
        return decision, None

    def _record(self, exchange: Exchange) -> None:
        """Record the outcome after the last chunk has gone on (a task of its own)."""
        task = asyncio.ensure_future(self._recorded(exchange))
        self._recording.add(task)
        task.add_done_callback(self._recording.discard)

    async def _recorded(self, exchange: Exchange) -> None:
        outcome = exchange.outcome()
        if isinstance(outcome, str):
            counters.outcomes.labels(outcome).inc()
            return
        assert exchange.decision is not None
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
        if self._recording:
            await asyncio.wait(self._recording, timeout=5)
        if self._client is not None:
            await self._client.aclose()
