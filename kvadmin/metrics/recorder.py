"""Recording measurements into the Redis metric families (`families.py`), from any process.

The code that measures calls one function per event:

- the ingest reader, after applying a run of batches:
  `recorder.record_apply(self.client, stream.spec.id, batches, seconds)`
- the decision log, per decision, inside the pipeline of its XADD (no extra round trip):
  `recorder.record_decision(pipe, decision)`, as one command (`Increments`)
- the scoring service, when tokenization or the index read fails:
  `recorder.record_scoring_error(client, model, "tokenize")`

Given a pipeline, the commands join it (no extra round trip; the caller executes it). Given a
client, they are sent at once in one round trip and a Redis failure is logged, never raised:
metrics must not fail the work they measure.
"""

import bisect
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

import redis
from redis.asyncio.client import Pipeline as AsyncPipeline
from redis.client import Pipeline

from kvadmin.index import status
from kvadmin.index.events import EventBatch
from kvadmin.index.streams import StreamId
from kvadmin.log_once import OncePerKind
from kvadmin.metrics import families as f
from kvadmin.metrics.families import BUCKET_SEPARATOR, Family, label_field
from scoring import keys
from scoring.scripts import package_script

log = logging.getLogger(__name__)

HITS_TTL_SECONDS = 25 * 3600
"""The per-minute hit buckets are kept a day (and an hour): the time ranges of the dashboard
and the pod pages reach back 24 h."""
# Per-minute bucket fields of the chosen pod: `p:{pod}` decisions, `pb:{pod}` their requested
# blocks, `pm:{pod}|{medium}` their matched blocks in that medium (pod ids hold no "|").

Target = redis.Redis | Pipeline | AsyncPipeline


class Counting(Protocol):
    """Where `observe` and `inc` add: a pipeline, or `Increments`."""

    def hincrby(self, name: str, key: str, amount: int = 1) -> Any: ...
    def hincrbyfloat(self, name: str, key: str, amount: float = 1.0) -> Any: ...


_INCREMENTS = package_script(__file__, "increments")


class Increments:
    """A decision's metric updates gathered to go to Redis as one script call, not one
    command each: a decision makes about twenty, and on the web process packing each and
    parsing its reply (redis.asyncio wraps every reply read in a timeout) cost more CPU than
    the scoring's own arithmetic (bench/api.py, web CPU per decision). The same hashes,
    fields and values as the commands themselves, in the same order."""

    def __init__(self) -> None:
        self._keys: dict[str, int] = {}
        self._args: list[Any] = []

    def hincrby(self, name: str, key: str, amount: int = 1) -> None:
        self._add("i", name, key, amount)

    def hincrbyfloat(self, name: str, key: str, amount: float = 1.0) -> None:
        self._add("f", name, key, amount)

    def expire(self, name: str, seconds: int) -> None:
        self._add("e", name, "", seconds)

    def _add(self, op: str, name: str, key: str, value: float) -> None:
        index = self._keys.setdefault(name, len(self._keys) + 1)
        self._args += (op, index, key, value)

    def queue(self, pipe: Pipeline | AsyncPipeline) -> None:
        """Queue the updates on `pipe`, as one command: an EVAL of the script's text (the
        pipelined call of `scoring.scripts`), so that no NOSCRIPT reply after a restart or a
        SCRIPT FLUSH loses a decision's metrics, for the price of Redis hashing these few
        hundred bytes."""
        _INCREMENTS(pipe, list(self._keys), self._args)


class _Scored(Protocol):
    pod: str
    media: Mapping[str, int]


class DecisionLike(Protocol):
    """What `record_decision` reads of a `kvadmin.routing.decisions.Decision`."""

    ts: float
    model: str
    input: str
    blocks: int
    longest_match: int
    chosen: str | None
    scores: Sequence[_Scored]
    timings_ms: Mapping[str, float]
    tokenizer: str
    tokenizer_fallback: str


def hits_key(minute: int) -> str:
    """`minute` is unix seconds // 60."""
    return f"{keys.HITS_KEY_PREFIX}{minute}"


def outcome_minute_key(minute: int) -> str:
    """The outcomes that arrived in `minute` (unix seconds // 60), per model and pod."""
    return f"{keys.OUTCOME_MINUTES_KEY_PREFIX}{minute}"


def bucket_of(family: Family, value: float) -> int:
    """The index of the histogram bucket `value` falls in (len(buckets): +Inf)."""
    return bisect.bisect_left(family.buckets, value)


