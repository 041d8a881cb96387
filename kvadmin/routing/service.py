"""Scoring one request: the one function the API, the CLI and the explain page call.

`score()` validates the request, picks the candidates, gets token ids, reads the index once,
chooses a pod and records the decision:

1. Candidates: the enabled engines serving the model, or the `pods` given (each must be a
   registered engine of the model).
2. Token ids: given, or from the model's local tokenizer or a candidate engine's /tokenize
   (`routing.tokenize`); the decision records which (`tokenizer`).
3. `scoring.index.read_for_routing` with the active tier weights (and, for the policy, the
   active TTFT parameters of the same version: `weights.active`), in one Redis round trip
   (compatibility.md 5.8) that also reads each candidate's last (re)start as the ingest reader
   recorded it per stream, so ownership written before it is dropped (compatibility.md 2.4 step 1);
   a data-parallel pod starts when all its ranks have (the earliest rank start counts). The same
   round trip reads each candidate's routing state (`scoring.route_state`): virtual queue,
   requests in flight, speculative entries, the engine's scraped load.
4. `scoring.policy.choose_pod` under the request's policy (`policy`, default the
   ROUTING_POLICY knob): `ttft`, the lowest estimated time to first token, or `kthena`, the
   highest score (ties and no-hit requests by rendezvous hashing). The kthena score of every
   pod is computed, recorded and answered whatever the policy.
5. The decision goes to the decision log (`routing.decisions`), the chosen pod's routing state
   advances (`scoring.route_record`: its queue by the request's predicted prefill, its
   speculative entries by the request's blocks, atomically in Redis), and the scoring metrics
   (`metrics.recorder`) are counted, in one pipelined round trip, and nothing else: the live
   feed reads the log on its own (`routing.tail`). An unrecorded scoring (`record=False`, an
   explain page) writes nothing, routing state included.

`scored()` is `score()` also returning the request's block hashes, for the explain page
(kvadmin/residency/explain.py), which lays its grid out over them.

`score_async()` is the same steps for the API's lean path (kvadmin/api/fast_path.py) on an
event loop: the steps that touch nothing are shared, the Redis round trips go through
redis.asyncio, and the registry and the weights come from the caller's per-process caches
instead of the database.

Errors are one exception class per kind, each with the `field` at fault (None when no field
is) and a message, and the HTTP status a view should answer with.
"""

import asyncio
import contextlib
import logging
import secrets
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any

import redis
import redis.asyncio
from redis.asyncio.client import Pipeline as AsyncPipeline
from redis.client import Pipeline

from kvadmin.conf import knob, value_format
from kvadmin.engines.model_names import model_name_problem
from kvadmin.engines.models import Engine
from kvadmin.metrics import recorder
from kvadmin.redis_clients import REDIS_OUTAGES, index_client
from kvadmin.routing import decisions, requesters
from kvadmin.routing.decisions import CandidateEstimate, Decision, Dropped, PodExplanation
from kvadmin.routing.tokenize import Messages, TokenizationFailed, Tokenized, Tokenizer, tokenize
from kvadmin.weights.active import ActiveWeights, active_weights
from scoring import route_record
from scoring.index import RoutingRead, read_for_routing, read_for_routing_async
from scoring.keys import rank_status_keys
from scoring.policy import (
    DEFAULT_POLICY,
    POLICIES,
    SPECULATIVE_MEDIUM,
    Policy,
    PolicyChoice,
    RouteRequest,
    choose_pod,
)
from scoring.route_record import RouteAdvance
from scoring.route_state import (
    LoadReading,
    RouteState,
    StateRequest,
    load_reading,
    speculative_blocks,
)
from scoring.score import PodScore, ScoreResult
from scoring.ttft import TtftParameters, estimate_prefill
from scoring.weights import TierWeights

log = logging.getLogger(__name__)

INPUTS = ("token_ids", "prompt", "messages")
MAX_REQUEST_ID = 200


class ScoreError(Exception):
    """A request that cannot be scored. `field`: the request field at fault, if any."""

    status = 400

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class InvalidScoreRequest(ScoreError):
    """Bad input (400): a missing model, none or several inputs, bad token ids, too many
    tokens, unknown candidate pods..."""


