"""Live topics: each page that updates in place listens on one channel-layer group.

The channel layer's connections have no socket timeout (its receive blocks), so a group
operation made for a request or a task is bounded here instead: a stalled Redis fails it
after GROUP_TIMEOUT_SECONDS rather than hanging the caller.
"""

import asyncio
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

TOPICS = frozenset({"dashboard", "feed", "pods"})


def group_name(topic: str) -> str:
    return f"live.{topic}"


def group_timeout() -> float:
    """A group operation is a round trip or two: twice a request-path Redis command."""
    return 2 * settings.REDIS_TIMEOUT_SECONDS


async def join(topic: str, channel_name: str) -> None:
    async with asyncio.timeout(group_timeout()):
        await get_channel_layer().group_add(group_name(topic), channel_name)


async def _send(topic: str, message: dict[str, Any]) -> None:
    async with asyncio.timeout(group_timeout()):
        await get_channel_layer().group_send(group_name(topic), message)


def publish_html(topic: str, html: str) -> None:
    """Send a server-rendered fragment to every browser watching `topic` (htmx ws swaps it)."""
    async_to_sync(_send)(topic, {"type": "live.html", "html": html})