def observe(pipe: Counting, family: Family, labels: tuple[str, ...], value: float) -> None:
    """One observation of a histogram family: its bucket and its sum."""
    field = label_field(labels)
    bucket = bucket_of(family, value)
    pipe.hincrby(family.key, f"{field}{BUCKET_SEPARATOR}{bucket}", 1)
    pipe.hincrbyfloat(family.key, f"{field}{BUCKET_SEPARATOR}sum", value)


def inc(pipe: Counting, family: Family, labels: tuple[str, ...], amount: int = 1) -> None:
    pipe.hincrby(family.key, label_field(labels), amount)


def record_apply(
    target: Target,
    stream: StreamId,
    batches: Sequence[tuple[int, EventBatch]],
    seconds: float,
    now: float | None = None,
) -> None:
    """A run of a stream's batches was applied in `seconds`: the apply-latency histogram, and
    in the stream's status when and how late (`kvadmin.index.status.applied`)."""
    now = time.time() if now is None else now
    published = batches[-1][1].ts if batches else 0.0
    with _pipeline(target) as pipe:
        observe(pipe, f.APPLY_DURATION, (stream.pod,), seconds)
        status.applied(pipe, stream, published, now)


def record_decision(target: Target, decision: DecisionLike) -> None:
    """One scoring decision: latencies (tokenize only when text was tokenized), kthena's match
    ratio (the best candidate's matched fraction of the prompt's blocks), the decision per
    chosen pod, and the blocks the chosen pod held per medium (also per minute, for the
    dashboard's hit-ratio chart)."""
    model, timings = decision.model, decision.timings_ms
    chosen = next((s for s in decision.scores if s.pod == decision.chosen), None)
    media = chosen.media if chosen is not None else {}
    ratio = decision.longest_match / decision.blocks if decision.blocks else 0.0
    minute_key = hits_key(int(decision.ts // 60))
    counts = Increments()
    observe(counts, f.MATCH_RATIO, (model,), ratio)
    if decision.input != "token_ids" and "tokenize" in timings:
        observe(counts, f.TOKENIZE_DURATION, (model,), timings["tokenize"] / 1000)
        source = decision.tokenizer.partition(":")[0]  # engine:<pod> counts as engine
        inc(counts, f.TOKENIZATIONS, (model, source))
    if decision.tokenizer_fallback:
        inc(counts, f.LOCAL_TOKENIZER_FALLBACKS, (model, decision.tokenizer_fallback))
    if "index" in timings:
        observe(counts, f.INDEX_DURATION, (model,), timings["index"] / 1000)
    if "total" in timings:
        observe(counts, f.SCORING_DURATION, (model,), timings["total"] / 1000)
    inc(counts, f.DECISIONS, (model, decision.chosen or ""))
    inc(counts, f.REQUESTED_BLOCKS, (model,), decision.blocks)
    counts.hincrby(minute_key, "decisions", 1)
    counts.hincrby(minute_key, "blocks", decision.blocks)
    if any(media.values()):
        counts.hincrby(minute_key, "hits", 1)
    pod = decision.chosen
    if pod:
        counts.hincrby(minute_key, f"p:{pod}", 1)
        counts.hincrby(minute_key, f"pb:{pod}", decision.blocks)
    for medium, count in media.items():
        if count:
            inc(counts, f.MATCHED_BLOCKS, (model, medium), count)
            counts.hincrby(minute_key, f"m:{medium}", count)
            if pod:
                counts.hincrby(minute_key, f"pm:{pod}|{medium}", count)
    counts.expire(minute_key, HITS_TTL_SECONDS)
    with _pipeline(target) as pipe:
        counts.queue(pipe)


def record_scoring_error(target: Target, model: str, stage: str) -> None:
    """A decision could not be made: `stage` is "tokenize" or "redis", as kthena labels it."""
    with _pipeline(target) as pipe:
        inc(pipe, f.SCORING_ERRORS, (model, stage))


_failures = OncePerKind(log)


@contextmanager
def _pipeline(target: Target) -> Iterator[Pipeline]:
    """The caller's pipeline as is, or a new one executed on exit (a failure logged once until
    recording works again)."""
    if isinstance(target, Pipeline | AsyncPipeline):  # the caller's, async ones included
        yield target
        return
    pipe = target.pipeline(transaction=False)
    yield pipe
    try:
        pipe.execute()
    except redis.RedisError as error:
        _failures.failed("redis", "metrics: could not record in Redis (%s)", error)
        return
    _failures.recovered("redis")


def record_loop_failures(target: Target, loop: str, counts: Mapping[str, int]) -> None:
    """Rounds of a long-lived loop that failed, by kind (`kvadmin.loop_guard`)."""
    with _pipeline(target) as pipe:
        for kind, count in counts.items():
            inc(pipe, f.LOOP_FAILURES, (loop, kind), count)
