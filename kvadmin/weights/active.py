"""The tier weights and TTFT parameters every scoring process uses right now, with the version
that names them (a version holds both, kvadmin.weights.parameters).

A saved version is published to Redis (`keys.WEIGHTS_VERSION_KEY` + `keys.WEIGHTS_CONFIG_KEY`,
set together by one script). Each process (web or worker, however many) keeps the weights in
memory and re-reads the version with one GET at most every `WEIGHTS_REFRESH_SECONDS` (0.5 s),
loading the config only when the version moved: a save reaches every process within about half
a second, and the scoring hot path costs a clock read, never a database query.

Decisions:
1. Publishing only moves the version forward (the script compares), so a process that
   bootstraps from an older database read can never overwrite a newer save.
2. When Redis has no version (first start, a flushed Redis), one process reads the latest
   saved version from the database and publishes it; the others keep what they have until
   it appears. The database read runs in a helper thread, so this also works when called
   from an async view.
3. A failing Redis or a bad published config keeps the weights the process already has
   (logged once per kind of failure): scoring never stops for want of a weights refresh.
"""

import json
import logging
import os
import threading
import time
from dataclasses import dataclass

import redis

from kvadmin.conf import knob, value_format
from kvadmin.index.writer import Applier
from kvadmin.log_once import OncePerKind
from kvadmin.redis_clients import index_client
from kvadmin.weights.config import KTHENA_DEFAULTS, WeightConfig
from scoring import keys
from scoring.scripts import package_script
from scoring.ttft import DEFAULT_PARAMETERS, TtftParameters
from scoring.weights import InvalidTierWeights, MediaPreference, TierWeights

log = logging.getLogger(__name__)

_PUBLISH = package_script(__file__, "publish")


@dataclass(frozen=True, slots=True)
class ActiveWeights:
    version: int
    weights: TierWeights
    parameters: TtftParameters = DEFAULT_PARAMETERS
    """The `ttft` policy's parameters of the same version."""

    @classmethod
    def of(cls, version: int, config: WeightConfig) -> "ActiveWeights":
        return cls(version, config.tier_weights(), config.ttft)


_DEFAULTS = ActiveWeights.of(0, KTHENA_DEFAULTS)


@dataclass(slots=True)
class _State:
    active: ActiveWeights | None = None
    checked_at: float = float("-inf")
    preference: tuple[int, MediaPreference] | None = None


_state = _State()
_failures = OncePerKind(log)
_refreshing = threading.Lock()


def _after_fork_in_child() -> None:
    """A fork (Celery's prefork pool) copies the lock as it was: held, if another thread was
    refreshing, and then never released in the child. Start the child with a free lock."""
    global _refreshing
    _refreshing = threading.Lock()
    _state.checked_at = float("-inf")


os.register_at_fork(after_in_child=_after_fork_in_child)


def active_weights() -> ActiveWeights:
    """The weights scoring uses now: from memory, re-checked against Redis at most every
    `WEIGHTS_REFRESH_SECONDS`."""
    active = _state.active
    if active is not None and time.monotonic() - _state.checked_at < _refresh_seconds():
        return active
    return _refreshed(active)


def cached_weights() -> tuple[ActiveWeights | None, bool]:
    """The weights in memory (None before the first load) and whether they need no check: a
    caller on an event loop runs `active_weights` in a thread for the check, which may wait
    for Redis or the database."""
    active = _state.active
    return active, active is not None and time.monotonic() - _state.checked_at < _refresh_seconds()


def active_media_preference() -> MediaPreference:
    """The medium order the active weights imply, for the index writer (compatibility.md 5.4): the
    value names the tier that scores highest. Rebuilt only when the version moves."""
    active = active_weights()
    cached = _state.preference
    if cached is None or cached[0] != active.version:
        preference = MediaPreference.from_tier_weights(active.weights)
        cached = _state.preference = (active.version, preference)
    return cached[1]


