"""The fleet as the index sees it right now: every stream's status and lease, blocks per pod
and medium, live ingest workers. Read in three pipelined round trips whose size grows with the
number of pods and streams, never with the number of blocks (ZCARD, HGETALL of small hashes).

/metrics, the dashboard and /readyz read it (over every index group: `read_groups_fleet`); the
stream health rules live here too.
"""

import enum
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import redis

from kvadmin.index import status
from kvadmin.index.groups import group_of, index_groups
from kvadmin.index.inventory import read_inventory
from kvadmin.index.status import StreamStatus
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
class StreamState(StreamStatus):
    consumed: bool
    """A ZMQ rank of an enabled engine: some worker should hold its lease and read it. Pushed
    streams (see ingest.pushed) and leftovers of disabled engines are not."""

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
    inventory = read_inventory(client, also=(e.pod for e in engines))
    pod_models = {pod: held.model for pod, held in inventory.items() if held.model is not None}
    consumed = {StreamId(e.pod, rank) for e in engines if e.enabled for rank in range(e.dp_size)}
    # A registered engine's pushed streams count once they have a status (an accepted push),
    # with or without blocks: their counters tell refused batches too.
    maybe = {StreamId(e.pod, rank, pushed=True) for e in engines for rank in range(e.dp_size)}
    ids = consumed | maybe
    for held in inventory.values():
        ids |= set(held.streams)
    streams = sorted(ids)

    blocks_keys = [(pod, medium) for pod, held in inventory.items() for medium in held.media]
    pipe = client.pipeline(transaction=False)
    pipe.zcount(WORKERS_KEY, now - lease_seconds, "+inf")
    for pod, medium in blocks_keys:
        pipe.zcard(keys.residency_key(pod, medium))
    for stream in streams:
        status.queue_read(pipe, stream)
    workers, *replies = pipe.execute()
    blocks = dict(zip(blocks_keys, map(int, replies[: len(blocks_keys)]), strict=True))
    at = len(blocks_keys)
    states = []
    for i, stream in enumerate(streams):
        read = status.from_replies(stream, *replies[at + 2 * i : at + 2 * i + 2])
        if read.status or stream not in maybe - consumed:
            states.append(StreamState(read.id, read.status, read.owner, stream in consumed))
    return FleetState(now, list(engines), pod_models, states, blocks, int(workers))


def read_groups_fleet(
    engines: Sequence[EngineRow], lease_seconds: float, now: float | None = None
) -> FleetState:
    """`read_fleet` of every index group, each with the engines of the models it holds, as one
    fleet. A pod a group still holds for a model moved to another group is left to GC there.
    Workers: the fewest live in any group, since each group needs one (every worker runs a
    loop per group)."""
    now = time.time() if now is None else now
    groups = index_groups()
    parts = []
    for group in groups:
        mine = [engine for engine in engines if group_of(engine.model) == group]
        elsewhere = {engine.pod for engine in engines} - {engine.pod for engine in mine}
        part = read_fleet(group.client(), mine, lease_seconds, now)
        parts.append((part, elsewhere))
    if len(parts) == 1:
        return replace(parts[0][0], engines=list(engines))
    fleet = FleetState(now, list(engines), {}, [], {}, min(part.workers for part, _ in parts))
    for part, elsewhere in parts:
        fleet.pod_models |= {p: m for p, m in part.pod_models.items() if p not in elsewhere}
        fleet.streams += [stream for stream in part.streams if stream.id.pod not in elsewhere]
        fleet.blocks |= {key: n for key, n in part.blocks.items() if key[0] not in elsewhere}
    fleet.streams.sort(key=lambda stream: stream.id)
    return fleet
