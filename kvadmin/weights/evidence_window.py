"""Calibration's delivered outcomes, folded as they arrive: a cursor on the outcome log
(keys.OUTCOME_LOG_KEY) and a bounded window of outcome windows per model, pod and requester,
both kept in Redis (keys.CALIBRATION_EVIDENCE_KEY), so that a run reads only what arrived
since the last one instead of rescanning the decision log.

1. Read the log after the cursor, at most CALIBRATION_OUTCOMES entries (the rest next run).
2. Tell whether entries past the cursor were trimmed unread (the log is capped): the log's
   `entries-added` less the entries counted up to the cursor (`consumed`) less those still in
   the log is what was lost. It is counted, and the fold goes on from what is there.
3. Fold each comparable outcome of an enabled engine into its (model, pod, requester) line:
   the newest fit.MAX_POINTS windows (all a line reads) of the last CALIBRATION_OUTCOME_SECONDS,
   at most MAX_REQUESTERS lines per pod (the longest silent goes first). Pairs no longer
   served are dropped. Sizes are bounded by the fleet, whatever the requesters post.
4. Write the changed lines, the cursor and a new generation in one MULTI under WATCH: two
   calibrators (several beat or worker processes) never fold an entry twice; the one whose
   write lost re-reads and folds from the winner's cursor. A restarted worker goes on from
   the cursor kept in Redis.

Each process keeps the window it last read or wrote beside its generation, and decodes the
hash again only when another process wrote it.
"""

import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

import msgspec
import redis

from kvadmin.conf import knob
from kvadmin.metrics.families import label_field
from kvadmin.routing.prediction_error import Delivered, LogRead, logged_after
from kvadmin.weights.fit import MAX_POINTS, Window
from scoring import keys

MAX_REQUESTERS: Final = 16
"""Lines kept per pod: requesters are API tokens and gateways, few per fleet."""
MAX_REQUESTER_CHARS: Final = 128
_ATTEMPTS: Final = 3
_FIELD_PREFIX: Final = "w:"


class Kept(msgspec.Struct, array_like=True, frozen=True):
    """One outcome's window as the hash keeps it (a window of one request)."""

    at: float
    """When its decision was made (unix seconds): the window ages out by it."""
    computed_tokens: float
    prefill_s: float
    running: float
    lower_hits: float

    @classmethod
    def of(cls, at: float, window: Window) -> "Kept":
        return cls(at, window.computed_tokens, window.prefill_s, window.running, window.lower_hits)

    def window(self) -> Window:
        return Window(1.0, self.computed_tokens, self.prefill_s, self.running, self.lower_hits)


Lines = dict[str, list[Kept]]
"""Requester -> its windows of one pod, oldest first."""

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Lines)


@dataclass(slots=True)
class Evidence:
    """The folded outcomes and where the fold stands in the log."""

    cursor: str = ""
    """The last log entry folded ("": none yet)."""
    consumed: int = 0
    """Entries the log had been given up to the cursor, folded or lost."""
    generation: str = ""
    lost: int = 0
    """Entries trimmed from the log before a run read them, since the window began."""
    lines: dict[str, Lines] = field(default_factory=dict)
    """Hash field ("w:{model}US{pod}") -> its lines."""


@dataclass(frozen=True, slots=True)
class Followed:
    reported: dict[str, dict[str, list[Window]]]
    """Pod -> requester -> windows, oldest first: fit.fit's `reported`."""
    folded: int
    """Log entries read by this run."""
    lost: int
    """Entries this run found trimmed unread."""


WindowOf = Callable[[Delivered], Window | None]

_cached = Evidence()


def follow(
    client: redis.Redis,
    served: set[tuple[str, str]],
    window_of: WindowOf,
    now: float | None = None,
) -> Followed:
    """Fold what the outcome log gained since the last run into the window (steps 1-4), and
    the window's outcomes of the `served` (pod, model) pairs."""
    global _cached
    now = time.time() if now is None else now
    since = now - knob("CALIBRATION_OUTCOME_SECONDS")
    fields = {_field(model, pod): pod for pod, model in served}
    evidence, read, lost = _cached, None, 0
    for _ in range(_ATTEMPTS):
        with client.pipeline() as pipe:
            try:
                pipe.watch(keys.CALIBRATION_EVIDENCE_KEY)
                evidence = _load(pipe)
                read = logged_after(client, evidence.cursor, knob("CALIBRATION_OUTCOMES"))
                lost, consumed = position(evidence.cursor, evidence.consumed, read)
                changed = folded(evidence.lines, read.found, fields, window_of, since)
                if read.read or lost or changed:
                    evidence = _written(pipe, evidence, read, lost, consumed, changed)
            except redis.WatchError:
                continue  # another calibrator folded meanwhile: fold after its cursor
        _cached = evidence
        return Followed(reported(evidence.lines, fields, since), read.read, lost)
    return Followed(reported(evidence.lines, fields, since), 0, 0)


