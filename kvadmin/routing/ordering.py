"""The live feed's order over the whole decision log: newest first, highest score first or
slowest first, with counts of what the filter matched.

The log is capped (DECISIONS_MAX entries, 10,000 by default), so ordering all of it is
feasible, but reading it whole for each page is not: an entry is about 3 KB of JSON (scores
and TTFT estimates), and reading and decoding 10,000 of them takes about a second. So each
process keeps a projection of the log, the few fields the feed's filters and orders read
(`Summary`), brought up to date on each read with only what changed: the entries appended
after the last one it holds (one XRANGE) and the log's first id (one XRANGE COUNT 1), below
which the log trimmed what the projection still holds. A page then filters and sorts the
projection in memory, and reads in full only the decisions it shows (one pipelined XRANGE
each). The first read of a process reads the whole log once.

Cursors are keyset positions (value, log id): a next page is the decisions ranked after the
cursor, so pages neither repeat nor skip one while decisions arrive and old ones are trimmed.
"""

import heapq
import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import msgspec
import redis

from kvadmin.redis_clients import REDIS_OUTAGES, index_client
from kvadmin.routing.decisions import Decision, decoded
from scoring.keys import DECISIONS_KEY

ORDERS = {"newest": "newest first", "score": "highest score first", "latency": "slowest first"}
"""By log id, by the chosen pod's score, by total time; ties newest first."""

_READ_COUNT = 1000
COLD_WAIT_SECONDS = 1.0
"""How long a page waits for another's cold read of the log before it reads for itself."""
_CURSOR = re.compile(r"(-?[0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?)_([0-9]+)-([0-9]+)", re.ASCII)


class _Scored(msgspec.Struct):
    pod: str
    score: int


class Summary(msgspec.Struct, kw_only=True):
    """What the feed's filters (`consumers.FeedFilter.matches`) and orders read of a
    decision, with the same names as `Decision`'s."""

    model: str
    chosen: str | None
    tie_break: bool
    longest_match: int
    scores: list[_Scored]
    timings_ms: dict[str, float]
    policy: str = "kthena"
    """Absent when it is (`Decision.policy`: the log omits defaults)."""
    stale_loads: list[str] = []

    def involves(self, pod: str) -> bool:
        return pod == self.chosen or any(scored.pod == pod for scored in self.scores)

    def value(self, order: str) -> float:
        """What `order` sorts by, largest first."""
        if order == "score":
            return float(next((s.score for s in self.scores if s.pod == self.chosen), 0))
        if order == "latency":
            return float(self.timings_ms.get("total", 0.0))
        return 0.0


_summary = msgspec.json.Decoder(Summary)


def log_order(log_id: str) -> tuple[int, int]:
    """A stream id as numbers (milliseconds, sequence), to compare ids in order."""
    ms, _, seq = log_id.partition("-")
    return int(ms), int(seq or 0)


@dataclass(frozen=True, slots=True, order=True)
class OrderCursor:
    """A decision's place in an order: its value, then its log id (milliseconds, sequence)."""

    value: float
    ms: int
    seq: int

    def __str__(self) -> str:
        return f"{self.value!r}_{self.ms}-{self.seq}"  # repr: the exact float back

    @classmethod
    def parse(cls, text: str) -> "OrderCursor":
        """Raises ValueError for text that is not a cursor."""
        found = _CURSOR.fullmatch(text)
        if not found or not math.isfinite(value := float(found[1])):
            raise ValueError(f"{text!r} is not a feed cursor ({{value}}_{{log id}})")
        return cls(value, int(found[2]), int(found[3]))


