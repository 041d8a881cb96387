"""One request's ext_proc stream, message by message: Envoy sends the request's (buffered)
body, then each chunk of the response's body as it passes, and, if it is configured to, the
headers of each before them; the picker answers each at once, and routes at the request
body.

1. The request's start (TTFT is measured from it), path, `x-request-id` and subset hint:
   from its headers when Envoy sends them, else from the attributes and metadata of its
   body's message (the shipped config: `request.time`, `request.path`, `request.id`). A
   path the picker does not route goes on with no endpoint (the gateway balances it
   itself): told at its headers, Envoy sends nothing more of it.
2. Request body (the whole, buffered by Envoy): at most PICKER_MAX_BODY_BYTES (413), JSON
   of an OpenAI completion or chat (400), a model with registered engines (404) of which
   some may take it (503). Then the routing service's decision within
   PICKER_DECISION_DEADLINE_SECONDS (and the request's PICKER_REQUEST_BUDGET_SECONDS), or a
   degraded choice, which ends the stream (nothing of the response to record), named to the
   gateway (`protocol.route_to`, the decision's id in the metadata too); the body goes on
   unchanged. A shed request (429) is refused before anything of it is recorded; a routed
   one's decision is recorded once the gateway has its answer.
3. The response's status and the endpoint that served: from its headers when Envoy sends
   them (answered with the decision's id in `x-kvadmin-decision`; without a decision, a
   degraded choice, there is no outcome to record and Envoy sends no more of it), else from
   the attributes of its first body chunk (`response.code`, `upstream.address`).
4. Response body chunks: each passed on at once; the first one is the time to first
   token, and the usage is read from the kept head and tail (`usage.UsageScanner`).
5. The end of the response: the outcome, recorded as the outcome API records it
   (`routing.outcomes`), after the last chunk has gone on. A stream that closes before the
   end records nothing and is counted.
"""

import asyncio
import time
from typing import TYPE_CHECKING

from envoy.service.ext_proc.v3.external_processor_pb2 import (
    ProcessingRequest,
    ProcessingResponse,
    TrailersResponse,
)

from kvadmin.conf import knob
from kvadmin.engines.model_names import model_name_problem
from kvadmin.gateway import choice, counters, protocol
from kvadmin.gateway.inference_request import InvalidInference, inference_request, routed_path
from kvadmin.gateway.usage import UsageScanner
from kvadmin.redis_clients import REDIS_OUTAGES
from kvadmin.routing import outcomes, service
from kvadmin.routing.decisions import Decision
from kvadmin.routing.request import MAX_REQUEST_ID

if TYPE_CHECKING:
    from kvadmin.gateway.picker import EndpointPicker


# The counters' children of every request, looked up once.
_PASSED = counters.answers.labels("passed")
_ROUTED = counters.answers.labels("routed")