class ModelNotServed(ScoreError):
    """No engine serves the model (422)."""

    status = 422


class TokenizationUnavailable(ScoreError):
    """Every candidate engine failed to tokenize the text (503)."""

    status = 503


class IndexUnavailable(ScoreError):
    """Redis refused a read of the index (503); an outage itself is raised as it is."""

    status = 503


EngineRow = tuple[str, str, str, int, str, bool]
"""An engine as scoring needs it: pod, kind, HTTP base URL, dp_size, tokenizer, enabled."""
ENGINE_COLUMNS = ("pod", "kind", "http_base_url", "dp_size", "tokenizer", "enabled")


@dataclass(frozen=True, slots=True)
class _Candidate:
    pod: str
    kind: str
    http_base_url: str
    dp_size: int
    tokenizer: str


@dataclass(frozen=True, slots=True)
class Scored:
    """A decision and what scoring computed on the way to it, for a page that shows more than
    the decision (the explain page): nothing is tokenized or hashed twice."""

    decision: Decision
    blocks: list[int]
    """The request's block hashes, as the index read hashed them (`decision.n_blocks`)."""


def score(model: object, **request: Any) -> Decision:
    """The decision alone: `scored(model, **request).decision`."""
    return scored(model, **request).decision


def scored(
    model: object,
    *,
    token_ids: object = None,
    prompt: object = None,
    messages: object = None,
    pods: object = None,
    request_id: object = None,
    policy: object = None,
    record: bool = True,
    requester: str = requesters.COMMAND,
) -> Scored:
    """Score `model`'s candidate pods for one request given as exactly one of `token_ids`
    (non-negative ints), `prompt` (text) or `messages` (chat: [{"role", "content"}]).

    Arguments arrive as the client sent them (JSON values) and are validated here. Raises a
    `ScoreError` subclass. Records the decision in the log when `record` (and the
    DECISIONS_RECORD knob) allow; a log that cannot be written is logged, not raised: the
    caller still gets its decision (with an empty `log_id`). `requester`: who asks
    (`routing.requesters`), the one that may report the outcome.
    """
    started = perf_counter()
    request = _validated(model, token_ids, prompt, messages, pods, request_id, policy)
    candidates = _candidates(request.model, request.pods, registered(request.model))
    prepared = _prepared(request, candidates, active_weights(), started)
    client = index_client()
    try:
        read = read_for_routing(client, **prepared.read_arguments())
    except REDIS_OUTAGES:
        raise  # an outage, answered as one by the caller (kvadmin/unavailable.py on the web)
    except redis.RedisError as error:
        recorder.record_scoring_error(client, prepared.model, "redis")
        raise IndexUnavailable(f"the index is unavailable: {error}") from None
    decision, advance = _decided(prepared, read)
    decision.requester = requester
    if record:
        pipeline = client.pipeline(transaction=False)
        script_args = _queue_record(pipeline, decision, advance)
        try:
            replies = pipeline.execute(raise_on_error=False)
            if script_args is not None:
                replies[0] = route_record.finish(client, replies[0], script_args).log_id
            _recorded(decision, replies)
        except redis.RedisError as error:
            log.warning("decision %s not recorded: %s", decision.id, error)
    return Scored(decision, read.blocks)


