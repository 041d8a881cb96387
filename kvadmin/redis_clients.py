"""Redis clients of the web and worker processes, one pool per role per process.

Two kinds, on purpose (redis-py 8 would otherwise wait 5 s per command):
- request-path clients (`index_client`, `index_bytes_client`, `async_index_client`): connect
  and socket timeouts of REDIS_TIMEOUT_SECONDS and no retry of a timed-out command, so a
  stopped or stalled Redis fails a page within a second and `kvadmin.unavailable` answers 503;
- ingest clients (`ingest_client`, `ingest_bytes_client`): no socket timeout, for the ingest
  loop and the worker tasks whose Lua scripts may legitimately run for seconds.
A request that queues a Celery task does it with `send_from_request`: the broker's connection
has the request path's timeouts too (kombu's own default is to wait forever).

Through Sentinel (`kvadmin.redis_urls`), each connects to the primary Sentinel names when it
connects: after a failover, a failed command's next connection reaches the promoted replica.
"""

import contextlib
from functools import cache
from typing import Any

import celery
import hiredis
import redis
import redis.asyncio
from django.conf import settings
from kombu.connection import ConnectionPool
from kombu.exceptions import OperationalError
from redis._parsers.base import BaseParser
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.connection import HiredisRespSerializer
from redis.retry import Retry

from kvadmin import redis_urls


class RedisBusy(redis.ResponseError):
    """Redis answers BUSY to every command while a script runs past `busy-reply-threshold`
    (5 s by default): for the caller an outage like a stall, not a bug in its command."""


# redis-py names error replies by their first word and has no class for BUSY, so it would be a
# plain ResponseError (a 500): the parsers of both clients, sync and async, raise it as this.
BaseParser.EXCEPTION_CLASSES["BUSY"] = RedisBusy

# What an unavailable Redis looks like to a caller: refused or dropped connections, commands
# that time out, a Redis still loading its data or held by a long script, and Celery failing
# to reach its broker.
REDIS_OUTAGES: tuple[type[Exception], ...] = (
    redis.ConnectionError,
    redis.TimeoutError,
    RedisBusy,
    OperationalError,
)


def _request_path(retry: type[Retry] | type[AsyncRetry] = Retry) -> dict[str, Any]:
    timeout = settings.REDIS_TIMEOUT_SECONDS
    return {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        # One immediate retry of a dropped pooled connection (after a Redis restart), none of a
        # timeout: a stalled Redis would only make the caller wait twice.
        "retry": retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
    }


@cache
def index_client(url: str = "") -> redis.Redis:
    """The Redis at `url`, text responses; by default INDEX_REDIS_URL (REDIS_URL): kvadmin's
    app state, and the index when no KVADMIN_INDEX_GROUPS splits it (a model's index group
    gives its own: `kvadmin.index.groups`)."""
    return redis_urls.client(
        url or settings.INDEX_REDIS_URL,
        decode_responses=True,
        command_packer=_PACKER,
        **_request_path(),
    )


@cache
def index_bytes_client(url: str = "") -> redis.Redis:
    """The same database with raw bytes responses, for binary payloads."""
    return redis_urls.client(
        url or settings.INDEX_REDIS_URL, command_packer=_PACKER, **_request_path()
    )


def async_index_client(url: str = "") -> redis.asyncio.Redis:
    """A new asyncio client of `url` (INDEX_REDIS_URL by default), text responses, with the
    request-path timeouts. Its connections belong to the event loop that opens them: one
    client per loop, closed by its owner (kvadmin/api/fast_path.py keeps one per web process)."""
    client = redis_urls.async_client(
        url or settings.INDEX_REDIS_URL, decode_responses=True, **_request_path(AsyncRetry)
    )
    pool = client.connection_pool
    pool.connection_class = type(
        f"Hiredis{pool.connection_class.__name__}", (_HiredisPacking, pool.connection_class), {}
    )
    return client


class _OneWordPacker(HiredisRespSerializer):
    """redis-py's hiredis serializer, but a command whose name is one word goes to hiredis as
    it is: redis-py's would first copy every argument through a generator (for bytearray and
    memoryview ones, which hiredis refuses), a third of the packing time of a scoring script's
    call. Those and names of two words ("CLIENT SETINFO") take redis-py's way; the bytes on the
    wire are the same. The sync request-path clients pack with it (`command_packer`), the
    async one through `_HiredisPacking`."""

    def pack(self, *args: Any) -> list[bytes]:
        if isinstance(args[0], str) and " " not in args[0]:
            with contextlib.suppress(TypeError):  # a bytearray or memoryview argument
                return [hiredis.pack_command(args)]
        return super().pack(*args)


_PACKER = _OneWordPacker()


class _HiredisPacking:
    """redis.asyncio packs commands in Python where the sync client has hiredis do it: with
    the scoring scripts' hundreds of arguments that was the lean path's largest CPU cost
    (bench/api.py). Mixed into the pool's connection class (TCP, TLS or Unix socket alike),
    it packs as the sync clients do (`_OneWordPacker`)."""

    def pack_command(self, *args: Any) -> list[bytes]:
        return _PACKER.pack(*args)


@cache
def ingest_client(url: str = "") -> redis.Redis:
    """The index at `url` (INDEX_REDIS_URL by default) for the ingest loop and worker tasks:
    long Lua scripts, no socket timeout."""
    return redis_urls.client(
        url or settings.INDEX_REDIS_URL, decode_responses=True, socket_timeout=None
    )


@cache
def ingest_bytes_client(url: str = "") -> redis.Redis:
    """`ingest_client` with raw bytes responses."""
    return redis_urls.client(url or settings.INDEX_REDIS_URL, socket_timeout=None)


@cache
def _request_path_broker() -> ConnectionPool:
    timeout = settings.REDIS_TIMEOUT_SECONDS
    options = {"socket_timeout": timeout, "socket_connect_timeout": timeout, "max_retries": 0}
    connection = celery.current_app.connection_for_write(transport_options=options)
    return connection.Pool(limit=None)


def send_from_request(task: celery.Task, *args: Any) -> None:
    """Queue `task(*args)` from a request, within REDIS_TIMEOUT_SECONDS: a stopped or stalled
    broker raises (OperationalError or a Redis timeout: one of REDIS_OUTAGES, a 503) at once,
    where `delay` would wait for it forever and retry. Not retried: the caller answers 503 and
    its client sends again."""
    with _request_path_broker().acquire(block=True) as connection:
        task.apply_async(args, connection=connection, retry=False)
