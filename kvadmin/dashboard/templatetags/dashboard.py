"""Number formatting for the dashboard tiles."""

from django import template

from kvadmin.media import medium_class

register = template.Library()
register.filter("medium_class", medium_class)


@register.filter
def per_second(rate: float | None) -> str:
    """`{{ tiles.events_per_s|per_second }}`: "—" until two samples exist, then a short rate."""
    if rate is None:
        return "—"
    if rate >= 100:
        return f"{rate:,.0f}"
    return f"{rate:.1f}"


@register.filter
def percent(ratio: float | None) -> str:
    return "—" if ratio is None else f"{ratio * 100:.1f} %"


@register.filter
def seconds(value: float | None) -> str:
    """A duration in the largest unit that fits: "850 ms", "12 s", "4 min", "3 h"."""
    if value is None:
        return "—"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if value >= size:
            return f"{value // size:.0f} {unit}"
    return f"{value:.0f} s"


@register.filter
def thousands(count: int | None) -> str:
    return f"{count:,}" if isinstance(count, int) else "—"
