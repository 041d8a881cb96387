"""Scoring one request: the one entry the API, the CLI, the explain page and the gateway's
endpoint picker call. Two shells, sync (`scored`) and async (`score_async`), around the pure core
of `routing.pipeline`, each: check the request (`routing.request.checked`), get its token ids,
`plan` the read, one script call, `decide`, one pipeline that records the decision.

1. Candidates: the enabled engines serving the model, or the `pods` given (each must be a
   registered engine of the model), from a per-process copy of the registry (sync:
   `routing.registry`; async: the caller's).
2. Token ids: given, or from the model's local tokenizer or a candidate engine's /tokenize
   (`routing.tokenize`); the decision records which (`tokenizer`).
3. One round trip reads the index walk with the active tier weights (and, for the policy, the
   active TTFT parameters of the same version: `weights.active`), each candidate's last
   (re)start as the ingest reader recorded it per stream, so ownership written before it is
   dropped (compatibility.md 2.4 step 1; a data-parallel pod starts when all its ranks have),
   and each candidate's routing state (`scoring.route_state`). A model whose index group
   (`kvadmin.index.groups`) is another Redis reads its walk and restarts there and its routing
   state on REDIS_URL: two calls, both sent before either reply is read (sync:
   `scoring.scripts.call_together`; async: `asyncio.gather`), so one round trip still.
4. `scoring.policy.choose_pod` under the request's policy (default the ROUTING_POLICY knob).
5. The decision goes to the decision log (`routing.decisions`), the chosen pod's routing state
   advances (`scoring.route_record`) and the scoring metrics (`metrics.recorder`) are counted,
   in one pipelined round trip, and nothing else: the live feed reads the log on its own
   (`routing.tail`). An unrecorded scoring (`record=False`, an explain page) writes nothing,
   routing state included. A log that cannot be written is logged, not raised: the caller
   still gets its decision (with an empty `log_id`).
"""

import asyncio
import contextlib
import logging
import math
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any, overload

import redis
import redis.asyncio

from kvadmin.conf import knob
from kvadmin.index.groups import group_of
from kvadmin.metrics import recorder
from kvadmin.redis_clients import REDIS_OUTAGES, index_client
from kvadmin.routing import registry, requesters
from kvadmin.routing.decisions import Decision
from kvadmin.routing.pipeline import ReadPlan, RecordPlan, decide, plan
from kvadmin.routing.request import (
    Candidate,
    Checked,
    EngineRow,
    InvalidScoreRequest,
    ModelNotServed,
    ScoreError,
    ScoreRequest,
    checked,
    request_of,
)
from kvadmin.routing.tokenize import (
    Text,
    TokenizationFailed,
    Tokenized,
    Tokenizer,
    text_of,
    tokenize,
)
from kvadmin.weights.active import ActiveWeights, active_weights
from scoring import route_record
from scoring.index import WALK
from scoring.scripts import call_together

log = logging.getLogger(__name__)

__all__ = [
    "DeadlinePassed",
    "IndexUnavailable",
    "InvalidScoreRequest",
    "ModelNotServed",
    "ScoreError",
    "Scored",
    "TokenizationUnavailable",
    "score",
    "decided_async",
    "record_async",
    "score_async",
    "scored",
]


class TokenizationUnavailable(ScoreError):
    """Every candidate engine failed to tokenize the text (503)."""

    status = 503


class IndexUnavailable(ScoreError):
    """Redis refused a read of the index (503); an outage itself is raised as it is."""

    status = 503


class DeadlinePassed(Exception):
    """The caller's deadline passed before the decision's next expensive step began: `step`,
    "tokenize" (the text's tokenizing, in a worker thread) or "redis" (the index script
    call). Nothing of it was started; nothing is recorded."""

    def __init__(self, step: str) -> None:
        super().__init__(f"the deadline passed before {step}")
        self.step = step


@dataclass(frozen=True, slots=True)
class Scored:
    """A decision and what scoring computed on the way to it, for a page that shows more than
    the decision (the explain page): nothing is tokenized or hashed twice."""

    decision: Decision
    blocks: list[int]
    """The request's block hashes, as the index read hashed them (`decision.blocks`)."""


