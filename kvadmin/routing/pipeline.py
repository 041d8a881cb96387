"""The routing decision's pure core, between the two shells of `routing.service` (sync and
async): no I/O here, so a decision can be built and tested from a reply alone.

1. `plan(request, tokenized, active, started, requester, grouped) -> ReadPlan`: the request's
   block hashes and the input of the one script call (`scoring/lua/prefix_walk.lua`) that reads
   the index walk, the candidates' restarts and their routing state in one round trip
   (compatibility.md 5.8). A model whose index group is another Redis than REDIS_URL's
   (`grouped`, `kvadmin.index.groups`) has its walk and restarts read from its group in one
   call and its routing state, which stays on REDIS_URL, by the same script there
   (`ReadPlan.state_read`): two calls, sent together by both shells (one round trip).
2. `decide(plan, reply, state_reply) -> (Decision, RecordPlan)`: the scores, the choice under
   the request's policy (`scoring.policy.choose_pod`: `ttft` or `kthena`; the kthena score of
   every pod is computed, recorded and answered whatever the policy) and the decision, and
   what recording it writes: the decision log entry, the chosen pod's routing state
   (`scoring.route_record`) and the scoring metrics, queued on one pipeline by
   `RecordPlan.queue`.
"""

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any

import redis
from redis.asyncio.client import Pipeline as AsyncPipeline
from redis.client import Pipeline

from kvadmin.conf import knob, value_format
from kvadmin.metrics import recorder
from kvadmin.routing import decisions, requesters
from kvadmin.routing.decisions import CandidateEstimate, Decision, Dropped, PodExplanation
from kvadmin.routing.request import Checked
from kvadmin.routing.tokenize import Tokenized
from kvadmin.weights.active import ActiveWeights
from scoring import route_record
from scoring.hashing import block_hashes
from scoring.index import script_input, walk_reply
from scoring.keys import rank_status_keys
from scoring.policy import SPECULATIVE_MEDIUM, PolicyChoice, RouteRequest, choose_pod
from scoring.route_record import RouteAdvance
from scoring.route_state import (
    LoadReading,
    RouteState,
    StateRequest,
    load_reading,
    speculative_blocks,
)
from scoring.score import PodScore, ScoreResult, score_walk
from scoring.ttft import estimate_prefill
from scoring.weights import TierWeights


@dataclass(frozen=True, slots=True)
class ReadPlan:
    """What the one script call reads, and what deciding needs besides its reply."""

    request: Checked
    tokenized: Tokenized
    tokenize_ms: float
    active: ActiveWeights
    blocks: list[int]
    """The request's block hashes (at most MAX_BLOCKS)."""
    keys: list[str]
    args: list[bytes]
    state: StateRequest
    state_read: tuple[list[str], list[bytes]] | None
    """KEYS and ARGV of the routing state's own call on REDIS_URL, for a grouped model; None
    when `keys` and `args` read it with the walk."""
    started: float
    hash_ms: float
    requester: str
    """Who asks (`routing.requesters`): the one that may report the outcome."""


def plan(
    request: Checked,
    tokenized: Tokenized,
    active: ActiveWeights,
    started: float,
    requester: str = requesters.COMMAND,
    grouped: bool = False,
) -> ReadPlan:
    """The index read of `request`, whose token ids are `tokenized` (or given), asked for by
    `requester`; `grouped`: the model's index is on another Redis than its routing state."""
    hashing = perf_counter()
    tokens = request.token_ids if request.token_ids is not None else tokenized.tokens
    blocks = block_hashes(tokens, knob("BLOCK_SIZE"), knob("MAX_BLOCKS"))
    hashed = perf_counter()
    pods = request.pods
    state = StateRequest(request.model, pods, round(knob("ROUTING_IN_FLIGHT_SECONDS") * 1000))
    restarts = {c.pod: rank_status_keys(c.pod, c.dp_size) for c in request.candidates}
    fmt = value_format()
    keys, args = script_input(
        request.model, blocks, set(pods), {}, restarts, None if grouped else state, fmt
    )
    # The routing state's call walks block keys REDIS_URL does not hold: it stops at the first.
    state_read = (
        script_input(request.model, blocks, set(pods), {}, {}, state, fmt) if grouped else None
    )
    return ReadPlan(
        request=request,
        tokenized=tokenized,
        tokenize_ms=(hashing - started) * 1000 if request.token_ids is None else 0.0,
        active=active,
        blocks=blocks,
        keys=keys,
        args=args,
        state=state,
        state_read=state_read,
        started=started,
        hash_ms=(hashed - hashing) * 1000,
        requester=requester,
    )


