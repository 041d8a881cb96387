"""Predicted against delivered time to first token, request by request, from the recorded
outcomes (kvadmin.routing.outcomes): what the pod page charts as the prediction's error over
time, and what calibration (kvadmin.weights.evidence) fits the TTFT parameters from beside the
engines' counters.

Only outcomes that can be compared are kept: the decision priced its chosen pod (a `ttft`
estimate), the outcome reported a time to first token, and the request was served where it was
routed (a gateway's fallback served it elsewhere: that pod's time says nothing about the
estimate).

The decision log holds the newest DECISIONS_MAX decisions: the reads scan it newest first and
stop at `limit` comparable outcomes, one HMGET per page of the log. A decision is decoded into
`Routed`, the few fields a comparison reads: msgspec skips the rest (the scores, the dropped
pods, the timings) without building them, several times faster than a whole `Decision`.
"""

import math
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import msgspec
import redis

from kvadmin.routing import decisions
from kvadmin.routing.decisions import CandidateEstimate
from kvadmin.routing.outcomes import Outcome, outcomes_of
from scoring import keys


class Routed(msgspec.Struct, kw_only=True):
    """What a comparison reads of a logged `Decision` (same names, same types; an entry from
    before the decision took the API's names has no `decision_id` and is left out)."""

    decision_id: str
    ts: float
    model: str
    chosen: str | None
    requester: str = ""
    estimates: list[CandidateEstimate] = []


_decoder = msgspec.json.Decoder(Routed)
_outcome_decoder = msgspec.json.Decoder(Outcome)


@dataclass(frozen=True, slots=True)
class Delivered:
    """One routed request: what the `ttft` policy predicted for its pod, and what the engine
    delivered."""

    pod: str
    model: str
    requester: str
    at: float
    """When the decision was made (unix seconds)."""
    prompt_tokens: int
    cached_tokens: int
    ttft_s: float
    estimate: CandidateEstimate
    """The chosen pod's estimate: its predicted wait, prefill, running requests and media."""

    @property
    def predicted_s(self) -> float:
        return self.estimate.wait_s + self.estimate.prefill_s

    @property
    def error(self) -> float:
        """abs(predicted - delivered) / delivered (0 for a delivered time of 0)."""
        if self.ttft_s <= 0:
            return 0.0
        return abs(self.predicted_s - self.ttft_s) / self.ttft_s


def delivered(
    client: redis.Redis,
    limit: int,
    *,
    pod: str | None = None,
    since: float = 0.0,
) -> list[Delivered]:
    """The newest `limit` comparable outcomes (of decisions that chose `pod`, made at or
    after `since`), newest first."""
    found: list[Delivered] = []
    if limit <= 0:
        return found

    for page in _pages(client, pod, since):
        reported = outcomes_of(client, [decision.decision_id for decision in page])
        for decision in page:
            outcome = reported.get(decision.decision_id)
            compared = _compared(decision, outcome) if outcome is not None else None
            if compared is not None:
                found.append(compared)
                if len(found) >= limit:
                    return found
    return found


