"""Template filters of the residency pages."""

from django import template
from django.utils.html import format_html_join
from django.utils.safestring import SafeString

from kvadmin import media
from kvadmin.figures import figure
from kvadmin.residency.blocks import matched_medium
from kvadmin.residency.explain import GridRow
from kvadmin.residency.streams import stream_link

register = template.Library()

register.filter("medium_class", media.medium_class)
register.filter("medium_label", media.medium_label)
register.filter("stream_link", stream_link)
register.filter("figure", figure)
register.filter("matched_medium", matched_medium)


@register.filter
def age(seconds: float | None, now: float) -> str:
    """`{{ ts|age:now }}`: how long ago, in the largest unit that fits ("42 s", "3 h")."""
    if seconds is None:
        return "never"
    elapsed = max(0, int(now - seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if elapsed >= size:
            return f"{elapsed // size} {unit}"
    return f"{elapsed} s"


@register.simple_tag
def grid_cells(row: GridRow) -> SafeString:
    """A grid row's cells, built here: 128 blocks x dozens of pods is thousands of cells, too
    many for template loops within the page's time budget."""
    stop = row.stops_at if row.stops_at < len(row.cells) else 0  # a full match does not stop
    return format_html_join(
        "",
        '<td class="cell {}" title="block {}: {}"></td>',
        (
            (f"{cell.css} stop" if i + 1 == stop else cell.css, i, cell.title)
            for i, cell in enumerate(row.cells)
        ),
    )


@register.filter
def weight(weights: dict[str, float], medium: str | None) -> float:
    """`{{ decision.weights|weight:medium }}`: the weight a decision used for a medium."""
    return weights.get(medium or "", 1.0)