async def score_async(
    client: redis.asyncio.Redis,
    engines: Sequence[EngineRow],
    active: ActiveWeights,
    model: object,
    *,
    token_ids: object = None,
    prompt: object = None,
    messages: object = None,
    pods: object = None,
    request_id: object = None,
    policy: object = None,
    token_ids_checked: bool = False,
    requester: str = requesters.COMMAND,
) -> Decision:
    """`score` for an event loop (the API's lean path, kvadmin/api/fast_path.py): the same
    validation, read, choice and recording, with Redis through `client` (redis.asyncio) and
    the registry (`engines`, rows of `registered`) and weights from the caller's caches.
    Text is tokenized in a worker thread (local tokenizers and engine calls block).

    `token_ids_checked`: the caller's decoder already made `token_ids` a list of ints from 0
    to 2**32-1 (kvadmin/api/contract.py, in C), so only their count is checked again: the
    second pass over a request's thousands of ids cost more web CPU than its scoring."""
    started = perf_counter()
    request = _validated(
        model, token_ids, prompt, messages, pods, request_id, policy, token_ids_checked
    )
    candidates = _candidates(request.model, request.pods, engines)
    if request.source == "token_ids":
        prepared = _prepared(request, candidates, active, started)
    else:
        prepared = await asyncio.to_thread(_prepared, request, candidates, active, started)
    try:
        read = await read_for_routing_async(client, **prepared.read_arguments())
    except REDIS_OUTAGES:
        raise
    except redis.RedisError as error:
        pipeline = client.pipeline(transaction=False)
        recorder.record_scoring_error(pipeline, prepared.model, "redis")
        with contextlib.suppress(redis.RedisError):
            await pipeline.execute()
        raise IndexUnavailable(f"the index is unavailable: {error}") from None
    decision, advance = _decided(prepared, read)
    decision.requester = requester
    pipeline = client.pipeline(transaction=False)
    script_args = _queue_record(pipeline, decision, advance)
    try:
        replies = await pipeline.execute(raise_on_error=False)
        if script_args is not None:
            recorded = await route_record.finish_async(client, replies[0], script_args)
            replies[0] = recorded.log_id
        _recorded(decision, replies)
    except redis.RedisError as error:
        log.warning("decision %s not recorded: %s", decision.id, error)
    return decision


@dataclass(frozen=True, slots=True)
class _Request:
    """A score request once validated (`_validated`)."""

    model: str
    source: str
    """Which input was given: one of INPUTS."""
    token_ids: list[int] | None
    prompt: str | None
    messages: Messages | None
    pods: list[str] | None
    request_id: str | None
    policy: Policy


@dataclass(frozen=True, slots=True)
class _Prepared:
    """Everything the index read needs: the request, its candidates and token ids."""

    started: float
    request: _Request
    candidates: list[_Candidate]
    tokens: Sequence[int]
    tokenized: Tokenized
    tokenize_ms: float
    active: ActiveWeights
    block_size: int

    @property
    def model(self) -> str:
        return self.request.model

    @property
    def pods(self) -> list[str]:
        return [candidate.pod for candidate in self.candidates]

    def read_arguments(self) -> dict[str, Any]:
        """The arguments of `scoring.index.read_for_routing` (and its async twin)."""
        pods = self.pods
        return {
            "model": self.model,
            "token_ids": self.tokens,
            "candidates": set(pods),
            "pod_started_at": {},
            "weights": self.active.weights,
            "block_size": self.block_size,
            "max_blocks": knob("MAX_BLOCKS"),
            "start_keys": {c.pod: rank_status_keys(c.pod, c.dp_size) for c in self.candidates},
            "value_format": value_format(),
            "state": StateRequest(
                self.model, pods, round(knob("ROUTING_IN_FLIGHT_SECONDS") * 1000)
            ),
        }


def _validated(
    model: object,
    token_ids: object,
    prompt: object,
    messages: object,
    pods: object,
    request_id: object,
    policy: object,
    token_ids_checked: bool = False,
) -> _Request:
    model = _model(model)
    source, value = _one_input(token_ids, prompt, messages)
    limit = knob("SCORE_MAX_TOKENS")
    return _Request(
        model=model,
        source=source,
        token_ids=_token_ids(value, limit, token_ids_checked) if source == "token_ids" else None,
        prompt=_prompt(value) if source == "prompt" else None,
        messages=_messages(value) if source == "messages" else None,
        pods=_pods(pods),
        request_id=_request_id(request_id),
        policy=_policy(policy),
    )