def active_applier(client: redis.Redis, **options: int) -> Applier:
    """The index writer product code uses: matrix values name the tier the active weights
    score highest (`active_media_preference`, asked at every command, so a long-lived writer
    follows a saved version) in the configured value format (compatibility.md 2.7), keeping
    kthena's sidecar mapping keys when SIDECAR_MAPPING_KEYS is on (2.3). Every
    writer that orders media is built here (purges order none: kvadmin/index/purge.py), so
    no drain or collection orders them by other weights.
    `options`: the `Applier`'s bounds (`chunk_size`, `blocks_per_call`)."""
    return Applier(
        client,
        preference=active_media_preference,
        value_format=value_format(),
        mapping_keys=knob("SIDECAR_MAPPING_KEYS"),
        **options,
    )


def publish(version: int, config: WeightConfig, *, force: bool = False) -> bool:
    """Announce `version` to every process; False when Redis already has it or a newer one
    (unless `force`: the repair after restoring an older database). This process switches at
    once."""
    payload = json.dumps({"version": version, **config.to_json()})
    client = index_client()
    published = bool(
        _PUBLISH(
            client,
            [keys.WEIGHTS_VERSION_KEY, keys.WEIGHTS_CONFIG_KEY],
            [version, payload, "1" if force else "0"],
        )
    )
    if published:
        _state.active = ActiveWeights.of(version, config)
        _state.checked_at = time.monotonic()
    return published


def forget_cached_weights() -> None:
    """Drop this process's copy so the next call reads Redis (tests; after a fork)."""
    _state.active = None
    _state.checked_at = float("-inf")
    _state.preference = None


def _refresh_seconds() -> float:
    return float(knob("WEIGHTS_REFRESH_SECONDS"))


def _refreshed(active: ActiveWeights | None) -> ActiveWeights:
    # Only one thread checks; the others keep scoring with what the process has.
    if not _refreshing.acquire(blocking=active is None):
        return active  # type: ignore[return-value]
    try:
        if _state.active is not None and time.monotonic() - _state.checked_at < _refresh_seconds():
            return _state.active
        _state.active = _checked(_state.active)
        _state.checked_at = time.monotonic()
        return _state.active
    finally:
        _refreshing.release()


def _checked(current: ActiveWeights | None) -> ActiveWeights:
    try:
        client = index_client()
        version = client.get(keys.WEIGHTS_VERSION_KEY)
        _failures.recovered("redis")
        if version is None:
            return _bootstrapped(current)
        if current is not None and int(version) == current.version:
            return current
        return _parsed(client.get(keys.WEIGHTS_CONFIG_KEY)) or current or _DEFAULTS
    except (redis.RedisError, ValueError) as error:
        _failures.failed("redis", "tier weights: cannot read the published version (%s)", error)
        return current or _DEFAULTS


def _parsed(payload: str | None) -> ActiveWeights | None:
    if payload is None:
        return None
    try:
        data = json.loads(payload)
        return ActiveWeights.of(int(data["version"]), WeightConfig.from_json(data))
    except (ValueError, KeyError, TypeError, InvalidTierWeights) as error:
        _failures.failed("config", "tier weights: the published config is unusable (%s)", error)
        return None


def _bootstrapped(current: ActiveWeights | None) -> ActiveWeights:
    """Redis has no version: publish the latest saved one, read from the database."""
    found: list[tuple[int, WeightConfig] | Exception] = []
    reader = threading.Thread(target=_read_latest_saved, args=(found,), name="weights-db")
    reader.start()
    reader.join(timeout=5)
    if not found or isinstance(found[0], Exception):
        error = found[0] if found else TimeoutError("no answer within 5 s")
        _failures.failed("database", "tier weights: cannot read the saved versions (%s)", error)
        return current or _DEFAULTS
    version, config = found[0]
    publish(version, config)
    return _parsed(index_client().get(keys.WEIGHTS_CONFIG_KEY)) or ActiveWeights.of(version, config)


def _read_latest_saved(found: list[tuple[int, WeightConfig] | Exception]) -> None:
    """In its own thread: Django refuses database queries in a thread running an event loop,
    and a fresh thread is safe after a fork too. Its connection closes with it."""
    from django.db import connections

    from kvadmin.weights.models import TierWeightsVersion

    try:
        latest = TierWeightsVersion.objects.order_by("-version").first()
        found.append((latest.version, latest.weight_config) if latest else (0, KTHENA_DEFAULTS))
    except Exception as error:  # any database trouble: the caller keeps scoring
        found.append(error)
    finally:
        connections.close_all()
