"""Engines of two models publishing to the ingest loops a worker runs, one per index group."""

from collections.abc import Iterator
from contextlib import contextmanager

from kvadmin.engines.models import Engine
from kvadmin.fleet.publisher import Publisher
from kvadmin.fleet.wire import Encoding
from kvadmin.index import status
from kvadmin.index.groups import group_of
from kvadmin.index.streams import StreamId
from kvadmin.ingest.reader import IngestLoop
from kvadmin.ingest.runner import build_loops, run_loops
from tests.waiting import wait_until


def register(pod: str, model: str, publisher: Publisher) -> None:
    Engine.objects.create(
        pod=pod,
        model=model,
        kind="vllm",
        events_endpoint=publisher.endpoint,
        replay_endpoint=publisher.replay_endpoint,
        topic="kv-events",
    )


def publisher() -> Publisher:
    return Publisher(encoding=Encoding.VLLM_MAP, topic=b"kv-events")


@contextmanager
def worker(engines: dict[str, tuple[str, Publisher]], name: str) -> Iterator[list[IngestLoop]]:
    """A worker's loops (`runner.build_loops`) running until the block ends, each engine's
    stream connected (pod -> (model, publisher))."""
    loops = build_loops(worker_id=name)
    threads = run_loops(loops)
    try:
        for pod, (model, pub) in engines.items():
            client = group_of(model).client()
            wait_until(
                lambda pod=pod, client=client: (
                    status.read_statuses(client, [StreamId(pod, 0)])[0].connected
                ),
                what=f"{pod} connected in its group",
            )
            pub.wait_for_subscribers()
        yield loops
    finally:
        for loop in loops:
            loop.stop()
        for thread in threads:
            thread.join(timeout=15)