def _prepared(
    request: _Request, candidates: list[_Candidate], active: ActiveWeights, started: float
) -> _Prepared:
    """The request's token ids: given, or tokenized (which may call engines: blocking)."""
    tokens: Sequence[int]
    if request.token_ids is None:
        asked = perf_counter()
        limit = knob("SCORE_MAX_TOKENS")
        tokenized = _tokenized(
            request.model, candidates, request.prompt, request.messages, limit, request.source
        )
        tokens = tokenized.tokens
        tokenize_ms = (perf_counter() - asked) * 1000
    else:
        tokens, tokenize_ms = request.token_ids, 0.0
        tokenized = Tokenized(array("I"), len(tokens), "given")
    return _Prepared(
        started=started,
        request=request,
        candidates=candidates,
        tokens=tokens,
        tokenized=tokenized,
        tokenize_ms=tokenize_ms,
        active=active,
        block_size=knob("BLOCK_SIZE"),
    )


def _decided(prepared: _Prepared, read: RoutingRead) -> tuple[Decision, RouteAdvance | None]:
    """The choice and the decision from what the index read gave; what routing it advances."""
    request, active, block_size = prepared.request, prepared.active, prepared.block_size
    model, pods_, n_tokens = request.model, prepared.pods, prepared.tokenized.count
    result = read.result
    scored = perf_counter()
    first_block = read.blocks[0] if read.blocks else 0
    parameters = active.parameters
    loads = _loads(read.state, model, n_tokens, block_size, active.weights, parameters)
    route = RouteRequest(
        model=model,
        blocks=read.blocks,
        prompt_tokens=n_tokens,
        block_size=block_size,
        candidates=pods_,
        runs={pod.pod: pod.media_runs for pod in result.pods},
        scores=result.scores,
        speculative=speculative_blocks(read.state, read.blocks) if read.state else {},
        loads={pod: reading.load for pod, reading in loads.items()},
        recent_work={pod: reading.recent_work_s for pod, reading in loads.items()},
    )
    choice = choose_pod(route, active.weights, request.policy, parameters)
    assert result.timings is not None
    tokenized = prepared.tokenized
    decision = Decision(
        id=f"{time.time_ns() // 1_000_000:011x}{secrets.token_hex(4)}",
        ts=time.time(),
        request_id=request.request_id,
        model=model,
        input=request.source,
        n_tokens=n_tokens,
        n_blocks=result.n_blocks,
        first_block=first_block,
        longest_match=result.longest_match,
        candidates=pods_,
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
            "tokenize": prepared.tokenize_ms,
            "hash": result.timings.hash_ms,
            "index": result.timings.read_ms,
            "score": result.timings.score_ms + (perf_counter() - scored) * 1000,
            "total": (perf_counter() - prepared.started) * 1000,
        },
        tokenizer=tokenized.source,
        tokens_estimated=tokenized.estimated,
        tokenizer_fallback=tokenized.fallback,
        policy=choice.policy,
        reason=choice.reason,
        estimates=_estimates(choice, loads, route),
        stale_loads=list(choice.stale_pods),
    )
    return decision, _advance(decision, choice, read.blocks)


def _loads(
    state: RouteState | None,
    model: str,
    n_tokens: int,
    block_size: int,
    weights: TierWeights,
    parameters: TtftParameters,
) -> dict[str, LoadReading]:
    """Each candidate's load under the resync rule (scoring.route_state). Before a pod has a
    mean predicted prefill, this request's prefill with no hit stands for it."""
    if state is None:
        return {}
    cold = estimate_prefill(model, n_tokens, (), block_size, 0, weights, parameters).seconds
    fresh_s = knob("ROUTING_LOAD_FRESH_SECONDS")
    return {pod: load_reading(raw, state.now_ms, fresh_s, cold) for pod, raw in state.pods.items()}


def _estimates(
    choice: PolicyChoice, loads: dict[str, LoadReading], route: RouteRequest
) -> list[CandidateEstimate]:
    """The cheapest ROUTING_ESTIMATES_MAX candidates' estimates, and the chosen pod's: every
    decision keeps them, so a fleet of hundreds of pods must not multiply the log's size."""
    limit = knob("ROUTING_ESTIMATES_MAX")
    kept = [
        cost
        for rank, cost in enumerate(choice.candidates)
        if rank < limit or cost.pod == choice.chosen
    ]
    estimates = []
    for cost in kept:
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
        decision_id=decision.id,
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


