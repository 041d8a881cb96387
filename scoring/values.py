"""Block values as the router reads them (compatibility.md 2.2): "{unix_seconds}" or
"{unix_seconds}|{MEDIUM}".

The timestamp is judged the way kthena's Go router judges it, `strconv.ParseInt(ts, 10, 64)`: an
optional sign and ASCII digits that fit a signed 64-bit integer. Anything else does not parse, and
an owner whose timestamp does not parse is kept (compatibility.md 2.4 step 1), so the exact rule
decides which owners count and must not drift toward Python's more lenient `int()` (which accepts
spaces, underscores and non-ASCII digits).
"""

import re
from typing import NamedTuple

_GO_DECIMAL = re.compile(r"[+-]?[0-9]+")
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


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


def is_stale(value: BlockValue, started_at: int | None) -> bool:
    """True when the value was written at or before the pod's last (re)start: the same second
    counts as before, since the write may have preceded the restart. A pod with no known
    start time, or a timestamp that does not parse, is never stale."""
    return started_at is not None and value.seconds is not None and value.seconds <= started_at