def _pages(client: redis.Redis, pod: str | None, since: float) -> Iterator[list[Routed]]:
    """Each page of the log down to `since`: its decisions that chose `pod` (any pod), newest
    first. Entries that are not decisions are skipped."""
    for entries in decisions.newest_pages(client):
        page, older = [], False
        for _, fields in entries:
            try:
                decision = _decoder.decode(fields["d"])
            except (KeyError, msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                continue
            if decision.ts < since:
                older = True
                break
            if decision.chosen is not None and pod in (None, decision.chosen):
                page.append(decision)
        yield page
        if older:
            return


@dataclass(frozen=True, slots=True)
class LogRead:
    """What one read of the outcome log (keys.OUTCOME_LOG_KEY) after a cursor found."""

    found: list[Delivered]
    """The comparable outcomes among the entries read, in arrival order."""
    last_id: str
    """The last entry read; "" when none was."""
    read: int
    """Entries read, comparable or not."""
    added: int
    """Entries ever added to the log (0: there is no log)."""
    length: int
    first_id: str
    """The log's oldest entry ("" when empty): past the cursor, entries were trimmed unread."""


def logged_after(client: redis.Redis, after: str, count: int) -> LogRead:
    """The oldest `count` entries of the outcome log after the entry `after` ("": from the
    start), with the log's size and history. One round trip."""
    pipeline = client.pipeline(transaction=False)
    pipeline.xinfo_stream(keys.OUTCOME_LOG_KEY)
    pipeline.xrange(keys.OUTCOME_LOG_KEY, min=f"({after}" if after else "-", count=count)
    info, entries = pipeline.execute(raise_on_error=False)
    if isinstance(info, redis.ResponseError):  # no log yet
        return LogRead([], "", 0, 0, 0, "")
    if isinstance(entries, Exception):
        raise entries
    found = []
    for _, fields in entries:
        compared = _logged(fields)
        if compared is not None:
            found.append(compared)
    return LogRead(
        found,
        entries[-1][0] if entries else "",
        len(entries),
        int(info.get("entries-added", 0)),
        int(info["length"]),
        info.get("recorded-first-entry-id") or (info.get("first-entry") or ("",))[0],
    )


def _logged(fields: dict[str, str]) -> Delivered | None:
    try:
        decision = _decoder.decode(fields["d"])
        outcome = _outcome_decoder.decode(fields["o"])
    except (KeyError, msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    return _compared(decision, outcome) if decision.chosen is not None else None


def _compared(decision: Routed, outcome: Outcome) -> Delivered | None:
    if outcome.ttft_ms is None or outcome.served not in (None, decision.chosen):
        return None
    estimate = next((e for e in decision.estimates if e.pod == decision.chosen), None)
    if estimate is None or decision.chosen is None:
        return None
    return Delivered(
        pod=decision.chosen,
        model=decision.model,
        requester=decision.requester,
        at=decision.ts,
        prompt_tokens=outcome.prompt_tokens,
        cached_tokens=outcome.cached_tokens,
        ttft_s=outcome.ttft_ms / 1000,
        estimate=estimate,
    )


@dataclass(frozen=True, slots=True)
class ErrorBin:
    """The prediction's error over the outcomes of one stretch of time."""

    start: int
    """Unix seconds."""
    outcomes: int
    median: float
    """Median of abs(predicted - delivered) / delivered."""
    p90: float
    ratio: float
    """Median of predicted / delivered: below 1, kvadmin predicts too little."""

    @property
    def started_at(self) -> datetime:
        return datetime.fromtimestamp(self.start, UTC)

    @property
    def median_percent(self) -> float:
        return self.median * 100

    @property
    def p90_percent(self) -> float:
        return self.p90 * 100


def error_bins(found: Sequence[Delivered], seconds: int) -> list[ErrorBin]:
    """`found` binned by `seconds` of decision time, newest bin first."""
    bins: dict[int, list[Delivered]] = {}
    for item in found:
        start = int(item.at // seconds * seconds)
        bins.setdefault(start, []).append(item)
    return [error_bin(start, bins[start]) for start in sorted(bins, reverse=True)]


def error_bin(start: int, found: Sequence[Delivered]) -> ErrorBin:
    errors = sorted(item.error for item in found)
    ratios = [item.predicted_s / item.ttft_s for item in found if item.ttft_s > 0]
    return ErrorBin(
        start=start,
        outcomes=len(found),
        median=statistics.median(errors),
        p90=_quantile(errors, 0.9),
        ratio=statistics.median(ratios) if ratios else math.nan,
    )


def _quantile(ordered: Sequence[float], q: float) -> float:
    """The nearest-rank quantile of sorted values (a bin's p90 is one of its outcomes)."""
    return ordered[max(math.ceil(q * len(ordered)) - 1, 0)]