def score(model: object, *, record: bool = True, **fields: Any) -> Decision:
    """The decision alone: `scored(model, **fields).decision`."""
    return scored(model, record=record, **fields).decision


def scored(
    model: object,
    *,
    record: bool = True,
    requester: str = requesters.COMMAND,
    **fields: Any,
) -> Scored:
    """Score `model`'s candidate pods for one request given as the fields of a
    `ScoreRequest` (JSON values: exactly one of `token_ids`, `prompt`, `messages`). Raises a
    `ScoreError` subclass. Records the decision when `record` (and DECISIONS_RECORD) allow.
    `requester`: who asks (`routing.requesters`), the one that may report the outcome."""
    started, client = perf_counter(), index_client()
    request = request_of(model, **fields)
    wanted = checked(request, registry.engines(client, request.model))
    group = group_of(wanted.model)
    grouped = not group.is_app_redis
    tokenized = _tokenized(wanted, _text(wanted))
    read = plan(wanted, tokenized, active_weights(), started, requester, grouped)
    try:
        if read.state_read is None:
            reply, state_reply = WALK(client, read.keys, read.args), None
        else:
            reply, state_reply = call_together(
                [(WALK, group.client(), read.keys, read.args), (WALK, client, *read.state_read)]
            )
    except REDIS_OUTAGES:
        raise  # an outage, answered as one by the caller (kvadmin/unavailable.py on the web)
    except redis.RedisError as error:
        recorder.record_scoring_error(client, wanted.model, "redis")
        raise IndexUnavailable(f"the index is unavailable: {error}") from None
    decision, recording = decide(read, reply, state_reply)
    if record:
        pipeline = client.pipeline(transaction=False)
        queued = recording.queue(pipeline)
        with _logged(recording):
            replies = pipeline.execute(raise_on_error=False)
            if queued is not None:
                replies[0] = route_record.finish(client, replies[0], queued).log_id
            recording.recorded(replies)
    return Scored(decision, read.blocks)


async def score_async(
    client: redis.asyncio.Redis,
    engines: Sequence[EngineRow],
    active: ActiveWeights,
    request: ScoreRequest,
    requester: str = requesters.COMMAND,
) -> Decision:
    """`scored` for an event loop (the API's lean path): `decided_async`, then
    `record_async`."""
    decision, recording = await decided_async(client, engines, active, request, requester)
    await record_async(client, recording)
    return decision


async def decided_async(
    client: redis.asyncio.Redis,
    engines: Sequence[EngineRow],
    active: ActiveWeights,
    request: ScoreRequest,
    requester: str = requesters.COMMAND,
    deadline: float = math.inf,
) -> tuple[Decision, RecordPlan]:
    """The decision and its recording, not yet written (`record_async` writes it; the endpoint
    picker first answers the gateway, or sheds the request and records nothing): Redis
    through `client` (redis.asyncio), the model's registered `engines` and the `active`
    weights from the caller's caches. Text is tokenized in a worker thread (tokenizers
    block), unless its token ids are cached: a thread hop costs more than a cache lookup. A
    grouped model's index is read through its group's client for the running loop.

    `deadline` (a `time.monotonic()` instant) is checked before each expensive step, the
    tokenizing once its thread runs and the script call: past it, `DeadlinePassed` is raised
    instead. A step under way is let finish (a Redis command cancelled in flight would
    leave its reply unread on the connection)."""
    started = perf_counter()
    wanted = checked(request, engines)
    group = group_of(wanted.model)
    grouped = not group.is_app_redis
    text = _text(wanted)  # hashed once, for the lookup and, on a miss, the tokenizing
    tokenized = _tokenized(wanted, text, cached_only=True)
    if tokenized is None:

        def planned() -> ReadPlan:
            _before("tokenize", deadline)  # the thread may start late: the pool was busy
            return plan(wanted, _tokenized(wanted, text), active, started, requester, grouped)

        read = await asyncio.to_thread(planned)
    else:
        read = plan(wanted, tokenized, active, started, requester, grouped)
    _before("redis", deadline)
    try:
        if read.state_read is None:
            reply, state_reply = await WALK.call_async(client, read.keys, read.args), None
        else:
            reply, state_reply = await asyncio.gather(
                WALK.call_async(group.async_client(), read.keys, read.args),
                WALK.call_async(client, *read.state_read),
            )
    except REDIS_OUTAGES:
        raise
    except redis.RedisError as error:
        await _count_error_async(client, wanted.model)
        raise IndexUnavailable(f"the index is unavailable: {error}") from None
    return decide(read, reply, state_reply)


