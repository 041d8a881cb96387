"""Live topics: each page that updates in place listens on one channel-layer group."""

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

TOPICS = frozenset({"dashboard", "feed", "pods"})


def group_name(topic: str) -> str:
    return f"live.{topic}"


def publish_html(topic: str, html: str) -> None:
    """Send a server-rendered fragment to every browser watching `topic` (htmx ws swaps it)."""
    async_to_sync(get_channel_layer().group_send)(
        group_name(topic), {"type": "live.html", "html": html}
    )