@dataclass(frozen=True, slots=True)
class RecordPlan:
    """What recording a decision writes, in one pipelined round trip (`queue`, then
    `recorded` on its replies)."""

    decision: Decision
    advance: RouteAdvance | None
    """The chosen pod's routing state advance; None when no pod was chosen."""

    def queue(self, pipeline: Pipeline | AsyncPipeline) -> list[Any] | None:
        """Queue the decision log entry (unless DECISIONS_RECORD is off), the chosen pod's
        routing state and the scoring metrics. Returns the routing script's arguments (for
        `route_record.finish`), None when no pod was chosen."""
        logged = knob("DECISIONS_RECORD")
        script_args = None
        if self.advance is not None:
            entry = decisions.encode(self.decision) if logged else None
            script_args = route_record.queue_record(
                pipeline, self.advance, entry, knob("DECISIONS_MAX")
            )
        elif logged:
            decisions.queue_append(pipeline, self.decision)
        recorder.record_decision(pipeline, self.decision)
        return script_args

    def recorded(self, replies: list[Any]) -> None:
        """Take the log id from the replies (the first is the log entry's, when logged); raise
        the first failure (the caller logs it: the decision stands)."""
        failed = next((reply for reply in replies if isinstance(reply, Exception)), None)
        if failed is not None and not isinstance(failed, redis.exceptions.NoScriptError):
            raise failed
        if knob("DECISIONS_RECORD") and isinstance(replies[0], str):
            self.decision.log_id = replies[0]


def decide(
    plan: ReadPlan, reply: list[Any], state_reply: list[Any] | None = None
) -> tuple[Decision, RecordPlan]:
    """The decision from the script's `reply` (and for a grouped model the routing state's
    `state_reply`), and what recording it writes."""
    read = perf_counter()
    if plan.state_read is None:
        walk, state = walk_reply(reply, plan.state, value_format())
    else:
        walk, _ = walk_reply(reply, None, value_format())
        _, state = walk_reply(state_reply or [], plan.state, value_format())
    active, request, blocks = plan.active, plan.request, plan.blocks
    result = score_walk(walk, len(blocks), active.weights)
    model, pods, n_tokens = request.model, request.pods, plan.tokenized.count
    block_size = knob("BLOCK_SIZE")
    loads = _loads(state, model, n_tokens, block_size, active)
    route = RouteRequest(
        model=model,
        blocks=blocks,
        prompt_tokens=n_tokens,
        block_size=block_size,
        candidates=pods,
        runs={pod.pod: pod.media_runs for pod in result.pods},
        scores=result.scores,
        speculative=speculative_blocks(state, blocks) if state else {},
        loads={pod: reading.load for pod, reading in loads.items()},
        recent_work={pod: reading.recent_work_s for pod, reading in loads.items()},
    )
    choice = choose_pod(route, active.weights, request.policy, active.parameters)
    tokenized = plan.tokenized
    decision = Decision(
        decision_id=f"{time.time_ns() // 1_000_000:011x}{secrets.token_hex(4)}",
        ts=time.time(),
        request_id=request.request_id,
        model=model,
        input=request.source,
        tokens=n_tokens,
        blocks=result.n_blocks,
        first_block=blocks[0] if blocks else 0,
        longest_match=result.longest_match,
        candidates=pods,
        chosen=choice.chosen,
        tie_break=choice.tie_broken,
        scores=[_explained(pod) for pod in result.pods],
        dropped=Dropped(
            non_candidates=list(result.dropped_non_candidates),
            stale=list(result.dropped_stale),
        ),
        weights_version=active.version,
        weights=_weights_used(result, active.weights),
        timings_ms={
            "tokenize": plan.tokenize_ms,
            "hash": plan.hash_ms,
            "index": (read - plan.started) * 1000 - plan.tokenize_ms - plan.hash_ms,
            "score": (perf_counter() - read) * 1000,
            "total": (perf_counter() - plan.started) * 1000,
        },
        tokenizer=tokenized.source,
        tokens_estimated=tokenized.estimated,
        tokenizer_fallback=tokenized.fallback,
        policy=choice.policy,
        reason=choice.reason,
        estimates=_estimates(choice, loads, route),
        stale_loads=list(choice.stale_pods),
        requester=plan.requester,
    )
    return decision, RecordPlan(decision, _advance(decision, choice, blocks))


