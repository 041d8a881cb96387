"""The live feed's websocket (/ws/feed/): new decisions as server-rendered rows, coalesced.

Per socket: a filter (model, pod, ...) and the feed's order from the query string, a buffer
the process's `DecisionTail` fills without blocking, and a task that sends at most
FRAMES_PER_SECOND frames, each with every buffered row up to FRAME_ROWS (older ones are
counted as "N more not shown").
While paused, rows are kept (up to PAUSED_ROWS, the rest counted) and a counter is sent
instead; resuming sends what was kept.
"""

import asyncio
import contextlib
import json
import logging
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qs, urlencode

import redis
from channels.exceptions import DenyConnection
from django.template.loader import render_to_string
from django.urls import reverse

from kvadmin.live.consumers import LiveConsumer
from kvadmin.routing.decisions import Decision
from kvadmin.routing.ordering import ORDERS, OrderCursor, Summary, log_order, ordered
from kvadmin.routing.presenters import row_html
from kvadmin.routing.tail import DecisionTail, FeedItem, tail

log = logging.getLogger(__name__)

FEED_ROWS = 50
FRAMES_PER_SECOND = 10
FRAME_ROWS = 25
PAUSED_ROWS = 200
RATE_SECONDS = 1.0


POLICIES = ("ttft", "kthena")


@dataclass(frozen=True, slots=True)
class FeedFilter:
    """Which decisions the feed shows: a model, a pod (chosen or scored), a policy, and only
    ties, only decisions no pod had a hit for, only those priced with a stale engine load;
    and in which order (ordering.ORDERS), over the whole log."""

    model: str | None = None
    pod: str | None = None
    policy: str | None = None
    tie: bool = False
    no_hit: bool = False
    stale_load: bool = False
    order: str = "newest"

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> "FeedFilter":
        """From a query string's values (a page's GET or the socket's query string); unknown
        policies, orders and flags other than "1" are ignored."""
        policy = params.get("policy") or None
        order = params.get("order") or "newest"
        return cls(
            model=params.get("model") or None,
            pod=params.get("pod") or None,
            policy=policy if policy in POLICIES else None,
            tie=params.get("tie") == "1",
            no_hit=params.get("no_hit") == "1",
            stale_load=params.get("stale_load") == "1",
            order=order if order in ORDERS else "newest",
        )

    @classmethod
    def from_query(cls, query_string: bytes) -> "FeedFilter":
        query = parse_qs(query_string.decode("latin-1"))
        return cls.from_params({name: values[0] for name, values in query.items()})

    def as_query(self) -> dict[str, str]:
        """The filter as query parameters (only those set), for links and the socket URL."""
        values = {"model": self.model, "pod": self.pod, "policy": self.policy}
        values["order"] = self.order if self.order != "newest" else None
        flags = {"tie": self.tie, "no_hit": self.no_hit, "stale_load": self.stale_load}
        return {k: v for k, v in values.items() if v} | {k: "1" for k, on in flags.items() if on}

    @property
    def order_label(self) -> str:
        return ORDERS[self.order]

    def matches(self, decision: Decision | Summary) -> bool:
        return (
            (self.model is None or decision.model == self.model)
            and (self.pod is None or decision.involves(self.pod))
            and (self.policy is None or decision.policy == self.policy)
            and (not self.tie or decision.tie_break)
            and (not self.no_hit or decision.longest_match == 0)
            and (not self.stale_load or bool(decision.stale_loads))
        )


@dataclass(frozen=True, slots=True)
class Pager:
    """The feed's "more" control: the next page's URL (filter and order) and the cursor it
    starts after, which the page script sends as `after` (static/kvadmin/feed.js keeps it at
    the last row shown while live rows arrive and old ones are trimmed)."""

    url: str
    after: str
    done: bool
    """The log holds no more (hidden until the page script trims rows)."""


def feed_pager(chosen: FeedFilter, after: OrderCursor | None) -> Pager:
    query = urlencode(chosen.as_query())
    return Pager(reverse("feed-rows") + (f"?{query}" if query else ""), str(after or ""), not after)


