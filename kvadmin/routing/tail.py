"""Fan-out of new decisions to the live feed's sockets in this web process.

The scoring API only appends to the decision log (one XADD); it never waits for a browser.
Each web process runs one `DecisionTail` per event loop while at least one feed socket is open:
a task reading the log with `XREAD BLOCK` (its own connection, no socket timeout) that decodes
each new decision once and offers it to every subscribed socket. `offer` only appends to the
socket's own bounded buffer; each socket sends its frames from its own task. So a slow browser
can only fall behind itself (its buffer overflows into "N more not shown"), never the API, the
tail or the other sockets.

Why a tail per process rather than the channel layer: a group_send per decision would cost the
API a few Redis commands per decision and per socket, and every socket would still receive
every message to coalesce it. The log is already in Redis, in order; reading it is one
blocking command per batch for the whole process, and every web replica reads it the same way.
"""

import asyncio
import contextlib
import logging
import time
import weakref
from dataclasses import dataclass, field
from typing import Protocol

import redis
import redis.asyncio
from django.conf import settings
from django.utils.safestring import SafeString

from kvadmin.loop_guard import LoopGuard
from kvadmin.routing import decisions
from kvadmin.routing.decisions import Decision
from kvadmin.routing.presenters import row_html
from scoring import keys

log = logging.getLogger(__name__)

READ_COUNT = 1000
BLOCK_MS = 5000
START_TIMEOUT = 5.0


@dataclass(slots=True, eq=False)
class FeedItem:
    """A new decision as the feed sees it; its row is rendered once, when first needed."""

    decision: Decision
    _html: SafeString | None = field(default=None, repr=False)

    @property
    def log_id(self) -> str:
        return self.decision.log_id

    def html(self) -> SafeString:
        if self._html is None:
            self._html = row_html(self.decision)
        return self._html


class Subscriber(Protocol):
    def offer(self, item: FeedItem) -> None:
        """Take a new decision without blocking (called from the tail's task)."""
        ...


class DecisionTail:
    def __init__(self, url: str) -> None:
        self.url = url
        self.subscribers: set[Subscriber] = set()
        self.cursor: str | None = None
        self.read_at: float | None = None
        """When the decision log last answered a read (unix seconds): the feed's freshness."""
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self.guard = LoopGuard("live_feed", log)

    async def subscribe(self, subscriber: Subscriber) -> str:
        """Start offering new decisions to `subscriber`; returns the log id after which they
        start (raises TimeoutError when Redis does not answer)."""
        self.subscribers.add(subscriber)
        if self._task is None or self._task.done():
            self.cursor = None
            self._ready = asyncio.Event()
            self._task = asyncio.create_task(self._run(), name="decision-tail")
        try:
            await asyncio.wait_for(self._ready.wait(), START_TIMEOUT)
        except TimeoutError:
            self.unsubscribe(subscriber)
            raise
        assert self.cursor is not None
        return self.cursor

    def unsubscribe(self, subscriber: Subscriber) -> None:
        self.subscribers.discard(subscriber)
        if not self.subscribers and self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self) -> None:
        client = redis.asyncio.Redis.from_url(
            self.url, decode_responses=True, socket_timeout=None, socket_connect_timeout=5
        )
        try:
            while True:
                try:
                    await self._read(client)
                except Exception as error:  # Redis failing, or a bug: the feed carries on
                    await asyncio.sleep(self.guard.failed(error))
        finally:
            with contextlib.suppress(Exception):
                await client.aclose()

    async def _read(self, client: redis.asyncio.Redis) -> None:
        if self.cursor is None:
            newest = await client.xrevrange(keys.DECISIONS_KEY, count=1)
            self.cursor = newest[0][0] if newest else "0-0"
            self.read_at = time.time()
            self._ready.set()
        while True:
            reply = await client.xread(
                {keys.DECISIONS_KEY: self.cursor}, count=READ_COUNT, block=BLOCK_MS
            )
            self.read_at = time.time()
            self.guard.succeeded()
            for _key, entries in reply or ():
                self.cursor = entries[-1][0]
                for decision in decisions.decoded(entries):
                    item = FeedItem(decision)
                    for subscriber in tuple(self.subscribers):
                        try:
                            subscriber.offer(item)
                        except Exception:  # one broken socket must not stop the others
                            log.exception("live feed: a socket refused a decision")


_tails: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, DecisionTail]" = (
    weakref.WeakKeyDictionary()
)


def tail() -> DecisionTail:
    """This event loop's tail (one per web process under uvicorn)."""
    loop = asyncio.get_running_loop()
    found = _tails.get(loop)
    if found is None:
        found = _tails[loop] = DecisionTail(settings.INDEX_REDIS_URL)
    return found
