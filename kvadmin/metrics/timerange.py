"""The time range of the dashboard's and the pod pages' charts: the last 15 min, 1 h, 6 h or
24 h, or a custom span inside the last 24 h (what Redis keeps: minute buckets and pod samples
for a day, the pod samples downsampled beyond the last hour). One parser for every page, so a
range means the same everywhere.

Charts downsample to at most MAX_POINTS bins: a bin is `step` whole minutes.
"""

import math
from dataclasses import dataclass
from datetime import UTC, datetime

PRESETS = {"15m": 900, "1h": 3600, "6h": 6 * 3600, "24h": 86400}
LABELS = {"15m": "last 15 min", "1h": "last hour", "6h": "last 6 hours", "24h": "last 24 hours"}
DEFAULT = "1h"
RETENTION_SECONDS = 86400
"""How far back the charts reach: the history Redis keeps."""
FULL_RESOLUTION_SECONDS = 3600
"""The pod samples (`kvadmin.residency.samples`) are kept as taken, one per beat (5 s), for
this long; older ones one per DOWNSAMPLED_STEP_SECONDS."""
DOWNSAMPLED_STEP_SECONDS = 60
MAX_POINTS = 120
CUSTOM_FORMAT = "%Y-%m-%dT%H:%M"
"""What <input type="datetime-local"> sends (read as UTC)."""


@dataclass(frozen=True, slots=True)
class TimeRange:
    key: str
    """A PRESETS key, or "custom"."""
    start: int
    end: int
    error: str = ""
    """Why a custom range asked for was not taken (the default was)."""

    @property
    def default(self) -> bool:
        return self.key == DEFAULT

    @property
    def label(self) -> str:
        if self.key in LABELS:
            return LABELS[self.key]
        return f"{_text(self.start)} to {_text(self.end)} UTC"

    @property
    def step_minutes(self) -> int:
        """Minutes a chart point covers, so that the range has at most MAX_POINTS."""
        minutes = self.end // 60 - self.start // 60 + 1
        return max(1, math.ceil(minutes / MAX_POINTS))

    def minutes(self) -> list[int]:
        """Every minute (unix seconds // 60) of the range, oldest first."""
        return list(range(self.start // 60, self.end // 60 + 1))

    def query(self) -> dict[str, str]:
        if self.key == "custom":
            return {"range": "custom", "from": _text(self.start), "to": _text(self.end)}
        return {"range": self.key}

    @property
    def custom_from(self) -> str:
        return _text(self.start)

    @property
    def custom_to(self) -> str:
        return _text(self.end)


def parse_range(params: dict[str, str], now: float) -> TimeRange:
    end = int(now)
    key = params.get("range") or DEFAULT
    if key in PRESETS:
        return TimeRange(key, end - PRESETS[key], end)
    if key != "custom":
        return TimeRange(DEFAULT, end - PRESETS[DEFAULT], end, f"unknown range {key!r}")
    try:
        start = _parse(params.get("from", ""))
        stop = _parse(params.get("to", ""))
    except ValueError:
        return _fallback(end, "a custom range needs a start and an end (YYYY-MM-DDTHH:MM, UTC)")
    oldest = end - RETENTION_SECONDS
    if stop <= start:
        return _fallback(end, "a custom range must end after it starts")
    if stop < oldest:
        return _fallback(end, "kvadmin keeps 24 hours of history: that range is older")
    return TimeRange("custom", max(start, oldest), min(stop, end))


def bins(minutes: list[int], step: int) -> list[list[int]]:
    """Consecutive runs of `step` minutes (the last may be shorter)."""
    return [minutes[i : i + step] for i in range(0, len(minutes), step)]


def _fallback(end: int, error: str) -> TimeRange:
    return TimeRange(DEFAULT, end - PRESETS[DEFAULT], end, error)


def _parse(text: str) -> int:
    return int(datetime.strptime(text, CUSTOM_FORMAT).replace(tzinfo=UTC).timestamp())


def _text(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime(CUSTOM_FORMAT)
