"""Fixtures for the residency browser: an index built through the real applier from KV events,
registered engines, and people with and without the right to purge."""

from collections.abc import Callable, Iterable, Iterator

import pytest
import redis
from django.contrib.auth.models import Permission

from kvadmin.engines.models import Engine
from kvadmin.fleet.fleet import Fleet
from kvadmin.fleet.pod import PodConfig
from kvadmin.index.events import BlockRemoved, BlockStored, EventBatch
from kvadmin.index.writer import Applier
from kvadmin.redis_server import free_port
from kvadmin.routing.tokenize import CACHE
from scoring.hashing import hash_block
from tests.index import MODEL

NOW = 1_760_000_000


def tokens(n: int) -> tuple[int, ...]:
    """16 tokens unique to block number n."""
    return tuple(range(n * 16, n * 16 + 16))


def std(n: int) -> int:
    return hash_block(tokens(n))


def engine_hash(n: int, rank: int = 0) -> str:
    """The engine's id of block n on one rank: engines chain hashes, ranks differ."""
    return str(2**63 + 1000 + n + rank * 10**6)


class Index:
    """Feeds KV events to the real Applier, one stream per (pod, rank), like the ingest loop."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.applier = Applier(client)
        self.seqs: dict[tuple[str, int], int] = {}

    def send(self, pod: str, *events: object, at: float = NOW, rank: int = 0, **stream) -> None:
        seq = self.seqs.get((pod, rank), -1) + 1
        self.seqs[pod, rank] = seq
        batch = EventBatch(ts=float(at), events=list(events))  # type: ignore[arg-type]
        model, kind = stream.get("model", MODEL), stream.get("kind", "vllm")
        self.applier.apply_batch(pod, model, kind, rank, seq, batch, now=at)

    def store(self, pod: str, blocks: Iterable[int], medium: str | None = "GPU", **options) -> None:
        """The pod's engine stores blocks (with their tokens) in `medium`, in one event."""
        blocks = list(blocks)
        rank = options.get("rank", 0)
        event = BlockStored(
            tuple(engine_hash(n, rank) for n in blocks),
            tuple(t for n in blocks for t in tokens(n)),
            16,
            medium,
        )
        self.send(pod, event, **options)

    def offload(self, pod: str, blocks: Iterable[int], medium: str = "CPU", **options) -> None:
        """vLLM's offloading connector announces known blocks in another tier, no tokens."""
        rank = options.get("rank", 0)
        event = BlockStored(tuple(engine_hash(n, rank) for n in blocks), (), 0, medium)
        self.send(pod, event, **options)

    def remove(self, pod: str, blocks: Iterable[int], medium: str = "GPU", **options) -> None:
        rank = options.get("rank", 0)
        self.send(pod, BlockRemoved(tuple(engine_hash(n, rank) for n in blocks), medium), **options)


@pytest.fixture
def index(redis_client: redis.Redis) -> Index:
    """An empty index (the test Redis, flushed) and a way to fill it through ingestion."""
    return Index(redis_client)


def register(pod: str, model: str = MODEL, **fields) -> Engine:
    return Engine.objects.create(
        pod=pod,
        model=model,
        kind=fields.pop("kind", "vllm"),
        events_endpoint=fields.pop("events_endpoint", "tcp://127.0.0.1:5557"),
        **fields,
    )


@pytest.fixture
def alice(db, django_user_model):
    """Alice operates the fleet: she may browse, but not change engines."""
    return django_user_model.objects.create_user("alice", password="pw-alice-123")


@pytest.fixture
def bob(db, django_user_model):
    """Bob administers engines: he may purge a pod's index entries."""
    user = django_user_model.objects.create_user("bob", password="pw-bob-12345")
    user.user_permissions.add(Permission.objects.get(codename="change_engine"))
    return user


@pytest.fixture
def browsing(client, alice):
    """A test client logged in as Alice."""
    client.force_login(alice)
    return client


@pytest.fixture
def tokenizing_pod() -> Iterator[Callable[[str], PodConfig]]:
    """Start simulated pods of MODEL serving /tokenize; each stopped after the test. The token
    cache starts and ends empty, so each test asks the pods."""
    fleets: list[Fleet] = []

    def start(name: str) -> PodConfig:
        ports = {"events_port": free_port(), "replay_port": free_port(), "http_port": free_port()}
        config = PodConfig(name=name, kind="vllm", model=MODEL, **ports)  # type: ignore[arg-type]
        fleets.append(Fleet([config]).start())
        return config

    CACHE.clear()
    yield start
    CACHE.clear()
    for fleet in fleets:
        fleet.stop()