def _loads(
    state: RouteState | None, model: str, n_tokens: int, block_size: int, active: ActiveWeights
) -> dict[str, LoadReading]:
    """Each candidate's load under the resync rule (scoring.route_state). Before a pod has a
    mean predicted prefill, this request's prefill with no hit stands for it."""
    if state is None:
        return {}
    cold = estimate_prefill(
        model, n_tokens, (), block_size, 0, active.weights, active.parameters
    ).seconds
    fresh_s = knob("LOAD_STALE_SECONDS")
    return {
        pod: load_reading(raw, state.now_ms, fresh_s, cold, active.version)
        for pod, raw in state.pods.items()
    }


def _estimates(
    choice: PolicyChoice, loads: dict[str, LoadReading], route: RouteRequest
) -> list[CandidateEstimate]:
    """The cheapest ROUTING_ESTIMATES_MAX candidates' estimates, and the chosen pod's: every
    decision keeps them, so a fleet of hundreds of pods must not multiply the log's size."""
    limit = knob("ROUTING_ESTIMATES_MAX")
    estimates = []
    for rank, cost in enumerate(choice.candidates):
        if rank >= limit and cost.pod != choice.chosen:
            continue
        reading = loads.get(cost.pod)
        estimates.append(
            CandidateEstimate(
                pod=cost.pod,
                matched_blocks=cost.matched_blocks,
                speculative_blocks=cost.speculative_blocks,
                cached_tokens=cost.cached_tokens,
                uncached_tokens=cost.uncached_tokens,
                wait_s=cost.wait_s,
                queue_wait_s=reading.queue_wait_s if reading else 0.0,
                engine_waiting=reading.engine_waiting if reading else None,
                prefill_s=cost.prefill_s,
                reload_s=cost.reload_s,
                work_penalty_s=cost.work_penalty_s,
                cost_s=cost.cost_s,
                load_stale=cost.load_stale,
                running=route.loads[cost.pod].running if cost.pod in route.loads else 0,
                queued=route.loads[cost.pod].queued if cost.pod in route.loads else 0.0,
                wait_factor=reading.wait_factor if reading else 1.0,
                prefill_factor=reading.prefill_factor if reading else 1.0,
                prefill_offset_s=reading.prefill_offset if reading else 0.0,
                runs=list(cost.runs),
            )
        )
    return estimates


def _advance(decision: Decision, choice: PolicyChoice, blocks: list[int]) -> RouteAdvance | None:
    """What routing the request to the chosen pod adds to the pod's state, whatever the
    policy: a gateway sends the request there either way."""
    chosen = next((cost for cost in choice.candidates if cost.pod == choice.chosen), None)
    if chosen is None:
        return None
    held = decision.score_of(chosen.pod)
    return RouteAdvance(
        model=decision.model,
        pod=chosen.pod,
        decision_id=decision.decision_id,
        prefill_s=chosen.prefill_s,
        blocks=_not_in_gpu(blocks, held.runs if held else []),
        speculative_ttl_s=knob("ROUTING_SPECULATIVE_SECONDS"),
        speculative_max=knob("ROUTING_SPECULATIVE_MAX"),
        in_flight_window_s=knob("ROUTING_IN_FLIGHT_SECONDS"),
        in_flight_max=knob("ROUTING_IN_FLIGHT_MAX"),
    )


def _not_in_gpu(blocks: list[int], runs: Sequence[tuple[str | None, int]]) -> list[int]:
    """The request's blocks but those of the pod's matched run the index has in the medium a
    speculative entry stands for (SPECULATIVE_MEDIUM, GPU memory): an entry would price them
    as they are priced already, so they are not written. The speculative ZADD was the largest
    write of a decision (bench/api.py, Redis CPU per decision); a pod that holds most of a
    conversation now writes only the blocks it does not hold in GPU memory."""
    kept, position = [], 0
    for medium, count in runs:
        if medium != SPECULATIVE_MEDIUM:
            kept += blocks[position : position + count]
        position += count
    return kept + blocks[position:]


def _explained(scored: PodScore) -> PodExplanation:
    return PodExplanation(
        pod=scored.pod,
        score=scored.score,
        matched_blocks=scored.matched_blocks,
        weighted_sum=scored.weighted_sum,
        media={medium or "": count for medium, count in scored.media.items()},
        runs=list(scored.media_runs),
    )


def _weights_used(result: ScoreResult, weights: TierWeights) -> dict[str, float]:
    """The weight of every medium among the matched blocks ("" for no medium)."""
    media = {medium for pod in result.pods for medium, _ in pod.media_runs}
    return {medium or "": weights.weight_for(medium) for medium in media}
