"""Block values as the router reads them (compatibility.md 2.2): "{unix_seconds}" or
"{unix_seconds}|{MEDIUM}", and which of the two the index writes (`ValueFormat`, compatibility.md
2.7).

The timestamp is judged the way kthena's Go router judges it, `strconv.ParseInt(ts, 10, 64)`: an
optional sign and ASCII digits that fit a signed 64-bit integer. Anything else does not parse, and
an owner whose timestamp does not parse is kept (compatibility.md 2.4 step 1), so the exact rule
decides which owners count and must not drift toward Python's more lenient `int()` (which accepts
spaces, underscores and non-ASCII digits).
"""

import re
from collections.abc import Iterable
from enum import StrEnum
from typing import NamedTuple

_GO_DECIMAL = re.compile(r"[+-]?[0-9]+")
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


class ValueFormat(StrEnum):
    """How the index writes a matrix value (the INDEX_VALUE_FORMAT knob, compatibility.md 2.7).

    kthena main reads the whole value as a timestamp in its restart filter and its garbage
    collection, so a tiered value defeats both there; kthena with PR #1293 reads either. The
    media stay in kvadmin's own per-medium residency whatever the format, which kvadmin's pages
    and scoring read under `LEGACY`.
    """

    TIERED = "tiered"
    """"{unix_seconds}|{MEDIUM}": kthena with PR #1293 weighs each block by its tier."""
    LEGACY = "legacy"
    """"{unix_seconds}": what kthena main parses; every block counts 1."""

    @property
    def kthena(self) -> str:
        """The kthena version an index of this format serves, for operators."""
        if self is ValueFormat.TIERED:
            return "kthena with PR #1293 (tier weights)"
        return "kthena main (no tier weights)"

    @property
    def router_version(self) -> str:
        """The ROUTER_VERSION knob's value of the kthena this format serves."""
        return "pr1293" if self is ValueFormat.TIERED else "main"

    def field_value(self, timestamp: int | str, medium: str | None) -> str:
        """The field value of a pod's last store at `timestamp` whose best medium is `medium`:
        "ts" for no medium or the legacy format, otherwise "ts|MEDIUM"."""
        if medium and self is ValueFormat.TIERED:
            return f"{timestamp}|{medium}"
        return str(timestamp)


ROUTER_VERSIONS = {fmt.router_version: fmt for fmt in ValueFormat}
"""The ROUTER_VERSION knob's values, each with the value format that kthena reads right."""


class BlockValue(NamedTuple):
    """One owner's value: when the block was written and in which medium. A named tuple: the
    baseline reader builds one per owner per block, thousands per request."""

    timestamp: str
    """The timestamp text as written."""
    medium: str | None
    """The medium as the engine spelled it; None for a legacy value or an empty medium."""
    seconds: int | None
    """The timestamp as an integer, None when it does not parse (see the module docstring)."""


def parse_seconds(text: str) -> int | None:
    """`text` as Go's `strconv.ParseInt(text, 10, 64)` reads it, None where that fails."""
    if len(text) < 19 and text.isascii() and text.isdigit():  # the usual case, no regex
        return int(text)
    if _GO_DECIMAL.fullmatch(text) is None:
        return None
    seconds = int(text)
    return seconds if _INT64_MIN <= seconds <= _INT64_MAX else None


def parse_value(raw: str) -> BlockValue:
    """Split on the first "|" only: "ts|a|b" has medium "a|b", and "ts|" has none."""
    timestamp, _, medium = raw.partition("|")
    return BlockValue(timestamp, medium or None, parse_seconds(timestamp))


def pod_start(rank_starts: Iterable[int | None]) -> int | None:
    """The pod's start as kvadmin knows it from its data-parallel ranks' streams
    (compatibility.md 2.4 step 1): each rank's `started_at` is the start of the run it
    publishes now, the second before kvadmin saw that run begin, and None while kvadmin has
    seen no restart of it. A restart of one rank inside a running container purges that
    rank's own entries; it is not a start of the pod. Every block a live rank holds was
    written after that rank's start, so the earliest of the ranks' starts drops nothing a
    live rank holds, and after a container restart (every rank starts a new run) it drops
    exactly what was written before the container started, as kthena's container start
    does. A rank with no recorded start may hold blocks of any age: then the pod's start is
    unknown (None), as it is for a pod with no ranks."""
    earliest: int | None = None
    for started in rank_starts:
        if started is None:
            return None
        earliest = started if earliest is None else min(earliest, started)
    return earliest


def is_stale(value: BlockValue, started_at: int | None) -> bool:
    """True when the value was written at or before the pod's last (re)start: the same second
    counts as before, since the write may have preceded the restart. A pod with no known
    start time, or a timestamp that does not parse, is never stale."""
    return started_at is not None and value.seconds is not None and value.seconds <= started_at
