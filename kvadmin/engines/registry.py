"""Registry change notifications: readers reload the engine list when the version moves."""

from django.db import close_old_connections

from kvadmin.engines.models import Engine
from kvadmin.ingest.streams import StreamId, StreamSpec
from kvadmin.redis_clients import index_client
from scoring import keys

REGISTRY_VERSION_KEY = keys.REGISTRY_VERSION_KEY


def bump_registry_version() -> int:
    return int(index_client().incr(REGISTRY_VERSION_KEY))


def registry_version() -> int:
    return int(index_client().get(REGISTRY_VERSION_KEY) or 0)


def load_streams() -> list[StreamSpec]:
    """Every stream of every enabled engine: one per data-parallel rank."""
    close_old_connections()
    try:
        return [
            StreamSpec(
                id=StreamId(engine.pod, rank),
                model=engine.model,
                kind=engine.kind,
                events_endpoint=engine.events_endpoint_for(rank),
                replay_endpoint=engine.replay_endpoint_for(rank),
                topic=engine.topic.encode(),
                block_size=engine.block_size,
            )
            for engine in Engine.objects.filter(enabled=True)
            for rank in range(engine.dp_size)
        ]
    finally:
        close_old_connections()