def _queue_record(
    pipeline: Pipeline | AsyncPipeline, decision: Decision, advance: RouteAdvance | None
) -> list[Any] | None:
    """Queue on `pipeline` the decision log entry (unless DECISIONS_RECORD is off), the chosen
    pod's routing state and the scoring metrics: one round trip. Returns the routing
    script's arguments (for `route_record.finish`), None when no pod was chosen."""
    logged = knob("DECISIONS_RECORD")
    script_args = None
    if advance is not None:
        entry = decisions.encode(decision) if logged else None
        script_args = route_record.queue_record(pipeline, advance, entry, knob("DECISIONS_MAX"))
    elif logged:
        decisions.queue_append(pipeline, decision)
    recorder.record_decision(pipeline, decision)
    return script_args


def _recorded(decision: Decision, replies: list[Any]) -> None:
    """Take the log id from the recording's replies (the first is the log entry's, when
    logged); raise the first failure (the caller logs it: the decision stands)."""
    failed = next((reply for reply in replies if isinstance(reply, Exception)), None)
    if failed is not None and not isinstance(failed, redis.exceptions.NoScriptError):
        raise failed
    if knob("DECISIONS_RECORD") and isinstance(replies[0], str):
        decision.log_id = replies[0]


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


# Validation ---------------------------------------------------------------------------------


def _model(model: object) -> str:
    if problem := model_name_problem(model):
        raise InvalidScoreRequest(f"`model` (the served model name): {problem}", "model")
    return model  # type: ignore[return-value]  (a str: model_name_problem checked)


def _one_input(token_ids: object, prompt: object, messages: object) -> tuple[str, object]:
    given = [
        (name, value)
        for name, value in zip(INPUTS, (token_ids, prompt, messages), strict=True)
        if value is not None
    ]
    if len(given) != 1:
        names = ", ".join(f"`{name}`" for name in INPUTS)
        found = f" (got {', '.join(name for name, _ in given)})" if given else ""
        raise InvalidScoreRequest(
            f"exactly one of {names} is required{found}", given[-1][0] if given else "token_ids"
        )
    return given[0]


def _token_ids(value: object, limit: int, checked: bool = False) -> list[int]:
    if not isinstance(value, list) or not value:
        raise InvalidScoreRequest("`token_ids` must be a non-empty list of integers", "token_ids")
    if len(value) > limit:
        raise InvalidScoreRequest(
            f"`token_ids` has {len(value)} tokens; the limit is {limit}", "token_ids"
        )
    # The common case checked in C (a set of types, min, max): a request of 2,048 ids in
    # microseconds rather than a Python loop; the loop only names the offending id.
    if checked or (set(map(type, value)) == {int} and min(value) >= 0 and max(value) < 2**32):
        return value
    for position, token in enumerate(value):
        if type(token) is not int or not 0 <= token < 2**32:
            raise InvalidScoreRequest(
                f"`token_ids[{position}]` is {token!r}: token ids are integers from 0 to 2**32-1",
                "token_ids",
            )
    return value


