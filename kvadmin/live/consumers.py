"""The websocket behind every live page: logged-in users only, one group per topic.

Origin is checked by SameOriginValidator (kvadmin/live/origins.py) in asgi.py; the session
by AuthMiddlewareStack.
Frames are HTML fragments with hx-swap-oob, which htmx's ws extension swaps into the page.
"""

from typing import Any

import redis
from channels.generic.websocket import AsyncWebsocketConsumer

from kvadmin.live.groups import TOPICS, group_name, join


class LiveConsumer(AsyncWebsocketConsumer):
    topic: str

    async def connect(self) -> None:
        user = self.scope.get("user")
        self.topic = self.scope["url_route"]["kwargs"]["topic"]
        if user is None or not user.is_authenticated or self.topic not in TOPICS:
            await self.close(code=4403)
            return
        try:
            await join(self.topic, self.channel_name)
        except (TimeoutError, redis.RedisError):  # Redis down or stalled: the page retries
            await self.close(code=1011)
            return
        await self.joined()
        await self.accept()
        await self.opened()

    async def joined(self) -> None:
        """Hook for pages with more to follow than the group: subscribe here, before the socket
        opens, so nothing sent after the browser sees it open is missed. May raise
        DenyConnection."""

    async def opened(self) -> None:
        """Hook: the socket is open; send the first frame."""

    async def disconnect(self, code: int) -> None:
        if getattr(self, "topic", None) in TOPICS:
            await self.channel_layer.group_discard(group_name(self.topic), self.channel_name)

    async def live_html(self, event: dict[str, Any]) -> None:
        await self.send(text_data=event["html"])
