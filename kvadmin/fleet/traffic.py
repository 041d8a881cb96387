"""The traffic generator: sends a workload to pods over HTTP, one routed request at a time, and
compares what the router predicted with the hit the pod reports.

Per request: 1. take the next request from the workload; 2. get its token ids from a pod's
`/tokenize` (as kthena does; the next pod is tried on failure); 3. ask the router for a pod and a
predicted hit; 4. send the request to that pod; 5. record predicted and actual cached tokens (per
medium when the pod reports them, as simulated pods do) and tell a router that takes outcomes
(`ReportsOutcomes`) what the pod reported; 6. feed a chat reply back to its conversation. It
works against real OpenAI-compatible engines too, minus the per-medium split.

Each request has an id, as a gateway gives it (a UUID, like Envoy's x-request-id): the router
gets it with the request (kvadmin's scoring API records it with the decision, so request-id
search finds the demo's requests) and the pod gets it in `X-Request-Id`.

Through a gateway (`ThroughGateway`: Envoy asking kvadmin's endpoint picker), steps 2 to 4
are the gateway's: the request goes to it as a client sends it, with its id in `X-Request-Id`,
and the gateway routes it and records its outcome; the pod is read from the answer.
"""

import http.client
import itertools
import json
import logging
import random
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from kvadmin.fleet.workload import SimRequest, Workload

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PodEndpoint:
    """A routing target: the pod id kthena's router knows it by and its HTTP base URL."""

    name: str
    url: str
    kind: str
    model: str


class Router(Protocol):
    def choose(
        self, model: str, token_ids: Sequence[int], pods: Sequence[PodEndpoint], request_id: str
    ) -> tuple[PodEndpoint, int | None]:
        """The pod to send the request to, and the cached tokens it is expected to hit
        (None when the router makes no prediction)."""
        ...


@runtime_checkable
class ReportsOutcomes(Protocol):
    """A router that wants to hear how the request it just routed went (kvadmin's scoring API
    takes the engine's usage as the decision's outcome)."""

    def report_outcome(self, record: "RequestRecord", ttft_ms: float | None) -> None: ...


class RandomRouter:
    """Uniformly random, no prediction: the baseline."""

    def __init__(self, seed: int = 0) -> None:
        self._rng = random.Random(seed)

    def choose(
        self, model: str, token_ids: Sequence[int], pods: Sequence[PodEndpoint], request_id: str
    ) -> tuple[PodEndpoint, int | None]:
        return self._rng.choice(list(pods)), None


@dataclass(frozen=True, slots=True)
class ThroughGateway:
    """Send every request to a gateway at `url`, which chooses the pod (and records the
    decision and its outcome) itself: nothing to choose, predict or report here."""

    url: str


@dataclass(frozen=True, slots=True)
class RequestRecord:
    index: int
    pod: str
    conversation: int | None
    prompt_tokens: int
    predicted_cached_tokens: int | None
    cached_tokens: int
    cached_by_medium: dict[str, int]
    seconds: float