class FeedConsumer(LiveConsumer):
    async def joined(self) -> None:
        self.filter = FeedFilter.from_query(self.scope.get("query_string", b""))
        self.pending: deque[FeedItem] = deque()
        self.not_shown = 0
        self.not_shown_total = 0
        self.paused = False
        self.paused_count = 0
        self.paused_shown = 0
        self.toggled = False
        self.arrived = 0
        self.rate_since = (time.monotonic(), 0)
        self.rate_shown: str | None = None
        self.read_shown: int | None = None
        self.wake = asyncio.Event()
        self.frames: asyncio.Task[None] | None = None
        self.tail: DecisionTail | None = tail()
        try:
            await self.tail.subscribe(self)
        except (TimeoutError, redis.RedisError):
            self.tail = None
            raise DenyConnection from None

    async def opened(self) -> None:
        try:
            page = await asyncio.to_thread(
                ordered, self.filter.order, FEED_ROWS, self.filter.matches
            )
        except redis.RedisError:
            await self.close(code=1011)
            return
        if page.newest:  # what the page read is shown or behind its pager: not sent again
            seen = log_order(page.newest)
            kept = [item for item in self.pending if log_order(item.log_id) > seen]
            if len(kept) < len(self.pending):  # what overflowed is older still: shown now
                self.not_shown = 0
            self.pending = deque(kept)
        rows = [row_html(decision) for decision in page.decisions]
        context = {
            "rows": rows,
            "read_at": self._read_at() or time.time(),
            "order": self.filter.order,
            "more": feed_pager(self.filter, page.next_cursor),
        }
        await self.send(text_data=render_to_string("routing/feed.html#opened", context))
        self.frames = asyncio.create_task(self._send_frames(), name="feed-frames")

    async def disconnect(self, code: int) -> None:
        if getattr(self, "tail", None) is not None:
            self.tail.unsubscribe(self)
        if getattr(self, "frames", None) is not None:
            self.frames.cancel()
        await super().disconnect(code)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """ws-send messages from the page: {"action": "pause"} or {"action": "resume"}."""
        try:
            action = json.loads(text_data or "{}").get("action")
        except (ValueError, AttributeError):
            return
        if action in ("pause", "resume") and self.paused != (action == "pause"):
            self.paused = action == "pause"
            self.paused_count = 0
            self.toggled = True
            self.wake.set()

    def offer(self, item: FeedItem) -> None:
        """Called by the tail for each new decision: buffer it if it matches, never block."""
        if not self.filter.matches(item.decision):
            return
        self.arrived += 1
        self.paused_count += self.paused
        self.pending.append(item)
        if len(self.pending) > (PAUSED_ROWS if self.paused else FRAME_ROWS):
            self.pending.popleft()
            self.not_shown += 1
        self.wake.set()

    async def _send_frames(self) -> None:
        interval = 1 / FRAMES_PER_SECOND
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wake.wait(), RATE_SECONDS)
                self.wake.clear()
                frame = self._frame()
                if frame:
                    await self.send(text_data=frame)
                await asyncio.sleep(interval)
        except asyncio.CancelledError:
            raise
        except Exception:  # the socket went away mid-send; disconnect() cleans up
            log.debug("live feed: frames stopped", exc_info=True)

    def _frame(self) -> str:
        context: dict[str, object] = {}
        if not self.paused and (self.pending or self.not_shown):
            context["rows"] = [item.html() for item in reversed(self.pending)]
            context["not_shown"] = self.not_shown
            self.not_shown_total += self.not_shown
            context["not_shown_total"] = self.not_shown_total
            self.pending.clear()
            self.not_shown = 0
        read_at = self._read_at()
        if self.toggled or (self.paused and self.paused_count != self.paused_shown):
            context["paused"] = self.paused
            context["paused_count"] = self.paused_shown = self.paused_count
            context["read_at"] = read_at or time.time()
            self.toggled = False
        elif not self.paused and read_at is not None and int(read_at) != self.read_shown:
            context["read_at"] = read_at  # the log answered: the feed is live, if quiet
            self.read_shown = int(read_at)
        rate = self._rate()
        if rate is not None:
            context["rate"] = rate
        if not context:
            return ""
        return render_to_string("routing/feed.html#frame", context)

    def _read_at(self) -> float | None:
        return self.tail.read_at if self.tail is not None else None

    def _rate(self) -> str | None:
        """Matching decisions per second over the last RATE_SECONDS, when its text changed."""
        since, count = self.rate_since
        now = time.monotonic()
        if now - since < RATE_SECONDS:
            return None
        self.rate_since = (now, self.arrived)
        rate = (self.arrived - count) / (now - since)
        text = f"{rate:.1f}" if rate < 100 else f"{rate:.0f}"
        if text == self.rate_shown:
            return None
        self.rate_shown = text
        return text
