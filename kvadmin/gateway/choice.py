"""Which endpoints one request goes to: the routing service's decision (the same call as the
score API's lean path), or, when it cannot be had in time, a cheap degraded choice from this
process's memory.

`decide` and `record` are the calls into kvadmin/routing/service.py: the same policy,
weights, TTFT parameters, speculative entries, decision log, live feed and explanation as
POST /api/v1/score, in the same one Redis round trip for the read and one for the record. The
record is apart so that the picker answers the gateway first, and sheds a request before
anything of it is recorded.
"""

import time
from collections.abc import Sequence
from dataclasses import dataclass

import redis.asyncio

from kvadmin.gateway.inference_request import InferenceRequest
from kvadmin.routing import requesters, service
from kvadmin.routing.decisions import Decision
from kvadmin.routing.pipeline import RecordPlan
from kvadmin.routing.request import request_of
from kvadmin.weights.active import ActiveWeights


@dataclass(frozen=True, slots=True)
class Eligible:
    """The endpoints a request may go to: the model's enabled engines with a serving
    address (those of the subset hint, when one is given), in registry order."""

    pods: list[str]
    addresses: dict[str, str]
    """ip:port by pod."""

    def endpoints(self, pods: Sequence[str]) -> list[str]:
        return [self.addresses[pod] for pod in pods]


def eligible(
    rows: Sequence[service.EngineRow], serving: dict[str, str], subset: list[str] | None
) -> Eligible:
    allowed = None if subset is None else set(subset)
    addresses = {
        pod: serving[pod]
        for pod, *_, enabled in rows
        if enabled and pod in serving and (allowed is None or serving[pod] in allowed)
    }
    return Eligible(list(addresses), addresses)


async def decide(
    client: redis.asyncio.Redis,
    engines: Sequence[service.EngineRow],
    active: ActiveWeights,
    request: InferenceRequest,
    pods: list[str],
    request_id: str | None,
    deadline: float,
) -> tuple[Decision, RecordPlan]:
    """The routing service's decision among `pods` and its recording, not yet written
    (raises its `ScoreError`s, Redis's outage errors and `DeadlinePassed` as it does)."""
    given = {"token_ids": request.token_ids, "prompt": request.prompt, "messages": request.messages}
    asked = request_of(
        request.model,
        **{name: value for name, value in given.items() if value is not None},
        pods=pods,
        request_id=request_id,
    )
    return await service.decided_async(
        client, engines, active, asked, requester=requesters.ENDPOINT_PICKER, deadline=deadline
    )


def ranked(decision: Decision, pods: Sequence[str]) -> list[str]:
    """The chosen pod, then the next candidates by cost (the `ttft` estimates, cheapest first),
    by score, then the rest: the fallbacks a gateway retries in order."""
    order = [decision.chosen] if decision.chosen else []
    order += [estimate.pod for estimate in decision.estimates]
    order += [scored.pod for scored in decision.scores]
    order += pods
    return [pod for pod in dict.fromkeys(order) if pod in pods]


class LeastRecent:
    """When this process last sent a request to each pod: the degraded choice is the pod it
    routed to least recently (never routed first), a round robin that needs no Redis."""

    def __init__(self) -> None:
        self._at: dict[str, float] = {}

    def note(self, pod: str) -> None:
        self._at[pod] = time.monotonic()

    def ranked(self, pods: Sequence[str]) -> list[str]:
        return sorted(pods, key=lambda pod: (self._at.get(pod, float("-inf")), pod))
