"""Routing simulated traffic by asking kvadmin's scoring API, as a gateway would."""

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Sequence

from kvadmin.fleet.traffic import PodEndpoint, RandomRouter

logger = logging.getLogger(__name__)


class ScoringApiRouter:
    """POSTs token ids to `/api/v1/score` and sends the request where kvadmin chose.

    Predicts the cached tokens as the chosen pod's matched blocks, less the last prompt token,
    which engines always recompute. When the API cannot answer (the web server is still
    starting, say) the request is routed at random and the failure logged once.
    """

    def __init__(self, api_url: str, token: str, block_size: int = 16, timeout: float = 5.0):
        self.url = api_url.rstrip("/") + "/api/v1/score"
        self.token = token
        self.block_size = block_size
        self.timeout = timeout
        self.fallback = RandomRouter()
        self._failing = False

    def choose(
        self, model: str, token_ids: Sequence[int], pods: Sequence[PodEndpoint]
    ) -> tuple[PodEndpoint, int | None]:
        body = {"model": model, "token_ids": list(token_ids), "pods": [p.name for p in pods]}
        request = urllib.request.Request(
            self.url,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                decision = json.load(response)
        except (OSError, ValueError) as error:
            if not self._failing:
                logger.warning("scoring API unavailable (%s): routing at random", error)
                self._failing = True
            return self.fallback.choose(model, token_ids, pods)
        self._failing = False
        by_name = {pod.name: pod for pod in pods}
        chosen = by_name.get(decision.get("chosen") or "")
        if chosen is None:
            return self.fallback.choose(model, token_ids, pods)
        matched = next(
            (s["matched_blocks"] for s in decision.get("scores", []) if s["pod"] == chosen.name),
            0,
        )
        full_blocks = (len(token_ids) - 1) // self.block_size
        return chosen, min(matched, full_blocks) * self.block_size
