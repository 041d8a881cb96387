"""Routing simulated traffic by asking kvadmin's scoring API, as a gateway would."""

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

from kvadmin.fleet.traffic import PodEndpoint, RandomRouter, RequestRecord
from kvadmin.log_once import OncePerKind

logger = logging.getLogger(__name__)


class ScoringApiRouter:
    """POSTs token ids to `/api/v1/score` and sends the request where kvadmin chose.

    Predicts the cached tokens as the chosen pod's matched blocks, less the last prompt token,
    which engines always recompute. When the API cannot answer (the web server is still
    starting, say) the request is routed at random and the failure logged once.

    After the pod answers, `report_outcome` posts its usage as the decision's outcome
    (`/api/v1/decisions/<id>/outcome`, the same token's `score` scope). The decision id is that
    of the last request routed: the traffic generator routes and sends one request at a time.
    """

    def __init__(self, api_url: str, token: str, block_size: int = 16, timeout: float = 5.0):
        self.api_url = api_url.rstrip("/")
        self.url = self.api_url + "/api/v1/score"
        self.token = token
        self.block_size = block_size
        self.timeout = timeout
        self.fallback = RandomRouter()
        self._failing = False
        self._reporting = OncePerKind(logger)
        self._decision_id: str | None = None
        self.outcomes_reported = 0

    def choose(
        self, model: str, token_ids: Sequence[int], pods: Sequence[PodEndpoint], request_id: str
    ) -> tuple[PodEndpoint, int | None]:
        self._decision_id = None
        body = {
            "model": model,
            "token_ids": list(token_ids),
            "pods": [p.name for p in pods],
            "request_id": request_id,
        }
        try:
            decision = self._post(self.url, body)
        except (OSError, ValueError) as error:
            if not self._failing:
                logger.warning("scoring API unavailable (%s): routing at random", error)
                self._failing = True
            return self.fallback.choose(model, token_ids, pods, request_id)
        self._failing = False
        by_name = {pod.name: pod for pod in pods}
        chosen = by_name.get(decision.get("chosen") or "")
        if chosen is None:
            return self.fallback.choose(model, token_ids, pods, request_id)
        decision_id = decision.get("decision_id")
        self._decision_id = decision_id if isinstance(decision_id, str) else None
        matched = next(
            (s["matched_blocks"] for s in decision.get("scores", []) if s["pod"] == chosen.name),
            0,
        )
        full_blocks = (len(token_ids) - 1) // self.block_size
        return chosen, min(matched, full_blocks) * self.block_size

    def report_outcome(self, record: RequestRecord, ttft_ms: float | None) -> None:
        """Post what the pod reported for the request last routed by the API (a request routed
        at random has no decision). A failure is logged once until reporting works again."""
        decision_id, self._decision_id = self._decision_id, None
        if decision_id is None:
            return
        body: dict[str, int | float] = {
            "cached_tokens": record.cached_tokens,
            "prompt_tokens": record.prompt_tokens,
        }
        if ttft_ms is not None:
            body["ttft_ms"] = ttft_ms
        try:
            self._post(f"{self.api_url}/api/v1/decisions/{decision_id}/outcome", body)
        except (OSError, ValueError) as error:
            self._reporting.failed(
                "outcome", "outcome of decision %s not reported: %s", decision_id, error
            )
            return
        self._reporting.recovered("outcome")
        self.outcomes_reported += 1

    def _post(self, url: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            url,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            return json.load(response)
