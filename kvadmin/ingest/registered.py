"""The streams to read: built by the transport from the engine registry, so the registry
needs nothing of the reader."""

from django.db import close_old_connections

from kvadmin.engines.models import Engine
from kvadmin.index.streams import StreamId
from kvadmin.ingest.streams import StreamSpec


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