class Exchange:
    def __init__(self, picker: "EndpointPicker") -> None:
        self.picker = picker
        self.started = 0.0
        self.path = ""
        self.request_id: str | None = None
        self.subset: list[str] | None = None
        self.body = bytearray()
        self.decision: Decision | None = None
        self.recording: asyncio.Task | None = None
        """The decision's recording, under way once the gateway has its answer."""
        self.addresses: dict[str, str] = {}
        self.status = ""
        self.served = ""
        self.first_chunk_at: float | None = None
        self.usage = UsageScanner(knob("PICKER_USAGE_WINDOW_BYTES"))
        self.ended = False
        self.refused = False
        self.unrecorded = False
        """Answered with nothing of the response to record: a degraded choice, a path not
        routed."""

    @property
    def finished(self) -> bool:
        """Whether the picker needs no more of the exchange: the stream ends after this
        answer, and the gateway sends it nothing more (each chunk of the response would be
        one more message for a picker that may be behind)."""
        return self.refused or self.ended or self.unrecorded

    async def on(self, message: ProcessingRequest) -> ProcessingResponse:
        kind = message.WhichOneof("request")
        if kind == "request_headers":
            return self._request_headers(message)
        if kind == "request_body":
            if not self.started:  # no headers: the shipped config sends attributes instead
                self._request_attributes(message)
                if routed_path(self.path) is None:
                    _PASSED.inc()
                    self.unrecorded = True
            return await self._request_body(message)
        if kind == "response_headers":
            headers = protocol.header_map(message.response_headers)
            self.status = headers.get(":status", "")
            self.served = headers.get(protocol.SERVED, "")
            self.ended = message.response_headers.end_of_stream
            return protocol.pass_response_headers(
                self.decision.decision_id if self.decision else None
            )
        if kind == "response_body":
            if self.first_chunk_at is None:
                self.first_chunk_at = time.monotonic()
                if not self.status:
                    found = protocol.attributes(message)
                    self.status = found.get("response.code", "")
                    self.served = found.get("upstream.address", "")
            self.usage.feed(message.response_body.body)
            self.ended = message.response_body.end_of_stream
            return protocol.pass_response_body()
        if kind == "response_trailers":
            self.ended = True
            return ProcessingResponse(response_trailers=TrailersResponse())
        return ProcessingResponse(request_trailers=TrailersResponse())

    def _request_headers(self, message: ProcessingRequest) -> ProcessingResponse:
        headers = protocol.header_map(message.request_headers)
        self._start(message, time.monotonic(), headers.get(":path"), headers.get("x-request-id"))
        if routed_path(self.path) is None:
            _PASSED.inc()
            self.unrecorded = True
            return protocol.pass_request_headers(routed=False)
        if message.request_headers.end_of_stream:
            return self._refuse(400, "an inference request needs a JSON body", "invalid_request")
        return protocol.pass_request_headers(routed=True)

    def _request_attributes(self, message: ProcessingRequest) -> None:
        found = protocol.attributes(message)
        at = time.monotonic() - protocol.seconds_ago(found.get("request.time", ""))
        self._start(message, at, found.get("request.path"), found.get("request.id"))

    def _start(
        self, message: ProcessingRequest, at: float, path: str | None, request_id: str | None
    ) -> None:
        self.started = at
        self.path = path or ""
        self.request_id = request_id[:MAX_REQUEST_ID] if request_id else None
        self.subset = protocol.subset_hint(message)

    async def _request_body(self, message: ProcessingRequest) -> ProcessingResponse:
        path = routed_path(self.path)
        if path is None:  # a gateway that ignores the mode override, or sends no path
            return protocol.pass_request_body()
        limit, chunk = knob("PICKER_MAX_BODY_BYTES"), message.request_body.body
        if len(self.body) + len(chunk) > limit:
            return self._refuse(413, f"the request body is over {limit} bytes", "too_large")
        if not message.request_body.end_of_stream:
            self.body += chunk
            return protocol.pass_request_body()  # a streamed body: Envoy's mode is BUFFERED
        # A buffered body comes whole in one message: read as it is, not copied.
        body = bytes(self.body + chunk) if self.body else chunk
        self.body = bytearray()
        decided = time.monotonic()
        try:
            return await self._route(path, body)
        finally:
            counters.decision_seconds.observe(time.monotonic() - decided)

    async def _route(self, path: str, body: bytes) -> ProcessingResponse:
        try:
            request = inference_request(path, body)
        except InvalidInference as error:
            return self._refuse(400, str(error), "invalid_request")
        if problem := model_name_problem(request.model):
            return self._refuse(400, f"`model`: {problem}", "invalid_request")
        model = str(request.model)
        try:
            registry = await self.picker.registry(model)
        except REDIS_OUTAGES:
            return self._refuse(503, "kvadmin has no engine registry yet (Redis)", "unavailable")
        rows = registry.engines.get(model, [])
        if not rows:
            return self._refuse(404, f"no engine serves model {model!r}", "model_not_found")
        eligible = choice.eligible(rows, registry.serving, self.subset)
        self.addresses = eligible.addresses
        if not eligible.pods:
            which = "of the subset hint " if self.subset is not None else ""
            return self._refuse(503, f"no ready endpoint {which}serves {model!r}", "no_endpoint")
        decided, reason = await self.picker.decide(
            rows, request, eligible.pods, self.request_id, self.started
        )
        if decided is None:
            return self._route_to(self.picker.least_recent.ranked(eligible.pods), reason)
        if isinstance(decided, service.ScoreError):
            return self._refuse(decided.status, decided.message, "invalid_request")
        decision, recording = decided
        shed = knob("PICKER_SHED_WAIT_SECONDS")
        if shed > 0 and decision.estimates and min(e.wait_s for e in decision.estimates) > shed:
            # Before recording: a shed request neither queues on a pod nor enters the log.
            return self._refuse(429, "every endpoint's predicted wait is too long", "overloaded")
        self.decision = decision
        self.recording = self.picker.record_decision(recording)
        return self._route_to(choice.ranked(decision, eligible.pods), None)

    def _route_to(self, pods: list[str], degraded: str | None) -> ProcessingResponse:
        pods = pods[: 1 + knob("PICKER_FALLBACKS")]
        self.picker.least_recent.note(pods[0])
        if degraded is None:
            _ROUTED.inc()
        else:
            self.picker.degraded(degraded, pods[0], self.request_id)
            self.unrecorded = True
        decision_id = self.decision.decision_id if self.decision else None
        return protocol.route_to([self.addresses[pod] for pod in pods], decision_id)

    def _refuse(self, status: int, message: str, kind: str) -> ProcessingResponse:
        self.refused = True
        counters.answers.labels("refused").inc()
        counters.refused.labels(str(status)).inc()
        return protocol.refuse(status, message, kind)

    def outcome(self) -> outcomes.Outcome | str:
        """The outcome of the routed request from what its response showed, or why none."""
        if not self.ended:
            return "unfinished"
        if self.status != "200":
            return "not_ok"
        usage = self.usage.usage()
        if usage is None or self.first_chunk_at is None:
            return "no_usage"
        reported = {
            "prompt_tokens": usage.prompt_tokens,
            "cached_tokens": usage.cached_tokens,
            "ttft_ms": (self.first_chunk_at - self.started) * 1000,
        }
        try:
            outcome = outcomes.parse(reported)
        except outcomes.InvalidOutcome:
            return "no_usage"
        assert self.decision is not None
        chosen = self.addresses.get(self.decision.chosen or "")
        if self.served and self.served != chosen:
            by_address = {address: pod for pod, address in self.addresses.items()}
            outcome.served = by_address.get(self.served, self.served)
        return outcome
