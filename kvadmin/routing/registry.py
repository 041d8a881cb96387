"""The engine registry as the sync scoring shell sees it: every engine row kept in memory per
process, so that scoring a request queries no database (the query was a fifth of a decision).

The same rule as the API's per-process copy (kvadmin/api/process_cache.py), whose version key
it shares: a save or delete of an `Engine` drops this process's copy at once (`forget`, from
kvadmin/routing/signals.py) and, once committed, moves the version in Redis
(`keys.API_CACHE_VERSION_KEY`); every process compares the version at most every
API_CACHE_REFRESH_SECONDS (one GET) and reloads when it moved. A model without an engine in the
copy is checked again at once, so an engine registered a moment ago scores on its first request.
"""

import threading
import time
from dataclasses import dataclass

import redis

from kvadmin.conf import knob
from kvadmin.engines.models import Engine
from kvadmin.routing.request import ENGINE_COLUMNS, EngineRow
from scoring import keys


@dataclass(frozen=True, slots=True)
class _Copy:
    version: str | None
    engines: dict[str, list[EngineRow]]
    checked_at: float


_copy: _Copy | None = None
_lock = threading.Lock()


def engines(client: redis.Redis, model: str) -> list[EngineRow]:
    """`model`'s registered engines from this process's copy (see the module docstring)."""
    copy = _copy
    if copy is None or time.monotonic() - copy.checked_at >= knob("API_CACHE_REFRESH_SECONDS"):
        copy = _checked(client, copy)
    found = copy.engines.get(model)
    if found is None:  # registered a moment ago?
        found = _checked(client, copy).engines.get(model, [])
    return found


def _checked(client: redis.Redis, copy: _Copy | None) -> _Copy:
    """The copy, loaded again when the version moved (or there is none); a Redis that does not
    answer keeps the copy the process has."""
    global _copy
    try:
        version = client.get(keys.API_CACHE_VERSION_KEY)
    except redis.RedisError:
        if copy is None:
            raise
        version = copy.version
    with _lock:
        if copy is None or version != copy.version:
            engines: dict[str, list[EngineRow]] = {}
            for model, *row in Engine.objects.values_list("model", *ENGINE_COLUMNS):
                engines.setdefault(model, []).append(tuple(row))  # type: ignore[arg-type]
            copy = _Copy(version, engines, time.monotonic())
        else:
            copy = _Copy(copy.version, copy.engines, time.monotonic())
        _copy = copy
    return copy


def forget() -> None:
    """Drop this process's copy (the next scoring loads the table again)."""
    global _copy
    _copy = None