@dataclass(slots=True)
class TrafficSummary:
    """Totals over every request sent; `cached_tokens` is the prefill work the fleet skipped."""

    requests: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    cached_by_medium: dict[str, int] = field(default_factory=dict)
    requests_by_pod: dict[str, int] = field(default_factory=dict)
    computed_tokens_by_pod: dict[str, int] = field(default_factory=dict)
    predictions: int = 0
    exact_predictions: int = 0
    prediction_abs_error: int = 0

    def add(self, record: RequestRecord) -> None:
        self.requests += 1
        self.prompt_tokens += record.prompt_tokens
        self.cached_tokens += record.cached_tokens
        for medium, tokens in record.cached_by_medium.items():
            self.cached_by_medium[medium] = self.cached_by_medium.get(medium, 0) + tokens
        self.requests_by_pod[record.pod] = self.requests_by_pod.get(record.pod, 0) + 1
        computed = record.prompt_tokens - record.cached_tokens
        self.computed_tokens_by_pod[record.pod] = (
            self.computed_tokens_by_pod.get(record.pod, 0) + computed
        )
        if record.predicted_cached_tokens is not None:
            error = abs(record.predicted_cached_tokens - record.cached_tokens)
            self.predictions += 1
            self.exact_predictions += error == 0
            self.prediction_abs_error += error

    @property
    def hit_rate(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def hit_rate_by_medium(self) -> dict[str, float]:
        total = self.prompt_tokens or 1
        return {m: tokens / total for m, tokens in sorted(self.cached_by_medium.items())}

    @property
    def load_spread(self) -> float:
        """Busiest pod's requests over the mean over every pod, idle ones included (1.0 is
        perfectly even; the number of pods means one pod got everything)."""
        counts = self.requests_by_pod.values()
        if not sum(counts):
            return 0.0
        return max(counts) / (sum(counts) / len(counts))

    @property
    def mean_prediction_error(self) -> float | None:
        return self.prediction_abs_error / self.predictions if self.predictions else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "failed": self.failed,
            "prompt_tokens": self.prompt_tokens,
            "prefill_tokens_saved": self.cached_tokens,
            "hit_rate": self.hit_rate,
            "hit_rate_by_medium": self.hit_rate_by_medium,
            "requests_by_pod": dict(sorted(self.requests_by_pod.items())),
            "computed_tokens_by_pod": dict(sorted(self.computed_tokens_by_pod.items())),
            "load_spread": self.load_spread,
            "predictions": self.predictions,
            "exact_predictions": self.exact_predictions,
            "mean_prediction_error": self.mean_prediction_error,
        }

    def format(self) -> str:
        by_medium = ", ".join(f"{m} {r:.1%}" for m, r in self.hit_rate_by_medium.items())
        lines = [
            f"requests {self.requests} ({self.failed} failed), prompt tokens {self.prompt_tokens}",
            f"hit rate {self.hit_rate:.1%} ({by_medium or 'no hits'})",
            f"prefill tokens saved {self.cached_tokens}",
            f"load spread {self.load_spread:.2f} (max/mean requests per pod) "
            + " ".join(f"{pod}={n}" for pod, n in sorted(self.requests_by_pod.items())),
        ]
        if self.predictions:
            lines.append(
                f"predictions exact {self.exact_predictions}/{self.predictions}, "
                f"mean abs error {self.mean_prediction_error:.1f} tokens"
            )
        return "\n".join(lines)


class RequestFailed(Exception):
    pass


