"""The live feed's tail outlives what it reads: a log entry nested too deep to decode (msgspec
raises RecursionError, not DecodeError) neither ends the tail nor the feed's next decisions."""

import asyncio

import pytest
import redis
from asgiref.sync import async_to_sync

from scoring.keys import DECISIONS_KEY
from tests.routing.feed_socket import FeedSocket, record

pytestmark = pytest.mark.django_db(transaction=True)

DEEP = '{"x": ' + "[" * 100_000 + "]" * 100_000 + "}"
"""An unknown field msgspec skips by recursing: RecursionError."""


def test_a_hostile_log_entry_does_not_end_the_live_feed(
    asgi_server, session_cookie, redis_client: redis.Redis
) -> None:
    async def live() -> list[str]:
        async with FeedSocket.to(asgi_server, session_cookie) as socket:
            await asyncio.to_thread(redis_client.xadd, DECISIONS_KEY, {"d": DEEP})
            await asyncio.to_thread(record, "before")
            first = await socket.rows_until(1)
            await asyncio.to_thread(redis_client.xadd, DECISIONS_KEY, {"d": DEEP})
            await asyncio.to_thread(record, "after")
            return first + await socket.rows_until(1)

    assert async_to_sync(live)() == ["before", "after"]
