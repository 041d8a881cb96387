"""The consistency guard of local tokenizers: are their ids the engines' ids?

1 in TOKENIZER_CHECK_EVERY locally tokenized requests (per process) is also tokenized by a
candidate engine's /tokenize, and the two compared: the first `keep` ids (all that scoring
reads) and, when the local count is exact, the count. Of a text prompt read in a window (its
count estimated) the engine tokenizes the first twice the window's characters, not the whole
(`routing.tokenize.check_input`). The engine call runs in one checking
thread per process, fed through a queue of CHECK_QUEUE jobs: the request that was sampled
does not wait for it, and when the engines are slower than the sampling a job is skipped
(and counted), never queued without bound.

One engine's word is not enough against the local tokenizer when the model has others: when
an engine's ids differ, up to CORROBORATE_MAX other candidate engines are asked the same
input. The check's result, per model:
- "match": the first engine's ids are the local ones;
- "mismatch": engines that agree with one another (or the model's only engine) differ from the
  local ids: this counts against the local tokenizer;
- "dissent": the first engine differs, no other agrees with it, and another agrees with the
  local ids: a lone dissenting engine, counted against that engine, not the tokenizer (the
  check counts as a match);
- "inconclusive": every engine asked differs, from the local ids and from one another:
  counted against the engines, not the tokenizer;
- "skipped": no engine answered (or no other, when others there are), or the queue was full.

Per model, the checks since its local tokenizer was (re)armed are counted in one Redis hash
(TOKENIZER_GUARD_KEY), shared by every process, and per engine beside them (its checks,
mismatches and dissents). Once a model has TOKENIZER_CHECK_MIN checks and more than
TOKENIZER_MISMATCH_MAX of them mismatched, the check that found it writes `disabled_at`; every
process reads that state at most every TOKENIZER_GUARD_REFRESH_SECONDS and then sends the
model's requests to its engines. An engine with DISSENTS_MIN dissents and more than
TOKENIZER_MISMATCH_MAX of its checks dissents is dissenting: reported (/metrics
`kvadmin_local_tokenizer_engine_dissenting`, the pod page) and left out of the checks. Saving
an engine of the model that names a tokenizer (the admin, `engines add`, the simulator's
registration) re-arms it: `reset(model)` forgets its checks, its engines' included.
"""

import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import redis
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kvadmin.conf import knob
from kvadmin.metrics import families as f
from kvadmin.metrics.families import label_field, label_values
from kvadmin.metrics.recorder import inc
from kvadmin.redis_clients import index_client
from scoring import keys

log = logging.getLogger(__name__)

CHECK_QUEUE = 16
FIELDS = ("checks", "mismatches", "disabled_at")
ENGINE_FIELDS = ("checks", "mismatches", "dissents")
ENGINE_RESULTS = ("match", "mismatch", "dissent")
DISSENTS_MIN = 2
"""One dissent may be an engine restarting with other files; two are a pattern."""
CORROBORATE_MAX = 3
"""An engine whose ids differ is compared with at most this many others."""


@dataclass(frozen=True, slots=True)
class GuardState:
    """One model's checks since its local tokenizer was (re)armed."""

    checks: int = 0
    mismatches: int = 0
    disabled_at: float | None = None

    @property
    def matches(self) -> int:
        return self.checks - self.mismatches

    @property
    def mismatch_rate(self) -> float:
        return self.mismatches / self.checks if self.checks else 0.0


@dataclass(frozen=True, slots=True)
class EngineGuard:
    """One engine's checks since the model's local tokenizer was (re)armed."""

    checks: int = 0
    mismatches: int = 0
    """Its ids differed from the local ones (dissents included)."""
    dissents: int = 0
    """Its ids differed where another engine's were the local ones."""

    @property
    def dissenting(self) -> bool:
        share = knob("TOKENIZER_MISMATCH_MAX") * self.checks
        return self.dissents >= DISSENTS_MIN and self.dissents > share