def _prompt(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidScoreRequest("`prompt` must be non-empty text", "prompt")
    return value


def _messages(value: object) -> Messages:
    """Chat messages with string contents; list contents keep their text parts joined with
    newlines, as kthena sends them (compatibility.md 2.6)."""
    if not isinstance(value, list) or not value:
        raise InvalidScoreRequest("`messages` must be a non-empty list", "messages")
    messages = []
    for position, message in enumerate(value):
        where = f"`messages[{position}]`"
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise InvalidScoreRequest(f"{where} needs a text `role` and a `content`", "messages")
        content = message.get("content")
        if isinstance(content, list):
            content = "\n".join(
                part["text"]
                for part in content
                if isinstance(part, dict)
                and part.get("type", "text") == "text"
                and isinstance(part.get("text"), str)
            )
        if not isinstance(content, str):
            raise InvalidScoreRequest(
                f"{where}.content must be text or a list of content parts", "messages"
            )
        messages.append({"role": message["role"], "content": content})
    return messages


def _pods(pods: object) -> list[str] | None:
    if pods is None:
        return None
    if not isinstance(pods, list) or not pods or not all(isinstance(p, str) for p in pods):
        raise InvalidScoreRequest("`pods` must be a non-empty list of pod ids", "pods")
    return list(dict.fromkeys(pods))


def _request_id(request_id: object) -> str | None:
    if request_id is None:
        return None
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        raise InvalidScoreRequest("`request_id` must be text", "request_id")
    text = str(request_id)
    if len(text) > MAX_REQUEST_ID:
        raise InvalidScoreRequest(
            f"`request_id` is longer than {MAX_REQUEST_ID} characters", "request_id"
        )
    return text


def _policy(policy: object) -> Policy:
    """The request's policy, or the ROUTING_POLICY knob's when it names none."""
    if policy is None:
        configured = knob("ROUTING_POLICY")
        if configured not in POLICIES:
            # A misconfiguration must not turn every scoring into a 500: say so, route anyway.
            log.error("KVADMIN_ROUTING_POLICY %r is not one of %s", configured, POLICIES)
            return DEFAULT_POLICY
        return configured
    if policy not in POLICIES:
        raise InvalidScoreRequest(
            f"`policy` must be one of {', '.join(POLICIES)}, got {policy!r}"[:300], "policy"
        )
    return policy  # type: ignore[return-value]


# Candidates, tokens, restarts ---------------------------------------------------------------


def registered(model: str | None = None) -> list[EngineRow]:
    """The registered engines (of `model`, when given) as `EngineRow`s: one query."""
    rows = Engine.objects.all() if model is None else Engine.objects.filter(model=model)
    return list(rows.values_list(*ENGINE_COLUMNS))


def _candidates(
    model: str, requested: list[str] | None, rows: Sequence[EngineRow]
) -> list[_Candidate]:
    """The candidates among the model's registered engines `rows`."""
    engines = {row[0]: (_Candidate(*row[:-1]), row[-1]) for row in rows}
    if requested is None:
        enabled = [candidate for candidate, on in engines.values() if on]
        if not enabled:
            raise ModelNotServed(f"no enabled engine serves model {model!r}", "model")
        return enabled
    if not engines:
        raise ModelNotServed(f"no engine serves model {model!r}", "model")
    unknown = [pod for pod in requested if pod not in engines]
    if unknown:
        raise InvalidScoreRequest(
            f"unknown candidate pods for model {model!r}: {', '.join(unknown)}", "pods"
        )
    return [engines[pod][0] for pod in requested]


def _tokenized(
    model: str,
    candidates: Sequence[_Candidate],
    prompt: str | None,
    messages: Messages | None,
    limit: int,
    source: str,
) -> Tokenized:
    tokenizers = [
        Tokenizer(candidate.pod, candidate.kind, candidate.http_base_url)
        for candidate in candidates
        if candidate.http_base_url
    ]
    try:
        tokens = tokenize(
            model,
            tokenizers,
            prompt=prompt,
            messages=messages,
            keep=knob("BLOCK_SIZE") * knob("MAX_BLOCKS"),
            timeout=knob("TOKENIZE_TIMEOUT"),
            cache_size=knob("TOKENIZE_CACHE_SIZE"),
            local=_local_tokenizer(model, candidates),
        )
    except TokenizationFailed as error:
        recorder.record_scoring_error(index_client(), model, "tokenize")
        raise TokenizationUnavailable(str(error), source) from None
    if tokens.count > limit:
        raise InvalidScoreRequest(
            f"`{source}` has {tokens.count} tokens; the limit is {limit}", source
        )
    return tokens


def _local_tokenizer(model: str, candidates: Sequence[_Candidate]) -> str | None:
    """The tokenizer the candidates name. Registration refuses two for one model
    (`Engine.clean`); should the table hold two anyway, the engines tokenize."""
    named = {candidate.tokenizer for candidate in candidates if candidate.tokenizer}
    if len(named) > 1:
        log.warning("%s: engines name different tokenizers %s; using /tokenize", model, named)
        return None
    return next(iter(named), None)
