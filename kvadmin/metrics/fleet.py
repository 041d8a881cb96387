"""The fleet as the index sees it right now: every stream's status and lease, blocks per pod
and medium, live ingest workers. Read in three pipelined round trips whose size grows with the
number of pods and streams, never with the number of blocks (ZCARD, HGETALL of small hashes).

/metrics, the dashboard and /readyz read it; the stream health rules live here too.
"""

import enum
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from kvadmin.index.streams import StreamId
from scoring import keys
from scoring.keys import WORKERS_KEY

FAULTS = ("batches_lost", "bad_frames", "skipped_undecodable", "skipped_malformed")
"""Status counters that mean the index missed part of a stream: lost batches (not repairable
by replay), frames and batches that could not be read. Gaps repaired by replay, publisher
restarts and unknown event tags are normal life and do not count."""


class Health(enum.StrEnum):
    OK = "ok"
    LAGGING = "lagging"
    DEGRADED = "degraded"
    DISCONNECTED = "disconnected"


@dataclass(frozen=True, slots=True)
class EngineRow:
    pod: str
    model: str
    kind: str
    dp_size: int
    enabled: bool


def registered_engines() -> list[EngineRow]:
    from kvadmin.engines.models import Engine

    return [
        EngineRow(*row)
        for row in Engine.objects.order_by("pod").values_list(
            "pod", "model", "kind", "dp_size", "enabled"
        )
    ]


@dataclass(frozen=True, slots=True)
class StreamState:
    id: StreamId
    consumed: bool
    """A ZMQ rank of an enabled engine: some worker should hold its lease and read it. Pushed
    streams (see ingest.pushed) and leftovers of disabled engines are not."""
    status: Mapping[str, str]
    owner: str | None
    lag_seconds: float | None
    applied_at: float | None

    def counter(self, name: str) -> int:
        try:
            return int(self.status.get(name) or 0)
        except ValueError:
            return 0

    @property
    def connected(self) -> bool:
        return self.status.get("connected") == "1" and bool(self.owner)

    @property
    def faults(self) -> int:
        return sum(self.counter(name) for name in FAULTS)

    def health(self, recent_faults: int, lag_threshold: float, now: float) -> Health:
        """1. disconnected: no live worker holds its lease, or the worker lost the socket;
        2. degraded: faults (see FAULTS) in the recent window the caller measured;
        3. lagging: its last applied batch was published more than `lag_threshold` seconds
           before being applied, and that was recent (an idle stream is not lagging);
        4. ok otherwise."""
        if not self.connected:
            return Health.DISCONNECTED
        if recent_faults > 0:
            return Health.DEGRADED
        if (
            self.lag_seconds is not None
            and self.applied_at is not None
            and self.lag_seconds > lag_threshold
            and now - self.applied_at <= 2 * lag_threshold
        ):
            return Health.LAGGING
        return Health.OK


@dataclass(slots=True)
class FleetState:
    taken_at: float
    engines: list[EngineRow]
    pod_models: dict[str, str]
    """`kvadmin:pods`: every pod with entries in the index."""
    streams: list[StreamState]
    blocks: dict[tuple[str, str], int] = field(default_factory=dict)
    """(pod, medium) -> blocks the pod holds in that medium ("" = no medium)."""
    workers: int = 0
    """Ingest workers whose heartbeat is younger than a lease."""

    def blocks_by_medium(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for (_, medium), count in self.blocks.items():
            totals[medium] = totals.get(medium, 0) + count
        return dict(sorted(totals.items(), key=lambda item: -item[1]))

    def totals(self, *counters: str) -> int:
        return sum(stream.counter(name) for stream in self.streams for name in counters)


def read_fleet(
    client: redis.Redis,
    engines: Sequence[EngineRow],
    lease_seconds: float,
    now: float | None = None,
) -> FleetState:
    now = time.time() if now is None else now
    pipe = client.pipeline(transaction=False)
    pipe.hgetall(keys.POD_MODELS_KEY)
    pipe.zcount(WORKERS_KEY, now - lease_seconds, "+inf")
    pod_models, workers = (_texts(r) for r in pipe.execute())

    pods = sorted(set(pod_models) | {e.pod for e in engines})
    for pod in pods:
        pipe.smembers(keys.pod_media_key(pod))
        pipe.smembers(keys.pod_ranks_key(pod))
    replies = pipe.execute()
    media = {pod: sorted(_texts(replies[2 * i])) for i, pod in enumerate(pods)}
    consumed = {StreamId(e.pod, rank) for e in engines if e.enabled for rank in range(e.dp_size)}
    # A registered engine's pushed streams count once they have a status (an accepted push),
    # with or without blocks: their counters tell refused batches too.
    maybe = {StreamId(e.pod, rank, pushed=True) for e in engines for rank in range(e.dp_size)}
    ids = consumed | maybe
    for i, pod in enumerate(pods):
        named = (StreamId.from_name(pod, name) for name in _texts(replies[2 * i + 1]))
        ids |= {stream for stream in named if stream is not None}  # None: an older build's
    streams = sorted(ids)

    blocks_keys = [(pod, medium) for pod in pods for medium in media[pod]]
    for pod, medium in blocks_keys:
        pipe.zcard(keys.residency_key(pod, medium))
    for stream in streams:
        pipe.hgetall(keys.stream_status_key(stream.pod, stream.name))
        pipe.get(keys.stream_lease_key(stream.pod, stream.name))
    replies = pipe.execute()
    blocks = dict(zip(blocks_keys, map(int, replies[: len(blocks_keys)]), strict=True))
    at = len(blocks_keys)
    states = []
    for i, stream in enumerate(streams):
        status = _texts(replies[at + 2 * i])
        if not status and stream in maybe - consumed:
            continue
        states.append(
            StreamState(
                id=stream,
                consumed=stream in consumed,
                status=status,
                owner=_texts(replies[at + 2 * i + 1]),
                lag_seconds=_float(status.get("lag_seconds")),
                applied_at=_float(status.get("last_event_at")),
            )
        )
    return FleetState(now, list(engines), pod_models, states, blocks, int(workers))


def _texts(value: Any) -> Any:
    """Any reply as text, from a bytes or a text client."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, dict):
        return {_texts(k): _texts(v) for k, v in value.items()}
    if isinstance(value, set | list):
        return type(value)(_texts(v) for v in value)
    return value


def _float(value: str | None) -> float | None:
    return float(value) if value else None
