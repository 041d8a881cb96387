"""`{% freshness %}`: the marker every live page shows (see static/kvadmin/console.js): when its
data was read, and whether updates still arrive."""

from datetime import UTC, datetime

from django import template

register = template.Library()


@register.inclusion_tag("_freshness.html")
def freshness(
    marker_id: str,
    taken_at: float,
    period: float,
    live_root: str = "",
    oob: bool = False,
    paused: bool = False,
) -> dict[str, object]:
    """`{% freshness "pods-updated" overview.now 5 live_root="#pods-live" %}`: `period` is how
    often updates are due (seconds); `live_root` the element whose socket or poll brings them."""
    second = int(taken_at)
    at = datetime.fromtimestamp(second, UTC)
    return {
        "marker_id": marker_id,
        "taken_at": second,
        "iso": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "clock": at.strftime("%H:%M:%S UTC"),
        "period": f"{period:g}",
        "live_root": live_root,
        "oob": oob,
        "paused": paused,
    }