@dataclass(frozen=True, slots=True)
class Check:
    model: str
    tokens: Sequence[int]
    """The local ids scoring used (the first `keep`)."""
    count: int
    estimated: bool
    engine: Callable[[set[str]], tuple[str, list[int]]]
    """(pod, ids) of the same input from an engine not among the given pods; raises when
    none answers."""
    pods: Sequence[str] = ()
    """The candidate engines that can tokenize."""


def _field(model: str, name: str) -> str:
    return label_field((model, name))


def _engine_field(model: str, pod: str, name: str) -> str:
    return label_field((model, pod, name))


# Sampling and checking ------------------------------------------------------------------------

_sampled = itertools.count()
_jobs: queue.Queue[Check] = queue.Queue(maxsize=CHECK_QUEUE)
_checker: threading.Thread | None = None
_checker_lock = threading.Lock()


def sampled() -> bool:
    """Whether this locally tokenized request is one of the 1 in TOKENIZER_CHECK_EVERY."""
    every = knob("TOKENIZER_CHECK_EVERY")
    return every > 0 and next(_sampled) % every == 0


def submit(check: Check) -> None:
    """Queue a check for the checking thread; a full queue skips it (counted)."""
    global _checker
    with _checker_lock:
        if _checker is None or not _checker.is_alive():
            _checker = threading.Thread(target=_run, name="tokenizer-guard", daemon=True)
            _checker.start()
    try:
        _jobs.put_nowait(check)
    except queue.Full:
        _count_skipped(check.model)


def _run() -> None:
    while True:
        check = _jobs.get()
        try:
            run_check(check)
        except Exception:  # the thread outlives any one check
            log.exception("tokenizer check of %s failed", check.model)


def run_check(check: Check, client: redis.Redis | None = None) -> str | None:
    """Compare with one engine and, when it differs, with up to CORROBORATE_MAX others;
    record, and disable the model when its mismatch rate is too high. Returns the result
    (module docstring; None: skipped)."""
    client = client or index_client()
    asked = dissenting(check.model, client)
    try:
        pod, ids = check.engine(asked)
    except Exception as error:
        return _skipped(check, client, error)
    if _local(check, ids):
        record(check.model, True, client, {pod: "match"})
        return "match"
    asked.add(pod)
    others: dict[str, list[int]] = {}
    while len(others) < CORROBORATE_MAX and set(check.pods) - asked:
        try:
            other, other_ids = check.engine(asked)
        except Exception:
            break  # none of the rest answers
        asked.add(other)
        others[other] = other_ids
    local = {other for other, other_ids in others.items() if _local(check, other_ids)}
    engines = {other: "match" if other in local else "mismatch" for other in others}
    keep = len(check.tokens)
    if not others and set(check.pods) - asked:
        _record_engines(client, check.model, {pod: "mismatch"})
        return _skipped(check, client, RuntimeError("no other engine answered"))
    if not others or any(_same(ids, o, keep, len(o)) for o in others.values()):
        # The only engine, or engines that agree with one another: their word stands.
        record(check.model, False, client, {pod: "mismatch", **engines})
        return "mismatch"
    if local:
        record(check.model, True, client, {pod: "dissent", **engines}, "dissent")
        log.warning(
            "tokenizer check of %s: %s differs where %s agree", check.model, pod, sorted(local)
        )
        return "dissent"
    _record_engines(client, check.model, {pod: "mismatch", **engines})
    inc(client, f.TOKENIZER_CHECKS, (check.model, "inconclusive"))
    return "inconclusive"


def _local(check: Check, ids: Sequence[int]) -> bool:
    """An engine's ids are the local ones."""
    count = None if check.estimated else check.count
    return _same(ids, check.tokens, len(check.tokens), count)


