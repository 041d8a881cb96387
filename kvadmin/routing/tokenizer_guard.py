"""The consistency guard of local tokenizers: are their ids the engines' ids?

1 in TOKENIZER_CHECK_EVERY locally tokenized requests (per process) is also tokenized by a
candidate engine's /tokenize, and the two compared: the first `keep` ids (all that scoring
reads) and, when the local count is exact, the count. The engine call runs in one checking
thread per process, fed through a queue of CHECK_QUEUE jobs: the request that was sampled
does not wait for it, and when the engines are slower than the sampling a job is skipped
(and counted), never queued without bound.

Per model, the checks since its local tokenizer was (re)armed are counted in one Redis hash
(TOKENIZER_GUARD_KEY), shared by every process. Once a model has TOKENIZER_CHECK_MIN checks
and more than TOKENIZER_MISMATCH_MAX of them mismatched, the check that found it writes
`disabled_at`; every process reads that state at most every TOKENIZER_GUARD_REFRESH_SECONDS
and then sends the model's requests to its engines. Saving an engine of the model that names
a tokenizer (the admin, `engines add`, the simulator's registration) re-arms it:
`reset(model)` forgets its checks.
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
class Check:
    model: str
    tokens: Sequence[int]
    """The local ids scoring used (the first `keep`)."""
    count: int
    estimated: bool
    engine: Callable[[], list[int]]
    """The engines' ids of the same input; raises when no engine answers."""


def _field(model: str, name: str) -> str:
    return label_field((model, name))


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


def run_check(check: Check, client: redis.Redis | None = None) -> bool | None:
    """Compare, record, and disable the model when its mismatch rate is too high. Returns
    whether the ids matched (None: no engine answered, counted as skipped)."""
    try:
        engine = check.engine()
    except Exception as error:
        log.info("tokenizer check of %s skipped: %s", check.model, error)
        _count_skipped(check.model, client)
        return None
    matched = list(engine[: len(check.tokens)]) == list(check.tokens) and (
        check.estimated or len(engine) == check.count
    )
    record(check.model, matched, client)
    return matched


def record(model: str, matched: bool, client: redis.Redis | None = None) -> GuardState:
    """Count one check; disables the model's local tokenizer when the rule says so."""
    client = client or index_client()
    pipe = client.pipeline(transaction=False)
    pipe.hincrby(keys.TOKENIZER_GUARD_KEY, _field(model, "checks"), 1)
    pipe.hincrby(keys.TOKENIZER_GUARD_KEY, _field(model, "mismatches"), 0 if matched else 1)
    inc(pipe, f.TOKENIZER_CHECKS, (model, "match" if matched else "mismatch"))
    checks, mismatches, _ = pipe.execute()
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
    for field, value in (client or index_client()).hgetall(keys.TOKENIZER_GUARD_KEY).items():
        parts = label_values(field)
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


class GuardCollector(Collector):
    """/metrics: whether each checked model's local tokenizer is disabled."""

    def __init__(self, client: redis.Redis | None = None) -> None:
        self._client = client

    def collect(self) -> Iterator[Metric]:
        family = f.LOCAL_TOKENIZER_DISABLED
        gauge = GaugeMetricFamily(family.name, family.help, labels=list(family.labels))
        for model, state in sorted(states(self._client).items()):
            gauge.add_metric([model], 1.0 if state.disabled_at else 0.0)
        yield gauge


def state(model: str, client: redis.Redis | None = None) -> GuardState:
    checks, mismatches, disabled_at = (client or index_client()).hmget(
        keys.TOKENIZER_GUARD_KEY, [_field(model, name) for name in FIELDS]
    )
    return GuardState(
        int(checks or 0), int(mismatches or 0), float(disabled_at) if disabled_at else None
    )


def reset(model: str, client: redis.Redis | None = None) -> None:
    """Re-arm the model's local tokenizer: forget its checks (and that it was disabled)."""
    global _disabled
    (client or index_client()).hdel(
        keys.TOKENIZER_GUARD_KEY, *(_field(model, name) for name in FIELDS)
    )
    _disabled = (0.0, frozenset())
