"""Each Redis role's client, configured from one redis+sentinel:// URL by kvadmin/redis_urls.py
with its library's own Sentinel support, works on the primary, and on the promoted replica once
the primary is killed: redis-py (the index and request-path clients), kombu (the Celery broker),
Celery's result backend, channels-redis (the channel layer) and django-redis (the cache)."""

import asyncio
import uuid
from collections.abc import Callable

import redis
from celery import Celery
from channels_redis.core import RedisChannelLayer
from django_redis.cache import RedisCache
from kombu import Connection

from kvadmin import redis_urls
from tests.sentinel.topology import SentinelTopology
from tests.waiting import patient, wait_until


def _index(url: str) -> Callable[[], None]:
    client = redis_urls.client(url, decode_responses=True, socket_timeout=1)

    def use() -> None:
        key = uuid.uuid4().hex
        client.set(key, "1")
        assert client.get(key) == "1"

    return use


def _broker(url: str) -> Callable[[], None]:
    broker, options = redis_urls.celery_url(redis_urls.with_db(url, 1))

    def use() -> None:
        with Connection(broker, transport_options=options, connect_timeout=1) as connection:
            queue = connection.SimpleQueue(f"q-{uuid.uuid4().hex}")
            queue.put({"n": 1})
            message = queue.get(timeout=patient(2))
            assert message.payload == {"n": 1}
            message.ack()
            queue.close()

    return use


def _results(url: str) -> Callable[[], None]:
    backend, options = redis_urls.celery_url(redis_urls.with_db(url, 1))
    app = Celery("sentinel-test", backend=backend, set_as_current=False)
    app.conf.result_backend_transport_options = options | {"retry_policy": {"max_retries": 0}}

    def use() -> None:
        task = uuid.uuid4().hex
        app.backend.store_result(task, 7, "SUCCESS")
        assert app.backend.get_task_meta(task)["result"] == 7

    return use


def _channels(url: str) -> Callable[[], None]:
    host = redis_urls.channel_host(redis_urls.with_db(url, 2), socket_timeout=2)

    def use() -> None:
        async def round_trip() -> None:
            layer = RedisChannelLayer(hosts=[host])
            channel = await layer.new_channel()
            await layer.send(channel, {"type": "hello"})
            assert (await asyncio.wait_for(layer.receive(channel), 3))["type"] == "hello"
            await layer.flush()
            await layer.close_pools()

        asyncio.run(round_trip())

    return use


def _cache(url: str) -> Callable[[], None]:
    config = redis_urls.cache(
        redis_urls.with_db(url, 3), {"SOCKET_TIMEOUT": 1, "SOCKET_CONNECT_TIMEOUT": 1}
    )
    cache = RedisCache(config["LOCATION"], {"OPTIONS": config["OPTIONS"]})

    def use() -> None:
        key = uuid.uuid4().hex
        cache.set(key, 5)
        assert cache.get(key) == 5

    return use


ROLES = {"index": _index, "broker": _broker, "results": _results, "channels": _channels}
ROLES["cache"] = _cache


def _works(use: Callable[[], None]) -> bool:
    try:
        use()
        return True
    except (redis.RedisError, OSError, TimeoutError):
        return False


def test_every_role_works_on_the_primary_and_on_the_promoted_replica(
    topology: SentinelTopology,
) -> None:
    roles = {name: build(topology.url) for name, build in ROLES.items()}
    for use in roles.values():
        use()  # on the primary

    killed = topology.kill_primary()
    wait_until(lambda: topology.primary() != killed, timeout=30, what="Sentinel to promote")

    for name, use in roles.items():
        wait_until(lambda use=use: _works(use), timeout=30, what=f"{name} on the new primary")