def _same(ids: Sequence[int], other: Sequence[int], keep: int, count: int | None) -> bool:
    """An engine's (whole) `ids` and `other` agree on what scoring reads (the first `keep`)
    and on the count `other` has (None: not known exactly)."""
    return list(ids[:keep]) == list(other[:keep]) and count in (None, len(ids))


def _skipped(check: Check, client: redis.Redis, error: Exception) -> None:
    log.info("tokenizer check of %s skipped: %s", check.model, error)
    _count_skipped(check.model, client)
    return None


def record(
    model: str,
    matched: bool,
    client: redis.Redis | None = None,
    engines: dict[str, str] | None = None,
    result: str | None = None,
) -> GuardState:
    """Count one check (and its engines' results: ENGINE_RESULTS by pod); disables the
    model's local tokenizer when the rule says so."""
    client = client or index_client()
    pipe = client.pipeline(transaction=False)
    pipe.hincrby(keys.TOKENIZER_GUARD_KEY, _field(model, "checks"), 1)
    pipe.hincrby(keys.TOKENIZER_GUARD_KEY, _field(model, "mismatches"), 0 if matched else 1)
    inc(pipe, f.TOKENIZER_CHECKS, (model, result or ("match" if matched else "mismatch")))
    _queue_engines(pipe, model, engines or {})
    checks, mismatches, *_ = pipe.execute()
    state = GuardState(checks, mismatches)
    if (
        checks >= knob("TOKENIZER_CHECK_MIN")
        and state.mismatch_rate > knob("TOKENIZER_MISMATCH_MAX")
        and client.hsetnx(
            keys.TOKENIZER_GUARD_KEY, _field(model, "disabled_at"), f"{time.time():.3f}"
        )
    ):
        log.warning(
            "local tokenizer of %s disabled: %d of %d checks differed from the engines",
            model,
            mismatches,
            checks,
        )
    return state


def _record_engines(client: redis.Redis, model: str, engines: dict[str, str]) -> None:
    pipe = client.pipeline(transaction=False)
    _queue_engines(pipe, model, engines)
    pipe.execute()


def _queue_engines(pipe: redis.client.Pipeline, model: str, engines: dict[str, str]) -> None:
    for pod, result in engines.items():
        pipe.hincrby(keys.TOKENIZER_GUARD_KEY, _engine_field(model, pod, "checks"), 1)
        if result != "match":
            pipe.hincrby(keys.TOKENIZER_GUARD_KEY, _engine_field(model, pod, "mismatches"), 1)
        if result == "dissent":
            pipe.hincrby(keys.TOKENIZER_GUARD_KEY, _engine_field(model, pod, "dissents"), 1)


def _count_skipped(model: str, client: redis.Redis | None = None) -> None:
    try:
        (client or index_client()).hincrby(
            f.TOKENIZER_CHECKS.key, label_field((model, "skipped")), 1
        )
    except redis.RedisError as error:
        log.warning("tokenizer check of %s not counted: %s", model, error)


# State ----------------------------------------------------------------------------------------

_disabled: tuple[float, frozenset[str]] = (0.0, frozenset())


def disabled(model: str) -> bool:
    """Whether the guard disabled the model's local tokenizer, as read from Redis at most
    every TOKENIZER_GUARD_REFRESH_SECONDS (a Redis that does not answer disables nothing:
    the index read that follows reports the outage)."""
    global _disabled
    read_at, models = _disabled
    now = time.monotonic()
    if now - read_at >= knob("TOKENIZER_GUARD_REFRESH_SECONDS"):
        try:
            models = frozenset(model for model, state in states().items() if state.disabled_at)
        except redis.RedisError:
            models = frozenset()
        _disabled = (now, models)
    return model in models


