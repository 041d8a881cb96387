"""The API tokens and the engine registry as the lean scoring path sees them: kept in memory
per web process, so that scoring a request queries no database.

Both tables are small (tens of tokens, hundreds of engines) and change rarely, so a process
loads all of each at once and keeps them until they change:
1. Any save or delete of an `ApiToken` or an `Engine` (admin, forms, commands, `revoke`)
   drops this process's copy at once and, once its transaction commits, sets a new random
   version in Redis (`keys.API_CACHE_VERSION_KEY`). Random, not a counter: a counter starts
   again after a Redis flush and could come back to the value a process loaded under.
2. No request is authorized from a copy checked longer than API_CACHE_REFRESH_SECONDS ago:
   the first request after that compares the version with the one the copy was loaded under
   (one GET, shared by the requests arriving meanwhile) and reloads when it moved, before it
   goes on. So a revoked token or a disabled engine stops counting everywhere within the
   period, also on the first request to a process that was idle for an hour. A token or a
   model or pod the copy does not know is checked again at once (one GET; a reload only when
   the version moved), so a token or engine just created works on its first request.
3. The version is read before the tables, so a change committed during a load moves it after
   the load and is picked up at the next check. A Redis that does not answer the check of a
   copy past its period fails the request (an outage: 503), since the copy may hold a revoked
   token; a copy within it is kept when a recheck goes unanswered.

Queryset `update()` sends no signals: code that changes these tables that way must call
`changed()` itself.
"""

import asyncio
import logging
import secrets
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import redis
import redis.asyncio
from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from kvadmin.api.models import ApiToken
from kvadmin.api.scopes import Grants
from kvadmin.conf import knob
from kvadmin.engines.models import Engine
from kvadmin.redis_clients import index_client
from kvadmin.routing.request import ENGINE_COLUMNS, EngineRow
from scoring import keys

log = logging.getLogger(__name__)

LAST_USED_RESOLUTION_SECONDS = 60.0
"""As `kvadmin.api.auth`: recording every use would make each call a database write."""


@dataclass(frozen=True, slots=True)
class KnownToken:
    pk: int
    name: str
    scopes: str
    grants: Grants


@dataclass(frozen=True, slots=True)
class Snapshot:
    version: str | None
    tokens: dict[str, KnownToken]
    """Active tokens by the SHA-256 digest of the token."""
    engines: dict[str, list[EngineRow]]
    """Registered engines by model."""
    serving: dict[str, str] = field(default_factory=dict)
    """Each engine's serving address (`Engine.serve_address`) by pod, where it has one: the
    endpoint picker's (kvadmin/gateway)."""


@dataclass(slots=True)
class _State:
    snapshot: Snapshot | None = None
    checked_at: float = float("-inf")
    used_at: dict[int, float] = field(default_factory=dict)


_state = _State()


class SharedCheck[T]:
    """One check under way per process: callers that come while it runs await the same task
    (on the event loop that started it), shielded, so one caller giving up (its request
    cancelled) does not cancel the others' check."""

    def __init__(self) -> None:
        self._under_way: tuple[asyncio.AbstractEventLoop, asyncio.Task[T]] | None = None

    async def run(self, start: Callable[[], Coroutine[Any, Any, T]]) -> T:
        loop = asyncio.get_running_loop()
        if self._under_way is None or self._under_way[0] is not loop or self._under_way[1].done():
            self._under_way = (loop, loop.create_task(start()))
        return await asyncio.shield(self._under_way[1])


_check: SharedCheck[Snapshot] = SharedCheck()


async def snapshot(client: redis.asyncio.Redis, recheck: bool = False) -> Snapshot:
    """The tokens and engines, from memory while the copy was checked against
    `keys.API_CACHE_VERSION_KEY` within API_CACHE_REFRESH_SECONDS; otherwise, or when
    `recheck` (a caller that found no token or engine where one may just have been added),
    checked first. Raises a Redis error when the check is not answered and the copy is past
    its period (or there is none)."""
    current = _state.snapshot
    if current is not None and not recheck and _fresh():
        return current
    return await _check.run(lambda: _checked(client, current))


def _fresh() -> bool:
    return time.monotonic() - _state.checked_at < knob("API_CACHE_REFRESH_SECONDS")


async def _checked(client: redis.asyncio.Redis, current: Snapshot | None) -> Snapshot:
    try:
        version = await client.get(keys.API_CACHE_VERSION_KEY)
    except redis.RedisError:
        if current is None or not _fresh():
            raise
        return current
    if current is None or version != current.version:
        current = await sync_to_async(_load, thread_sensitive=True)(version)
        _state.snapshot = current
    _state.checked_at = time.monotonic()
    return current


_background: set[asyncio.Task] = set()


def in_background(work: Coroutine[Any, Any, Any]) -> None:
    """Run `work` as a task of this event loop, kept until it is done (its errors logged)."""
    task = asyncio.ensure_future(work)
    _background.add(task)
    task.add_done_callback(_done)


def _done(task: asyncio.Task) -> None:
    _background.discard(task)
    if not task.cancelled() and (error := task.exception()) is not None:
        log.warning("API cache: a background check failed (%s)", error)


def _load(version: str | None) -> Snapshot:
    tokens = {
        row.digest: KnownToken(row.pk, row.name, row.scopes, row.grants)
        for row in ApiToken.objects.active()
    }
    engines: dict[str, list[EngineRow]] = {}
    serving = {}
    for model, address, *row in Engine.objects.values_list(
        "model", "serve_address", *ENGINE_COLUMNS
    ):
        engines.setdefault(model, []).append(tuple(row))  # type: ignore[arg-type]
        if address:
            serving[row[0]] = address
    return Snapshot(version, tokens, engines, serving)


async def note_use(token: KnownToken) -> None:
    """Record that `token` was used, at most once a minute per token and process."""
    now = time.monotonic()
    if now - _state.used_at.get(token.pk, float("-inf")) < LAST_USED_RESOLUTION_SECONDS:
        return
    _state.used_at[token.pk] = now
    await sync_to_async(_touch, thread_sensitive=True)(token.pk)


def _touch(pk: int) -> None:
    ApiToken.objects.filter(pk=pk).update(last_used_at=timezone.now())


def changed() -> None:
    """Tokens or engines changed: drop this process's copy now, and every other process's
    once the change commits."""
    forget()
    transaction.on_commit(_announce)


def _announce() -> None:
    forget()
    try:
        index_client().set(keys.API_CACHE_VERSION_KEY, secrets.token_hex(8))
    except redis.RedisError as error:
        # The other processes keep their copy until the version moves: say so.
        log.warning("API cache: could not announce a token or engine change (%s)", error)


def forget() -> None:
    """Drop this process's copy (the next request loads the tables again)."""
    _state.snapshot = None
    _state.checked_at = float("-inf")