class _Projection:
    """This process's copy of the log's summaries, oldest first (see the module).

    Updates read Redis outside the lock: a stalled Redis then costs each page its own
    timeout, not the timeouts of every page queued behind it; two pages updating at once both
    read what is new, and the one that read further is kept. A cold read (the whole log, about
    a second) is made by one page at a time: the others wait for it up to COLD_WAIT_SECONDS
    and then only update, so a burst of pages after a start reads the log once. A page that
    waited for a cold read that failed on a Redis outage fails at once, as that read did: a
    stall costs a page at most one timeout, or that wait plus its own."""

    def __init__(self) -> None:
        self.entries: list[tuple[tuple[int, int], str, Summary, dict[str, float]]] = []
        """(log id as numbers, log id, summary, its value per order), oldest first."""
        self.lock = threading.Lock()
        self.cold = threading.Lock()
        self.cold_failed = float("-inf")
        """When a cold read last failed on a Redis outage (time.monotonic())."""

    def current(
        self, client: redis.Redis
    ) -> list[tuple[tuple[int, int], str, Summary, dict[str, float]]]:
        asked = time.monotonic()
        if self.entries or not self.cold.acquire(timeout=COLD_WAIT_SECONDS):
            return self._updated(client)
        try:
            if self.cold_failed > asked:
                raise redis.TimeoutError("the decision log's read failed while this page waited")
            return self._updated(client)
        except REDIS_OUTAGES:
            self.cold_failed = time.monotonic()
            raise
        finally:
            self.cold.release()

    def _updated(
        self, client: redis.Redis
    ) -> list[tuple[tuple[int, int], str, Summary, dict[str, float]]]:
        first = client.xrange(DECISIONS_KEY, count=1)
        start = log_order(first[0][0]) if first else None
        with self.lock:
            held = [entry for entry in self.entries if start and entry[0] >= start]
        after = f"({held[-1][1]}" if held else "-"
        while first and (entries := client.xrange(DECISIONS_KEY, min=after, count=_READ_COUNT)):
            for log_id, fields in entries:
                try:
                    summary = _summary.decode(fields["d"])
                except (KeyError, msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                    continue  # not a decision (another version's): `decoded` skips it too
                values = {order: summary.value(order) for order in ORDERS}
                held.append((log_order(log_id), log_id, summary, values))
            after = f"({entries[-1][0]}"
            if len(entries) < _READ_COUNT:
                break
        with self.lock:
            if not held or not self.entries or held[-1][0] >= self.entries[-1][0]:
                self.entries = held
        return held


_projections: dict[tuple[object, ...], _Projection] = {}
_projections_lock = threading.Lock()


def _projection(client: redis.Redis) -> _Projection:
    """One projection per Redis database this process reads the log from."""
    kwargs = client.connection_pool.connection_kwargs
    where = tuple(kwargs.get(name) for name in ("host", "port", "path", "db"))
    with _projections_lock:
        return _projections.setdefault(where, _Projection())


@dataclass(frozen=True, slots=True)
class OrderedPage:
    decisions: list[Decision]
    """At most `limit`, in the order."""
    next_cursor: OrderCursor | None
    """The last decision's place when more follow; None at the end."""
    matched: int
    """Decisions in the whole log that the filter accepts."""
    logged: int
    """Decisions in the whole log."""
    newest: str
    """The newest log id read ("" for an empty log): later decisions were not considered."""


def ordered(
    order: str,
    limit: int,
    where: Callable[[Summary], bool] | None = None,
    after: OrderCursor | None = None,
    client: redis.Redis | None = None,
) -> OrderedPage:
    """One page of the whole log's decisions that `where` accepts, largest `order` value
    first (newest first among equals), after `after`."""
    client = client or index_client()
    entries = _projection(client).current(client)
    bound = (after.value, after.ms, after.seq) if after else None
    matched = 0
    candidates: list[tuple[tuple[float, int, int], str]] = []  # plain tuples: 10,000 of them
    for (ms, seq), log_id, summary, values in entries:
        if where is not None and not where(summary):
            continue
        matched += 1
        place = (values[order], ms, seq)
        if bound is None or place < bound:
            candidates.append((place, log_id))
    top = heapq.nlargest(limit + 1, candidates) if limit > 0 else []
    shown = top[:limit]
    pipe = client.pipeline(transaction=False)
    for _, log_id in shown:
        pipe.xrange(DECISIONS_KEY, log_id, log_id)
    found = [entry for reply in (pipe.execute() if shown else []) for entry in reply]
    next_cursor = OrderCursor(*shown[-1][0]) if len(top) > limit else None
    newest = entries[-1][1] if entries else ""
    return OrderedPage(list(decoded(found)), next_cursor, matched, len(entries), newest)
