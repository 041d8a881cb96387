"""Routed requests with delivered outcomes, written as the product writes them: the decision
into the real log (and the id index route_record.lua keeps), the outcome through
`outcomes.record` (the real script), so readers see exactly what a gateway's posts leave."""

import itertools
import time

import redis

from kvadmin.routing import decisions, outcomes
from kvadmin.routing.decisions import CandidateEstimate, Decision, Dropped, PodExplanation
from scoring import keys

BLOCK_SIZE = 16
_ids = itertools.count()


def routed(
    client: redis.Redis,
    pod: str,
    *,
    prompt: int,
    ttft_s: float,
    predicted_s: float,
    model: str = "m",
    requester: str = "gateway",
    cached: int = 0,
    wait_s: float = 0.0,
    running: int = 0,
    at: float | None = None,
    served: str | None = None,
) -> Decision:
    """One request routed to `pod`, predicted `wait_s` + `predicted_s`, delivered `ttft_s`."""
    blocks = cached // BLOCK_SIZE
    estimate = CandidateEstimate(
        pod=pod,
        matched_blocks=blocks,
        speculative_blocks=0,
        cached_tokens=cached,
        uncached_tokens=prompt - cached,
        wait_s=wait_s,
        queue_wait_s=wait_s,
        engine_waiting=0,
        prefill_s=predicted_s - wait_s,
        reload_s=0.0,
        work_penalty_s=0.0,
        cost_s=predicted_s,
        load_stale=False,
        running=running,
        runs=[("GPU", blocks)] if blocks else [],
    )
    decision = Decision(
        decision_id=f"{time.time_ns():x}{next(_ids):06x}",
        ts=time.time() if at is None else at,
        request_id=None,
        model=model,
        input="token_ids",
        tokens=prompt,
        blocks=prompt // BLOCK_SIZE,
        first_block=1,
        longest_match=blocks,
        candidates=[pod],
        chosen=pod,
        tie_break=False,
        scores=[
            PodExplanation(
                pod=pod, score=0, matched_blocks=blocks, weighted_sum=0.0, media={}, runs=[]
            )
        ],  # fmt: skip
        dropped=Dropped(non_candidates=[], stale=[]),
        weights_version=1,
        weights={"GPU": 1.0},
        timings_ms={},
        policy="ttft",
        estimates=[estimate],
        requester=requester,
    )
    decisions.append(decision, client)
    client.zadd(keys.DECISION_IDS_KEY, {decision.decision_id: int(decision.ts * 1000)})
    outcome = outcomes.Outcome(
        cached_tokens=cached, prompt_tokens=prompt, ttft_ms=ttft_s * 1000, served=served
    )
    assert outcomes.record(client, decision, outcome, BLOCK_SIZE) == "recorded"
    return decision