async def record_async(client: redis.asyncio.Redis, recording: RecordPlan) -> None:
    """Write a decision's recording in one pipelined round trip (a failure is logged: the
    decision stands)."""
    pipeline = client.pipeline(transaction=False)
    queued = recording.queue(pipeline)
    with _logged(recording):
        replies = await pipeline.execute(raise_on_error=False)
        if queued is not None:
            replies[0] = (await route_record.finish_async(client, replies[0], queued)).log_id
        recording.recorded(replies)


def _before(step: str, deadline: float) -> None:
    if time.monotonic() >= deadline:
        raise DeadlinePassed(step)


@contextlib.contextmanager
def _logged(recording: RecordPlan) -> Any:
    """A recording that fails is logged: the decision stands."""
    try:
        yield
    except redis.RedisError as error:
        log.warning("decision %s not recorded: %s", recording.decision.decision_id, error)


async def _count_error_async(client: redis.asyncio.Redis, model: str) -> None:
    pipeline = client.pipeline(transaction=False)
    recorder.record_scoring_error(pipeline, model, "redis")
    with contextlib.suppress(redis.RedisError):
        await pipeline.execute()


@overload
def _tokenized(request: Checked, text: Text | None) -> Tokenized: ...
@overload
def _tokenized(request: Checked, text: Text | None, cached_only: bool) -> Tokenized | None: ...
def _tokenized(request: Checked, text: Text | None, cached_only: bool = False) -> Tokenized | None:
    """The request's token ids as `Tokenized`: given, or from a tokenizer (may block); `text`
    is `_text(request)`. With `cached_only`, None unless they are at hand without tokenizing
    (given, or cached)."""
    if request.token_ids is not None:
        return Tokenized(array("I"), len(request.token_ids), "given")
    assert text is not None
    model, candidates, source = request.model, request.candidates, request.source
    tokenizers = [
        Tokenizer(candidate.pod, candidate.kind, candidate.http_base_url)
        for candidate in candidates
        if candidate.http_base_url
    ]
    try:
        tokens = tokenize(
            text,
            tokenizers,
            timeout=knob("TOKENIZE_TIMEOUT"),
            cache_size=knob("TOKENIZE_CACHE_SIZE"),
            cached_only=cached_only,
        )
    except TokenizationFailed as error:
        recorder.record_scoring_error(index_client(), model, "tokenize")
        raise TokenizationUnavailable(str(error), source) from None
    limit = knob("SCORE_MAX_TOKENS")
    if tokens is not None and tokens.count > limit:
        raise InvalidScoreRequest(
            f"`{source}` has {tokens.count} tokens; the limit is {limit}", source
        )
    return tokens


def _text(request: Checked) -> Text | None:
    """The request's text to tokenize, None when its token ids are given."""
    if request.token_ids is not None:
        return None
    return text_of(
        request.model,
        prompt=request.prompt,
        messages=request.messages,
        keep=knob("BLOCK_SIZE") * knob("MAX_BLOCKS"),
        local=_local_tokenizer(request.model, request.candidates),
    )


def _local_tokenizer(model: str, candidates: Sequence[Candidate]) -> str | None:
    """The tokenizer the candidates name. Registration refuses two for one model
    (`Engine.clean`); should the table hold two anyway, the engines tokenize."""
    named = {candidate.tokenizer for candidate in candidates if candidate.tokenizer}
    if len(named) > 1:
        log.warning("%s: engines name different tokenizers %s; using /tokenize", model, named)
        return None
    return next(iter(named), None)
