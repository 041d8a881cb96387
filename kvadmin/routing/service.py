"""Scoring one request: the one function the API, the CLI and the explain page call.

`score()` validates the request, picks the candidates, gets token ids, reads the index once,
chooses a pod and records the decision:

1. Candidates: the enabled engines serving the model, or the `pods` given (each must be a
   registered engine of the model).
2. Token ids: given, or from the model's local tokenizer or a candidate engine's /tokenize
   (`routing.tokenize`); the decision records which (`tokenizer`).
3. `scoring.index.read_for_routing` with the active tier weights, in one Redis round trip
   (compatibility.md 5.8) that also reads each candidate's last (re)start as the ingest reader
   recorded it per stream, so ownership written before it is dropped (compatibility.md 2.4 step 1);
   a data-parallel pod restarts with its newest rank. The same round trip reads each candidate's
   routing state (`scoring.route_state`): virtual queue, requests in flight, speculative entries,
   the engine's scraped load.
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

Errors are one exception class per kind, each with the `field` at fault (None when no field
is) and a message, and the HTTP status a view should answer with.
"""

import logging
import secrets
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from time import perf_counter

import redis

from kvadmin.conf import knob
from kvadmin.engines.model_names import model_name_problem
from kvadmin.engines.models import Engine
from kvadmin.metrics import recorder
from kvadmin.redis_clients import REDIS_OUTAGES, index_client
from kvadmin.routing import decisions
from kvadmin.routing.decisions import CandidateEstimate, Decision, Dropped, PodExplanation
from kvadmin.routing.tokenize import Messages, TokenizationFailed, Tokenized, Tokenizer, tokenize
from kvadmin.weights.active import active_weights
from scoring import route_record
from scoring.index import read_for_routing
from scoring.keys import stream_name, stream_status_key
from scoring.policy import DEFAULT_POLICY, POLICIES, Policy, PolicyChoice, RouteRequest, choose_pod
from scoring.route_record import RouteAdvance
from scoring.route_state import (
    LoadReading,
    RouteState,
    StateRequest,
    load_reading,
    speculative_blocks,
)
from scoring.score import PodScore, ScoreResult
from scoring.ttft import DEFAULT_PARAMETERS, TtftParameters, estimate_prefill
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


@dataclass(frozen=True, slots=True)
class _Candidate:
    pod: str
    kind: str
    http_base_url: str
    dp_size: int
    tokenizer: str


def score(
    model: object,
    *,
    token_ids: object = None,
    prompt: object = None,
    messages: object = None,
    pods: object = None,
    request_id: object = None,
    policy: object = None,
    record: bool = True,
) -> Decision:
    """Score `model`'s candidate pods for one request given as exactly one of `token_ids`
    (non-negative ints), `prompt` (text) or `messages` (chat: [{"role", "content"}]).

    Arguments arrive as the client sent them (JSON values) and are validated here. Raises a
    `ScoreError` subclass. Records the decision in the log when `record` (and the
    DECISIONS_RECORD knob) allow; a log that cannot be written is logged, not raised: the
    caller still gets its decision (with an empty `log_id`).
    """
    started = perf_counter()
    model = _model(model)
    source, value = _one_input(token_ids, prompt, messages)
    limit = knob("SCORE_MAX_TOKENS")
    given = _token_ids(value, limit) if source == "token_ids" else None
    text = _prompt(value) if source == "prompt" else None
    chat = _messages(value) if source == "messages" else None
    requested = _pods(pods)
    request_id = _request_id(request_id)
    chosen_by = _policy(policy)
    candidates = _candidates(model, requested)

    tokens: Sequence[int]
    if given is None:
        asked = perf_counter()
        tokenized = _tokenized(model, candidates, text, chat, limit, source)
        tokens, n_tokens = tokenized.tokens, tokenized.count
        tokenize_ms = (perf_counter() - asked) * 1000
    else:
        tokens, n_tokens, tokenize_ms = given, len(given), 0.0
        tokenized = Tokenized(array("I"), len(given), "given")

    pods_ = [candidate.pod for candidate in candidates]
    active = active_weights()
    client = index_client()
    block_size = knob("BLOCK_SIZE")
    try:
        read = read_for_routing(
            client,
            model,
            tokens,
            set(pods_),
            {},
            active.weights,
            block_size=block_size,
            max_blocks=knob("MAX_BLOCKS"),
            start_keys={
                c.pod: [stream_status_key(c.pod, stream_name(rank)) for rank in range(c.dp_size)]
                for c in candidates
            },
            state=StateRequest(model, pods_, round(knob("ROUTING_IN_FLIGHT_SECONDS") * 1000)),
        )
    except REDIS_OUTAGES:
        raise  # an outage, answered as one by the caller (kvadmin/unavailable.py on the web)
    except redis.RedisError as error:
        recorder.record_scoring_error(client, model, "redis")
        raise IndexUnavailable(f"the index is unavailable: {error}") from None
    result = read.result
    scored = perf_counter()
    first_block = read.blocks[0] if read.blocks else 0
    parameters = DEFAULT_PARAMETERS
    loads = _loads(read.state, model, n_tokens, block_size, active.weights, parameters)
    choice = choose_pod(
        RouteRequest(
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
        ),
        active.weights,
        chosen_by,
        parameters,
    )
    assert result.timings is not None
    decision = Decision(
        id=f"{time.time_ns() // 1_000_000:011x}{secrets.token_hex(4)}",
        ts=time.time(),
        request_id=request_id,
        model=model,
        input=source,
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
            "tokenize": tokenize_ms,
            "hash": result.timings.hash_ms,
            "index": result.timings.read_ms,
            "score": result.timings.score_ms + (perf_counter() - scored) * 1000,
            "total": (perf_counter() - started) * 1000,
        },
        tokenizer=tokenized.source,
        tokens_estimated=tokenized.estimated,
        tokenizer_fallback=tokenized.fallback,
        policy=choice.policy,
        reason=choice.reason,
        estimates=_estimates(choice, loads),
        stale_loads=list(choice.stale_pods),
    )
    if record:
        _record(client, decision, _advance(decision, choice, read.blocks))
    return decision


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