def position(cursor: str, consumed: int, read: LogRead) -> tuple[int, int]:
    """(entries trimmed past the cursor unread, entries consumed once `read` is folded)."""
    if consumed > read.added:
        consumed = 0  # the log was deleted and began again
    if not cursor:  # the first read: what was trimmed before it was never calibration's
        return 0, read.added - read.length + read.read
    lost = 0
    if read.length and _entry_id(read.first_id) > _entry_id(cursor):
        lost = max(read.added - consumed - read.length, 0)
    return lost, consumed + lost + read.read


def folded(
    lines: Mapping[str, Lines],
    found: Iterable[Delivered],
    fields: Mapping[str, str],
    window_of: WindowOf,
    since: float,
) -> dict[str, Lines]:
    """The fields (of `fields`: field -> pod) that `found` changes, as they become (step 3);
    empty lines for fields of pairs no longer served. Pure: `lines` is left as it was."""
    changed: dict[str, Lines] = {name: {} for name in lines if name not in fields}
    for item in found:
        name = _field(item.model, item.pod)
        window = window_of(item) if name in fields else None
        if window is None or item.at < since:
            continue
        if name not in changed:
            changed[name] = {who: list(kept) for who, kept in lines.get(name, {}).items()}
        line = changed[name].setdefault(item.requester[:MAX_REQUESTER_CHARS], [])
        line.append(Kept.of(item.at, window))
    for name, of_pod in changed.items():
        for who in list(of_pod):
            kept = [k for k in of_pod[who][-MAX_POINTS:] if k.at >= since]
            if kept:
                of_pod[who] = kept
            else:
                del of_pod[who]
        for who in sorted(of_pod, key=lambda who: of_pod[who][-1].at)[:-MAX_REQUESTERS]:
            del of_pod[who]
        changed[name] = of_pod
    return changed


def reported(
    lines: Mapping[str, Lines], fields: Mapping[str, str], since: float
) -> dict[str, dict[str, list[Window]]]:
    """Pod -> requester -> its windows since `since`, of the fields (field -> pod) asked for."""
    found: dict[str, dict[str, list[Window]]] = {}
    for name, pod in fields.items():
        for who, kept in lines.get(name, {}).items():
            windows = [k.window() for k in kept if k.at >= since]
            if windows:
                found.setdefault(pod, {})[who] = windows
    return found


def _load(pipe: redis.client.Pipeline) -> Evidence:
    """The evidence in Redis: the process's own copy when no one wrote since."""
    cursor, consumed, generation, lost = pipe.hmget(
        keys.CALIBRATION_EVIDENCE_KEY, "cursor", "consumed", "generation", "lost"
    )
    if generation is not None and generation == _cached.generation:
        return _cached
    lines = {}
    for name, text in pipe.hgetall(keys.CALIBRATION_EVIDENCE_KEY).items():
        if name.startswith(_FIELD_PREFIX):
            try:
                lines[name] = _decoder.decode(text)
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                continue  # not ours (another version's): folded again from new outcomes
    return Evidence(cursor or "", _count(consumed), generation or "", _count(lost), lines)


def _written(
    pipe: redis.client.Pipeline,
    evidence: Evidence,
    read: LogRead,
    lost: int,
    consumed: int,
    changed: dict[str, Lines],
) -> Evidence:
    """Write what the fold changed in one transaction (WatchError: another wrote first)."""
    lines = {**evidence.lines, **changed}
    emptied = [name for name, of_pod in changed.items() if not of_pod]
    for name in emptied:
        del lines[name]
    after = Evidence(
        read.last_id or evidence.cursor, consumed, uuid.uuid4().hex, evidence.lost + lost, lines
    )
    pipe.multi()
    pipe.hset(
        keys.CALIBRATION_EVIDENCE_KEY,
        mapping={
            "cursor": after.cursor,
            "consumed": after.consumed,
            "generation": after.generation,
            "lost": after.lost,
            **{name: _encoder.encode(of_pod) for name, of_pod in changed.items() if of_pod},
        },
    )
    if emptied:
        pipe.hdel(keys.CALIBRATION_EVIDENCE_KEY, *emptied)
    pipe.execute()
    return after


def _field(model: str, pod: str) -> str:
    return _FIELD_PREFIX + label_field((model, pod))


def _entry_id(text: str) -> tuple[int, int]:
    milliseconds, _, sequence = text.partition("-")
    return int(milliseconds), int(sequence or 0)


def _count(text: str | None) -> int:
    try:
        return max(int(text or 0), 0)
    except ValueError:
        return 0
