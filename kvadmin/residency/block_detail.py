"""One block of one model: every owner, in which media since when, whether kthena's router
would count it, and the engine hashes that name it.

Reads: the block's matrix key, then per owner its media, ranks and kind, then per owner and
medium its residency score and refcount and per stream its status: four round trips whatever
the index size.

Engine hashes: the index maps engine hash -> std (each stream's engine blocks,
`kvadmin.index.engine_blocks`, and kthena's mapping keys, both keyed by engine hash) and keeps
no reverse map, because ingestion never needs one. Finding the engine hashes of one std is a
scan of the pod's engine blocks, so the page does it on request and in bounded steps: each
request reads `SCAN_BUCKETS` of the 1,000 buckets of one stream and answers with what it found
plus where to continue; htmx asks for the next step until the scan ends. A pod with 100,000
cached blocks holds about 100 per bucket: a step reads about 10,000 entries, ten steps a
stream.
"""

import time
from dataclasses import dataclass

import redis

from kvadmin.engines.models import Engine
from kvadmin.index import engine_blocks
from kvadmin.index.groups import group_of, group_of_pod
from kvadmin.index.inventory import read_inventory
from kvadmin.index.status import StreamStatus
from kvadmin.index.streams import StreamId
from kvadmin.residency.streams import (
    pod_started_at,
    pod_streams,
    read_streams,
)
from scoring import keys
from scoring.values import BlockValue, is_stale, parse_value

SCAN_BUCKETS = 100


class UnknownBlock(LookupError):
    pass


@dataclass(frozen=True, slots=True)
class Residency:
    medium: str
    stored_at: int | None
    """The pod's last store of the block in this medium (its residency score)."""
    holders: int
    """How many (rank, engine hash) pairs of the pod hold it there (its refcount)."""


@dataclass(slots=True)
class OwnerDetail:
    pod: str
    raw: str
    """The matrix field value, as kthena's router reads it."""
    value: BlockValue
    residency: list[Residency]
    streams: list[StreamStatus]
    registered: bool
    kind: str

    @property
    def started_at(self) -> int | None:
        return pod_started_at(self.streams)

    @property
    def fresh(self) -> bool:
        """kthena's router counts the owner (compatibility.md 2.4 step 1): written after the pod's
        last start, or either time unknown."""
        return not is_stale(self.value, self.started_at)


@dataclass(slots=True)
class BlockDetail:
    model: str
    std: int
    owners: list[OwnerDetail]
    now: int


def block_detail(model: str, std: int, client: redis.Redis | None = None) -> BlockDetail:
    """Raises UnknownBlock when no pod holds `std` of `model` (in the model's index group)."""
    client = client or group_of(model).client()
    fields: dict[str, str] = client.hgetall(keys.block_key(model, std))
    if not fields:
        raise UnknownBlock(f"{model}@{std}")
    pods = sorted(fields)
    inventory = read_inventory(client, only=pods)
    media = {pod: list(held.media) for pod, held in inventory.items()}
    engines = {e.pod: e for e in Engine.objects.filter(pod__in=pods)}
    streams_of = {
        pod: pod_streams(pod, engines[pod].dp_size if pod in engines else 0, held.stream_names)
        for pod, held in inventory.items()
    }
    residency = _residency(client, std, media)
    streams = read_streams(client, streams_of)
    owners = [
        OwnerDetail(
            pod=pod,
            raw=fields[pod],
            value=parse_value(fields[pod]),
            residency=residency[pod],
            streams=streams[pod],
            registered=pod in engines,
            kind=engines[pod].kind if pod in engines else inventory[pod].kind or "",
        )
        for pod in pods
    ]
    return BlockDetail(model, std, owners, int(time.time()))


def _residency(
    client: redis.Redis, std: int, media: dict[str, list[str]]
) -> dict[str, list[Residency]]:
    """Residency score and refcount of the block per owner and medium it holds, one round trip.
    Media where the pod does not hold this block are left out."""
    pipe = client.pipeline(transaction=False)
    wanted = [(pod, medium) for pod, pod_media in media.items() for medium in pod_media]
    for pod, medium in wanted:
        pipe.zscore(keys.residency_key(pod, medium), str(std))
        pipe.hget(keys.refcount_key(pod), f"{std}|{medium}")
    replies = pipe.execute() if wanted else []
    held: dict[str, list[Residency]] = {pod: [] for pod in media}
    for i, (pod, medium) in enumerate(wanted):
        score, shared = replies[2 * i], replies[2 * i + 1]
        if score is not None or shared is not None:
            stored_at = keys.residency_seconds(score) if score is not None else None
            # The refcount field exists only for more than one holder (see index.writer).
            holders = int(shared) if shared is not None else 1
            held[pod].append(Residency(medium, stored_at, holders))
    return held


@dataclass(frozen=True, slots=True)
class EngineBlock:
    engine_hash: str
    media: tuple[str, ...]
    """The media this stream holds the engine block in, the primary tier first."""
    mapping: bool
    """kthena's mapping key for it exists."""
    mapping_ttl: int | None
    """Seconds left on the mapping key (None: absent or no expiry)."""


@dataclass(slots=True)
class ScanStep:
    pod: str
    stream: StreamId | None
    """The stream this step read (None: the pod has no engine blocks)."""
    found: list[EngineBlock]
    next_stream: StreamId | None
    """Where the next step starts, with `next_cursor`; None when the scan is complete."""
    next_cursor: str

    @property
    def label(self) -> str:
        return self.stream.label if self.stream else ""


def scan_engine_hashes(
    pod: str, std: int, stream: StreamId | None, cursor: str, client: redis.Redis | None = None
) -> ScanStep:
    """One step over the engine blocks of `stream` of `pod` (the first stream when None) for
    the engine hashes naming `std`; `cursor` is the bucket to start at. The pod's ranks SET
    names every stream with engine blocks; the step moves on to the next stream when this
    stream's scan ends."""
    if client is None:
        model = Engine.objects.filter(pod=pod).values_list("model", flat=True).first()
        client = group_of_pod(pod, model).client()
    streams = pod_streams(pod, 0, client.smembers(keys.pod_ranks_key(pod)))
    if stream is None:
        if not streams:
            return ScanStep(pod, None, [], None, "0")
        stream = streams[0]
    next_cursor, entries = engine_blocks.scan(client, pod, stream.name, int(cursor), SCAN_BUCKETS)
    wanted = str(std)
    matches = [(eh, entry) for eh, entry in entries.items() if entry.std == wanted]
    found: list[EngineBlock] = []
    if matches:
        kind = client.hget(keys.POD_KINDS_KEY, pod) or ""
        pipe = client.pipeline(transaction=False)
        for eh, _ in matches:
            pipe.ttl(keys.engine_hash_key(kind, pod, eh))
        for (eh, entry), ttl in zip(matches, pipe.execute(), strict=True):
            found.append(EngineBlock(eh, entry.media, ttl != -2, ttl if ttl >= 0 else None))
    if int(next_cursor):
        return ScanStep(pod, stream, found, stream, str(next_cursor))
    later = streams[streams.index(stream) + 1 :] if stream in streams else []
    return ScanStep(pod, stream, found, later[0] if later else None, "0")
