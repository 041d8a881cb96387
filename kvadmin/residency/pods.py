"""The /pods/ pages: every engine (and every pod the index still holds blocks of) with its
blocks per medium, its streams' health and its engine's health from evidence.

Five round trips per index group (`kvadmin.index.groups`) whatever the index size: the
pods' models and kinds; their media and ranks; then per pod and medium a ZCARD and the newest
entry of the residency ZSET; per stream its status hash; per engine its evidence
(`engines.health`, on REDIS_URL). The counts are exact (ZCARD is O(1));
nothing is scanned.
"""

import time
from dataclasses import dataclass, field

import redis

from kvadmin.engines.evidence import SEVERITY, EngineHealth
from kvadmin.engines.health import EngineFacts, engine_healths
from kvadmin.engines.models import Engine
from kvadmin.index.groups import group_of, index_groups
from kvadmin.index.inventory import read_inventory
from kvadmin.index.status import StreamStatus
from kvadmin.media import medium_order
from kvadmin.redis_clients import index_client
from kvadmin.residency.streams import pod_started_at, pod_streams, read_streams
from scoring import keys


class UnknownPod(LookupError):
    pass


@dataclass(frozen=True, slots=True)
class Segment:
    medium: str
    count: int
    percent: float
    """Width in the stacked bar, relative to the largest pod on the page."""


@dataclass(slots=True)
class PodSummary:
    pod: str
    model: str
    kind: str
    registered: bool
    enabled: bool
    counts: dict[str, int]
    """Blocks per medium (residency ZSET sizes), best tier first; "" is no medium."""
    streams: list[StreamStatus]
    last_store_at: int | None
    """The newest residency score of the pod: when ingestion last stored a block for it."""
    health: EngineHealth | None
    """Its engine's health from evidence (engines.evidence); None when no engine is registered."""
    segments: list[Segment] = field(default_factory=list)
    serve_address: str = ""
    """Where a gateway sends its inference traffic (`Engine.serve_address`); "" when unset."""

    @property
    def severity(self) -> int:
        """For sorting, worst first; pods without an engine last."""
        return SEVERITY[self.health.state] if self.health else len(SEVERITY)

    @property
    def total(self) -> int:
        """Blocks summed over media: a block held in two media counts twice."""
        return sum(self.counts.values())

    @property
    def started_at(self) -> int | None:
        return pod_started_at(self.streams)

    @property
    def last_event_at(self) -> int | None:
        """When a stream last applied a batch, if ingestion records it (`last_event_at`);
        otherwise the pod's last store, the closest thing the index knows."""
        recorded = [s.seconds("last_event_at") for s in self.streams]
        return max((t for t in recorded if t is not None), default=self.last_store_at)

    @property
    def unknown_tags(self) -> list[tuple[str, str, int]]:
        """(stream label, tag, events) of event types the pod's engines sent that kvadmin
        skipped as unknown: a newer engine version than this kvadmin knows."""
        return [(s.label, tag, n) for s in self.streams for tag, n in s.unknown_tags]


@dataclass(slots=True)
class PodsOverview:
    pods: list[PodSummary]
    now: int

    @property
    def models(self) -> list[str]:
        return sorted({pod.model for pod in self.pods})

    @property
    def states(self) -> list[str]:
        """The engine states to filter by (engines.evidence), and "unregistered"."""
        return [state.value for state in SEVERITY] + ["unregistered"]


def pods_overview(client: redis.Redis | None = None) -> PodsOverview:
    """Every registered engine and every pod with entries in the index, by model and pod."""
    return PodsOverview(_summaries(client, None), int(time.time()))


def pod_summary(pod: str, client: redis.Redis | None = None) -> PodSummary:
    """One pod, registered or still in the index; raises UnknownPod otherwise."""
    summaries = _summaries(client, pod)
    if not summaries:
        raise UnknownPod(pod)
    return summaries[0]


def _summaries(client: redis.Redis | None, only: str | None) -> list[PodSummary]:
    """Through `client` alone when given (one index), else over every index group: each
    group's registered engines are those of the models it holds, and a pod it still holds
    of a model moved to another group is shown once, from the model's group."""
    engines = Engine.objects.all() if only is None else Engine.objects.filter(pod=only)
    registered = {engine.pod: engine for engine in engines}
    if client is not None:
        summaries = _group_summaries(client, client, only, registered, set())
    else:
        summaries = []
        for group in index_groups():
            here = {p: e for p, e in registered.items() if group_of(e.model) == group}
            elsewhere = registered.keys() - here.keys()
            summaries += _group_summaries(group.client(), index_client(), only, here, elsewhere)
    _scale(summaries)
    return sorted(summaries, key=lambda s: (s.model, s.pod))


def _group_summaries(
    client: redis.Redis,
    app: redis.Redis,
    only: str | None,
    registered: dict[str, Engine],
    elsewhere: set[str],
) -> list[PodSummary]:
    if only is None:
        inventory = read_inventory(client, also=registered)
    else:
        inventory = {
            pod: held
            for pod, held in read_inventory(client, only=[only]).items()
            if held.model is not None or pod in registered
        }
    inventory = {pod: held for pod, held in inventory.items() if pod not in elsewhere}
    pods = list(inventory)
    if not pods:
        return []
    media = {pod: medium_order(held.media) for pod, held in inventory.items()}
    streams_of = {
        pod: pod_streams(
            pod, registered[pod].dp_size if pod in registered else 0, held.stream_names
        )
        for pod, held in inventory.items()
    }
    pipe = client.pipeline(transaction=False)
    for pod in pods:
        for medium in media[pod]:
            pipe.zcard(keys.residency_key(pod, medium))
            pipe.zrange(keys.residency_key(pod, medium), 0, 0, desc=True, withscores=True)
    replies = iter(pipe.execute())
    streams = read_streams(client, streams_of)
    facts = [EngineFacts(pod, e.enabled, e.dp_size, streams[pod]) for pod, e in registered.items()]
    healths = engine_healths(app, facts)
    summaries = []
    for pod in pods:
        counts, newest = {}, []
        for medium in media[pod]:
            counts[medium] = int(next(replies))
            newest += [keys.residency_seconds(score) for _, score in next(replies)]
        engine = registered.get(pod)
        summaries.append(
            PodSummary(
                pod=pod,
                model=engine.model if engine else inventory[pod].model,
                kind=engine.kind if engine else inventory[pod].kind or "",
                registered=engine is not None,
                enabled=engine.enabled if engine else False,
                counts=counts,
                streams=streams[pod],
                last_store_at=max(newest, default=None),
                health=healths.get(pod),
                serve_address=engine.serve_address if engine else "",
            )
        )
    return summaries


def _scale(summaries: list[PodSummary]) -> None:
    """Bar widths relative to the largest pod, so bars compare across pods."""
    largest = max((summary.total for summary in summaries), default=0) or 1
    for summary in summaries:
        summary.segments = [
            Segment(medium, count, 100.0 * count / largest)
            for medium, count in summary.counts.items()
            if count
        ]