def _estimates(choice: PolicyChoice, loads: dict[str, LoadReading]) -> list[CandidateEstimate]:
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
            )
        )
    return estimates


def _advance(decision: Decision, choice: PolicyChoice, blocks: list[int]) -> RouteAdvance | None:
    """What routing the request to the chosen pod adds to the pod's state, whatever the
    policy: a gateway sends the request there either way."""
    chosen = next((cost for cost in choice.candidates if cost.pod == choice.chosen), None)
    if chosen is None:
        return None
    return RouteAdvance(
        model=decision.model,
        pod=chosen.pod,
        decision_id=decision.id,
        prefill_s=chosen.prefill_s,
        blocks=blocks,
        speculative_ttl_s=knob("ROUTING_SPECULATIVE_SECONDS"),
        speculative_max=knob("ROUTING_SPECULATIVE_MAX"),
        in_flight_window_s=knob("ROUTING_IN_FLIGHT_SECONDS"),
        in_flight_max=knob("ROUTING_IN_FLIGHT_MAX"),
    )


def _record(client: redis.Redis, decision: Decision, advance: RouteAdvance | None) -> None:
    """The decision log entry (unless DECISIONS_RECORD is off), the chosen pod's routing state
    and the scoring metrics, in one round trip. A failure is logged: the caller still gets its
    decision."""
    pipeline = client.pipeline(transaction=False)
    logged = knob("DECISIONS_RECORD")
    script_args = None
    if advance is not None:
        entry = decisions.encode(decision) if logged else None
        script_args = route_record.queue_record(pipeline, advance, entry, knob("DECISIONS_MAX"))
    elif logged:
        decisions.queue_append(pipeline, decision)
    recorder.record_decision(pipeline, decision)
    try:
        replies = pipeline.execute(raise_on_error=False)
        if script_args is not None:
            log_id = route_record.finish(client, replies[0], script_args).log_id
        else:
            log_id = replies[0] if logged else None
        failed = next((reply for reply in replies if isinstance(reply, Exception)), None)
        if failed is not None and not isinstance(failed, redis.exceptions.NoScriptError):
            raise failed
    except redis.RedisError as error:
        log.warning("decision %s not recorded: %s", decision.id, error)
        return
    if logged and isinstance(log_id, str):
        decision.log_id = log_id


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


def _token_ids(value: object, limit: int) -> list[int]:
    if not isinstance(value, list) or not value:
        raise InvalidScoreRequest("`token_ids` must be a non-empty list of integers", "token_ids")
    if len(value) > limit:
        raise InvalidScoreRequest(
            f"`token_ids` has {len(value)} tokens; the limit is {limit}", "token_ids"
        )
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


def _candidates(model: str, requested: list[str] | None) -> list[_Candidate]:
    rows = Engine.objects.filter(model=model).values_list(
        "pod", "kind", "http_base_url", "dp_size", "tokenizer", "enabled"
    )
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
