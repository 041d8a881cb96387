"""How media are ordered and named on every page (residency, feed, dashboard)."""

from collections.abc import Iterable

from scoring.weights import MEDIA, normalize_name

_ORDER = {normalize_name(m.name): m.tier_order for m in MEDIA if m.tier_order is not None}
_STYLED = frozenset({"gpu", "cpu", "cpu_pinned", "disk"})
"""Media with a colour of their own in kvadmin.css (`.m-gpu`...); the others share one."""


def medium_order(media: Iterable[str]) -> list[str]:
    """Best tier first (compatibility.md 3's tier order), then other media by name, no medium
    last."""
    return sorted(
        media,
        key=lambda m: (m == "", _ORDER.get(normalize_name(m), len(_ORDER)), normalize_name(m)),
    )


def medium_class(medium: str | None) -> str:
    """The CSS class of a medium's colour, as on the live feed: "m-none" for no medium."""
    name = normalize_name(medium or "")
    if not name:
        return "m-none"
    return f"m-{name}" if name in _STYLED else "m-other"


def medium_label(medium: str | None) -> str:
    return medium or "no medium"