def states(client: redis.Redis | None = None) -> dict[str, GuardState]:
    """Every checked model's state, in one read."""
    values: dict[str, dict[str, str]] = {}
    for parts, value in _fields(client or index_client()):
        if len(parts) == 2 and parts[1] in FIELDS:
            values.setdefault(parts[0], {})[parts[1]] = value
    return {
        model: GuardState(
            int(found.get("checks", 0)),
            int(found.get("mismatches", 0)),
            float(found["disabled_at"]) if "disabled_at" in found else None,
        )
        for model, found in values.items()
    }


def engine_states(client: redis.Redis | None = None) -> dict[tuple[str, str], EngineGuard]:
    """Every checked engine's state by (model, pod), in one read."""
    values: dict[tuple[str, str], dict[str, int]] = {}
    for parts, value in _fields(client or index_client()):
        if len(parts) == 3 and parts[2] in ENGINE_FIELDS:
            values.setdefault((parts[0], parts[1]), {})[parts[2]] = int(value)
    return {engine: EngineGuard(**found) for engine, found in values.items()}


def engine_state(model: str, pod: str, client: redis.Redis | None = None) -> EngineGuard:
    found = (client or index_client()).hmget(
        keys.TOKENIZER_GUARD_KEY, [_engine_field(model, pod, name) for name in ENGINE_FIELDS]
    )
    return EngineGuard(*(int(value or 0) for value in found))


def dissenting(model: str, client: redis.Redis | None = None) -> set[str]:
    """The model's dissenting engines: left out of its checks."""
    return {
        pod
        for (of, pod), state in engine_states(client).items()
        if of == model and state.dissenting
    }


def _fields(client: redis.Redis) -> Iterator[tuple[list[str], str]]:
    for field, value in client.hgetall(keys.TOKENIZER_GUARD_KEY).items():
        yield label_values(field), value


class GuardCollector(Collector):
    """/metrics: whether each checked model's local tokenizer is disabled, and each checked
    engine's checks by result and whether it is dissenting."""

    def __init__(self, client: redis.Redis | None = None) -> None:
        self._client = client

    def collect(self) -> Iterator[Metric]:
        family = f.LOCAL_TOKENIZER_DISABLED
        gauge = GaugeMetricFamily(family.name, family.help, labels=list(family.labels))
        for model, state in sorted(states(self._client).items()):
            gauge.add_metric([model], 1.0 if state.disabled_at else 0.0)
        yield gauge
        engines = sorted(engine_states(self._client).items())
        family = f.TOKENIZER_ENGINE_CHECKS
        checks = GaugeMetricFamily(family.name, family.help, labels=list(family.labels))
        family = f.TOKENIZER_ENGINE_DISSENTING
        dissent = GaugeMetricFamily(family.name, family.help, labels=list(family.labels))
        for (model, pod), state in engines:
            counts = {
                "match": state.checks - state.mismatches,
                "mismatch": state.mismatches - state.dissents,
                "dissent": state.dissents,
            }
            for result in ENGINE_RESULTS:
                checks.add_metric([model, pod, result], float(counts[result]))
            dissent.add_metric([model, pod], 1.0 if state.dissenting else 0.0)
        yield checks
        yield dissent


def state(model: str, client: redis.Redis | None = None) -> GuardState:
    checks, mismatches, disabled_at = (client or index_client()).hmget(
        keys.TOKENIZER_GUARD_KEY, [_field(model, name) for name in FIELDS]
    )
    return GuardState(
        int(checks or 0), int(mismatches or 0), float(disabled_at) if disabled_at else None
    )


def reset(model: str, client: redis.Redis | None = None) -> None:
    """Re-arm the model's local tokenizer: forget its checks and its engines' (and that it
    was disabled)."""
    global _disabled
    client = client or index_client()
    engines = [
        _engine_field(model, pod, name)
        for (of, pod) in engine_states(client)
        if of == model
        for name in ENGINE_FIELDS
    ]
    client.hdel(keys.TOKENIZER_GUARD_KEY, *(_field(model, name) for name in FIELDS), *engines)
    _disabled = (0.0, frozenset())
