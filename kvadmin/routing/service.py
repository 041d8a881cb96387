"""Scoring one request: the one function the API, the CLI and the explain page call.

`score()` validates the request, picks the candidates, gets token ids, reads the index once,
chooses a pod and records the decision:

1. Candidates: the enabled engines serving the model, or the `pods` given (each must be a
   registered engine of the model).
2. Token ids: given, or from the model's local tokenizer or a candidate engine's /tokenize
   (`routing.tokenize`); the decision records which (`tokenizer`).
3. `scoring.index.score_request` with the active tier weights, in one Redis round trip
   (SPEC 5.8) that also reads each candidate's last (re)start as the ingest reader recorded
   it per stream, so ownership written before it is dropped (SPEC 2.4 step 1); a
   data-parallel pod restarts with its newest rank.
4. `scoring.choice.choose`: the highest score; ties and no-hit requests by rendezvous hashing.
5. The decision goes to the decision log (`routing.decisions`) and the scoring metrics
   (`metrics.recorder`) in one pipelined round trip, and nothing else: the live feed reads
   the log on its own (`routing.tail`).

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
from kvadmin.routing.decisions import Decision, Dropped, PodExplanation
from kvadmin.routing.tokenize import Messages, TokenizationFailed, Tokenized, Tokenizer, tokenize
from kvadmin.weights.active import active_weights
from scoring.choice import choose
from scoring.hashing import hash_block
from scoring.index import score_request
from scoring.keys import stream_name, stream_status_key
from scoring.score import PodScore, ScoreResult
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
    try:
        result = score_request(
            client,
            model,
            tokens,
            set(pods_),
            {},
            active.weights,
            block_size=knob("BLOCK_SIZE"),
            max_blocks=knob("MAX_BLOCKS"),
            start_keys={
                c.pod: [stream_status_key(c.pod, stream_name(rank)) for rank in range(c.dp_size)]
                for c in candidates
            },
        )
    except REDIS_OUTAGES:
        raise  # an outage, answered as one by the caller (kvadmin/unavailable.py on the web)
    except redis.RedisError as error:
        recorder.record_scoring_error(client, model, "redis")
        raise IndexUnavailable(f"the index is unavailable: {error}") from None
    scored = perf_counter()
    first_block = hash_block(tokens[: knob("BLOCK_SIZE")]) if result.n_blocks else 0
    chosen, tie_break = choose(result.scores, pods_, first_block)
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
        chosen=chosen,
        tie_break=tie_break,
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
    )
    if record:
        _record(client, decision)
    return decision


def _record(client: redis.Redis, decision: Decision) -> None:
    """The decision log entry (unless DECISIONS_RECORD is off) and the scoring metrics, in one
    round trip. A failure is logged: the caller still gets its decision."""
    pipeline = client.pipeline(transaction=False)
    logged = knob("DECISIONS_RECORD")
    if logged:
        decisions.queue_append(pipeline, decision)
    recorder.record_decision(pipeline, decision)
    try:
        replies = pipeline.execute()
    except redis.RedisError as error:
        log.warning("decision %s not recorded: %s", decision.id, error)
        return
    if logged:
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
    newlines, as kthena sends them (SPEC 2.6)."""
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