class _JsonClient:
    """POSTs JSON over one kept-alive connection per host. A kept-alive connection that fails
    (the server may have closed it) is replaced once; a fresh one that fails is a failure."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._connections: dict[str, http.client.HTTPConnection] = {}

    def post(
        self, base_url: str, path: str, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> dict[str, Any]:
        parts = urlsplit(base_url)
        url, data = parts.path.rstrip("/") + path, json.dumps(body).encode()
        sent = {"Content-Type": "application/json"} | (headers or {})
        kept = self._connections.get(parts.netloc)
        if kept is not None:
            try:
                return self._exchange(kept, url, data, sent)
            except (OSError, http.client.HTTPException):
                self._drop(parts.netloc)
        try:
            return self._exchange(self._connect(parts.netloc), url, data, sent)
        except (OSError, http.client.HTTPException) as error:
            self._drop(parts.netloc)
            raise RequestFailed(f"{base_url}{path}: {error}") from error

    def _exchange(
        self, connection: http.client.HTTPConnection, url: str, data: bytes, headers: dict[str, str]
    ) -> dict[str, Any]:
        connection.request("POST", url, data, headers)
        response = connection.getresponse()
        payload = response.read()
        if response.status != 200:
            where = f"{connection.host}:{connection.port}{url}"
            raise RequestFailed(f"{where}: HTTP {response.status} {payload[:200]!r}")
        return json.loads(payload)

    def _drop(self, netloc: str) -> None:
        connection = self._connections.pop(netloc, None)
        if connection is not None:
            connection.close()

    def _connect(self, netloc: str) -> http.client.HTTPConnection:
        connection = http.client.HTTPConnection(netloc, timeout=self.timeout)
        connection.connect()
        # http.client sends a large body apart from its headers: without NODELAY, Nagle holds
        # the body until the server's delayed ACK, 40 ms per request.
        connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._connections[netloc] = connection
        return connection

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()


class TrafficGenerator:
    """Routes and sends a workload's requests; `summary` totals everything sent, `records`
    keeps the latest `keep` requests."""

    def __init__(
        self,
        pods: Sequence[PodEndpoint],
        router: Router | ThroughGateway,
        workload: Workload,
        timeout: float = 10.0,
        keep: int = 100_000,
        on_record: Callable[[RequestRecord], None] | None = None,
    ) -> None:
        if not pods:
            raise ValueError("traffic needs at least one pod")
        self.pods = list(pods)
        self.router = router
        self.workload = workload
        self.on_record = on_record
        self.records: deque[RequestRecord] = deque(maxlen=keep)
        self.summary = TrafficSummary(
            requests_by_pod=dict.fromkeys((p.name for p in self.pods), 0),
            computed_tokens_by_pod=dict.fromkeys((p.name for p in self.pods), 0),
        )
        self._client = _JsonClient(timeout)
        self._sent = 0

    def tokenize(self, request: SimRequest) -> list[int]:
        """Token ids from a pod's /tokenize, trying the pods in turn from a rotating start."""
        errors = []
        for offset in range(len(self.pods)):
            pod = self.pods[(self._sent + offset) % len(self.pods)]
            try:
                return self._client.post(pod.url, "/tokenize", request.tokenize_body)["tokens"]
            except RequestFailed as error:
                errors.append(str(error))
        raise RequestFailed("no pod could tokenize: " + "; ".join(errors))

    def step(self) -> RequestRecord:
        """Send one request and record it."""
        request = self.workload.next_request()
        request_id = str(uuid.uuid4())
        started = time.monotonic()
        headers = {"X-Request-Id": request_id}
        if isinstance(self.router, ThroughGateway):
            response = self._client.post(self.router.url, request.path, request.body, headers)
            pod_name, predicted, token_count = "", None, 0
        else:
            token_ids = self.tokenize(request)
            pod, predicted = self.router.choose(
                self.workload.model, token_ids, self.pods, request_id
            )
            response = self._client.post(pod.url, request.path, request.body, headers)
            pod_name, token_count = pod.name, len(token_ids)
        usage = response.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        extension = response.get("kvadmin") or {}
        record = RequestRecord(
            index=self._sent,
            # A real engine behind a gateway does not say which pod it is.
            pod=pod_name or str(extension.get("pod") or "gateway"),
            conversation=request.conversation,
            prompt_tokens=int(usage.get("prompt_tokens", token_count)),
            predicted_cached_tokens=predicted,
            cached_tokens=int(details.get("cached_tokens") or 0),
            cached_by_medium=dict(extension.get("cached_tokens_by_medium") or {}),
            seconds=time.monotonic() - started,
        )
        if isinstance(self.router, ReportsOutcomes):
            self.router.report_outcome(record, _ttft_ms(extension))
        choice = (response.get("choices") or [{}])[0]
        self.workload.record_reply(request, (choice.get("message") or {}).get("content", ""))
        self._sent += 1
        self.records.append(record)
        self.summary.add(record)
        if self.on_record:
            self.on_record(record)
        return record

    def run(
        self,
        requests: int | None = None,
        rate: float | None = None,
        stop: threading.Event | None = None,
    ) -> TrafficSummary:
        """Send `requests` requests (forever when None, until `stop` is set), at most `rate`
        per second when given. A request that fails is counted in `summary.failed`, logged,
        and the traffic goes on."""
        stop = stop or threading.Event()
        interval = 1.0 / rate if rate else 0.0
        next_at = time.monotonic()
        for _ in itertools.count() if requests is None else range(requests):
            if stop.is_set():
                break
            try:
                self.step()
            except RequestFailed as error:
                self.summary.failed += 1
                logger.warning("simulated traffic: %s", error)
            next_at += interval
            if interval and stop.wait(max(0.0, next_at - time.monotonic())):
                break
        return self.summary

    def close(self) -> None:
        self._client.close()


def _ttft_ms(extension: dict[str, Any]) -> float | None:
    """A simulated pod's time to first token: its queueing and its prefill. A real engine's
    non-streamed answer does not say: None."""
    queued, prefill = extension.get("queued_ms"), extension.get("prefill_ms")
    if not isinstance(queued, int | float) or not isinstance(prefill, int | float):
        return None
    return float(queued) + float(prefill)
