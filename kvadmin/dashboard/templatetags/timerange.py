"""`{% time_range_form span %}`: the time-range control of the dashboard and the pod pages."""

from django import template

from kvadmin.metrics.timerange import FULL_RESOLUTION_SECONDS, LABELS, MAX_POINTS, TimeRange

register = template.Library()


@register.inclusion_tag("_time_range.html")
def time_range_form(span: TimeRange) -> dict[str, object]:
    return {
        "span": span,
        "presets": LABELS.items(),
        "max_points": MAX_POINTS,
        "full_resolution_minutes": FULL_RESOLUTION_SECONDS // 60,
    }
